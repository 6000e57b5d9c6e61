//! Binds each fixture `behavior` to an implementation: the test behaviours here, the security
//! ones to the crate's built-in guard and redactor.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use undolog_interceptors::builtin::{CrossBoundaryGuard, SecretRedactor};
use undolog_interceptors::wire::{Mutation, Validation};
use undolog_interceptors::{
    Descriptor, Error, Interceptor, InterceptorType, Invocation, Mode, Outcome, Phase,
};

use super::fixture::FixtureInterceptor;

/// The servers of the tools the security fixtures call (passed to the guard as its config).
pub(super) fn tool_servers() -> Value {
    json!({ "toolServers": {
        "read_file": "filesystem", "write_file": "filesystem", "list_directory": "filesystem",
        "read_query": "sqlite", "write_query": "sqlite", "list_tables": "sqlite"
    }})
}

/// The descriptor a fixture interceptor declares.
pub(super) fn descriptor(i: &FixtureInterceptor) -> Descriptor {
    let kind: InterceptorType = serde_json::from_value(json!(i.kind)).expect("fixture type");
    let phases: &[Phase] = match i.phases.as_str() {
        "request" => &[Phase::Request],
        "response" => &[Phase::Response],
        "both" => &[Phase::Request, Phase::Response],
        other => panic!("unknown phases `{other}` in fixture"),
    };
    let events: Vec<&str> = i.events.iter().map(String::as_str).collect();
    let mut d = Descriptor::new(&i.name, kind, &events, phases);
    d.mode = match i.mode.as_deref() {
        None => Mode::Active,
        Some(m) => serde_json::from_value(json!(m)).expect("fixture mode"),
    };
    d.fail_open = i.fail_open;
    d
}

/// The interceptor that implements a fixture interceptor's behavior.
pub(super) fn bind(i: &FixtureInterceptor) -> Arc<dyn Interceptor> {
    let d = descriptor(i);
    match i.behavior.as_str() {
        "cross-boundary-guard" => Arc::new(CrossBoundaryGuard::with_descriptor(d, BTreeMap::new())),
        "secretless-redactor" => Arc::new(SecretRedactor::with_descriptor(d)),
        "allow-all" => Arc::new(Behavior {
            d,
            kind: Kind::AllowAll,
        }),
        "deny-all" => Arc::new(Behavior {
            d,
            kind: Kind::DenyAll,
        }),
        "require-note" => Arc::new(Behavior {
            d,
            kind: Kind::RequireNote,
        }),
        "require-uppercase-note" => Arc::new(Behavior {
            d,
            kind: Kind::RequireUppercaseNote,
        }),
        "uppercase-note" => Arc::new(Behavior {
            d,
            kind: Kind::UppercaseNote,
        }),
        "crash" => Arc::new(Behavior {
            d,
            kind: Kind::Crash,
        }),
        other => panic!("unknown behavior `{other}`: add it to the adapter"),
    }
}

#[derive(Debug)]
enum Kind {
    AllowAll,
    DenyAll,
    RequireNote,
    RequireUppercaseNote,
    UppercaseNote,
    Crash,
}

#[derive(Debug)]
struct Behavior {
    d: Descriptor,
    kind: Kind,
}

fn note(payload: &Value) -> Option<&str> {
    payload.get("arguments")?.get("note")?.as_str()
}

#[async_trait]
impl Interceptor for Behavior {
    fn descriptor(&self) -> &Descriptor {
        &self.d
    }

    async fn invoke(&self, inv: Invocation) -> Result<Outcome, Error> {
        let validation = |ok: bool, message: &str| {
            Ok(Outcome::Validation(if ok {
                Validation::pass()
            } else {
                Validation::deny(message)
            }))
        };
        match self.kind {
            Kind::AllowAll => validation(true, ""),
            Kind::DenyAll => validation(false, "denied by policy"),
            Kind::RequireNote => validation(
                note(&inv.payload).is_some_and(|n| !n.is_empty()),
                "note is required",
            ),
            Kind::RequireUppercaseNote => validation(
                note(&inv.payload).is_some_and(|n| n == n.to_uppercase()),
                "note must be uppercase",
            ),
            Kind::UppercaseNote => {
                let Some(upper) = note(&inv.payload).map(str::to_uppercase) else {
                    return Ok(Outcome::Mutation(Mutation::unchanged(inv.payload)));
                };
                let mut payload = inv.payload;
                payload["arguments"]["note"] = json!(upper);
                Ok(Outcome::Mutation(Mutation::changed(payload)))
            }
            Kind::Crash => Err(Error::Handler {
                name: self.d.name.clone(),
                reason: "crash behavior".into(),
            }),
        }
    }
}
