//! The SEP-2624 conformance adapter: replays the language-neutral fixtures in
//! `shared/conformance/interceptors/` through the four adapter calls (create session, list,
//! invoke, chain), twice: over a real MCP connection (the fixture's interceptors registered on an
//! `InterceptorServer`, served by rmcp over an in-memory duplex pipe, reached by an rmcp client;
//! the chain built from the interceptors that client discovers with `interceptors/list` and
//! invokes with `interceptor/invoke`), and in process (the same registry and chain, no wire).

mod behaviors;
mod fixture;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rmcp::ServiceExt;
use serde_json::{Value, json};
use undolog_interceptors::wire::{InvokeParams, ListParams};
use undolog_interceptors::{
    Chain, ChainRequest, Error, InterceptorClient, InterceptorServer, InvocationContext, Member,
    Phase, Registry,
};

use fixture::{
    DecisionExpectation, Fixture, FixtureInterceptor, InvokeExpectation, Manifest, Step,
};

/// The shared fixtures: `UNDOLOG_CONFORMANCE_DIR` when set, else `shared/conformance/` beside
/// the repository (the workplace keeps it at /work/shared, a checkout's sibling). Never skipped:
/// without the fixtures the test fails and says where it looked.
fn suite_dir() -> PathBuf {
    let beside_repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance");
    let candidates: Vec<PathBuf> = std::env::var_os("UNDOLOG_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([beside_repo, PathBuf::from("/work/shared/conformance")])
        .map(|dir| dir.join("interceptors"))
        .collect();
    candidates
        .iter()
        .find(|dir| dir.join("manifest.json").is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no interceptor conformance fixtures in {candidates:?}; set UNDOLOG_CONFORMANCE_DIR \
                 to the folder that holds interceptors/manifest.json"
            )
        })
}

/// How the adapter reaches the fixture's interceptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reach {
    /// Over a real MCP connection: an `InterceptorServer` served by rmcp over an in-memory pipe,
    /// an rmcp client, and a chain of the remote interceptors that client discovered.
    Mcp,
    /// In process: the registry called directly and a chain of the same interceptor objects (how
    /// the gateway runs its built-ins).
    InProcess,
}

enum Backend {
    Mcp(InterceptorClient),
    InProcess(Registry),
}

/// One adapter session: fresh interceptors, the way to list and invoke them, and a chain of them.
struct Session {
    backend: Backend,
    chain: Chain,
}

impl Session {
    /// `createSession(interceptors)`.
    async fn create(interceptors: &[FixtureInterceptor], reach: Reach) -> Session {
        let mut registry = Registry::new();
        for i in interceptors {
            registry
                .register(behaviors::bind(i))
                .expect("fixture interceptors register");
        }
        let (backend, members) = match reach {
            Reach::InProcess => {
                let members: Vec<_> = registry.interceptors().cloned().collect();
                (Backend::InProcess(registry), members)
            }
            Reach::Mcp => {
                let (server_io, client_io) = tokio::io::duplex(64 * 1024);
                let server = InterceptorServer::new(registry, "undolog-conformance");
                tokio::spawn(async move {
                    if let Ok(running) = server.serve(server_io).await {
                        let _ = running.waiting().await;
                    }
                });
                let service = ().serve(client_io).await.expect("MCP client connects over the pipe");
                let client = InterceptorClient::from_service(service);
                assert!(
                    client.advertises_interceptors(),
                    "server must advertise the interceptors extension"
                );
                let members = client.interceptors().await.expect("interceptors/list");
                (Backend::Mcp(client), members)
            }
        };
        let mut chain = Chain::new();
        for interceptor in members {
            let guard = interceptors.iter().any(|i| {
                i.name == interceptor.descriptor().name && i.behavior == "cross-boundary-guard"
            });
            let member = Member::new(interceptor);
            let member = if guard {
                member.with_config(behaviors::tool_servers())
            } else {
                member
            };
            chain
                .push(member)
                .expect("chain accepts the session's interceptors");
        }
        Session { backend, chain }
    }

    /// `session.list(event | null)`.
    async fn list(&self, event: Option<String>) -> Result<Value, Error> {
        let params = ListParams { event, phase: None };
        let result = match &self.backend {
            Backend::Mcp(client) => client.list(&params).await?,
            Backend::InProcess(registry) => registry.list(&params),
        };
        Ok(serde_json::to_value(result).expect("list result encodes"))
    }

    /// `session.invoke(params)`: the wire result, or the JSON-RPC error code.
    async fn invoke(&self, params: Value) -> Result<Value, i32> {
        let params: InvokeParams = serde_json::from_value(params).expect("fixture invoke params");
        let result = match &self.backend {
            Backend::Mcp(client) => client.invoke(&params).await,
            Backend::InProcess(registry) => registry.invoke(params).await,
        };
        match result {
            Ok(result) => Ok(serde_json::to_value(result).expect("invoke result encodes")),
            Err(e) => Err(e.code()),
        }
    }

    /// `session.chain(event, phase, payload, sessionId | null)`: the decision and final payload.
    async fn chain(
        &self,
        event: &str,
        phase: Phase,
        payload: Value,
        session: Option<String>,
    ) -> (bool, Option<Value>) {
        let mut request = ChainRequest::new(event, phase, payload);
        if let Some(session_id) = session {
            request = request.with_context(InvocationContext {
                session_id: Some(session_id),
                ..Default::default()
            });
        }
        let result = self.chain.execute(request).await;
        assert_eq!(result.is_allowed(), result.to_error().is_none());
        (result.is_allowed(), result.final_payload)
    }
}

fn scrub(value: &mut Value, volatile: &[String]) {
    match value {
        Value::Object(map) => {
            map.retain(|k, _| !volatile.contains(k));
            map.values_mut().for_each(|v| scrub(v, volatile));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| scrub(v, volatile)),
        _ => {}
    }
}

fn canonical(value: &Value) -> String {
    undolog_types::canonical::to_string(value).expect("results canonicalize")
}

fn compare(mut actual: Value, volatile: &[String], expected: &str) -> Result<(), String> {
    scrub(&mut actual, volatile);
    let actual = canonical(&actual);
    if actual == expected {
        Ok(())
    } else {
        Err(format!("expected {expected}\n      actual   {actual}"))
    }
}

fn check_decision(
    allowed: bool,
    payload: Option<Value>,
    expect: &DecisionExpectation,
) -> Result<(), String> {
    let decision = if allowed { "allow" } else { "deny" };
    if decision != expect.decision {
        return Err(format!("decision {decision}, expected {}", expect.decision));
    }
    let text = payload.as_ref().map(canonical).unwrap_or_default();
    if let Some(expected) = &expect.final_payload_canonical
        && &text != expected
    {
        return Err(format!("final payload {text}, expected {expected}"));
    }
    if let Some(s) = expect.forbids.iter().find(|s| text.contains(s.as_str())) {
        return Err(format!("final payload {text} still contains `{s}`"));
    }
    if let Some(s) = expect.requires.iter().find(|s| !text.contains(s.as_str())) {
        return Err(format!("final payload {text} lacks `{s}`"));
    }
    Ok(())
}

/// Replay one fixture; the first failing step's index and reason on failure.
async fn replay(f: &Fixture, reach: Reach) -> Result<(), String> {
    let session = Session::create(&f.interceptors, reach).await;
    for (n, step) in f.steps.iter().enumerate() {
        let outcome = match step {
            Step::List { event, expect } => match session.list(event.clone()).await {
                Ok(result) => compare(result, &f.volatile, &expect.canonical),
                Err(e) => Err(format!("interceptors/list failed: {e}")),
            },
            Step::Invoke { params, expect } => match (session.invoke(params.clone()).await, expect)
            {
                (Ok(result), InvokeExpectation::Result(r)) => {
                    compare(result, &f.volatile, &r.canonical)
                }
                (Err(code), InvokeExpectation::Error { error_code }) if code == *error_code => {
                    Ok(())
                }
                (Err(code), _) => Err(format!("JSON-RPC error {code}, expected {expect:?}")),
                (Ok(result), _) => Err(format!("result {result}, expected {expect:?}")),
            },
            Step::Apply {
                event,
                phase,
                payload,
                context,
                expect,
            } => {
                let phase: Phase = serde_json::from_value(json!(phase)).expect("fixture phase");
                let session_id = context.as_ref().map(|c| c.session_id.clone());
                let (allowed, final_payload) = session
                    .chain(event, phase, payload.clone(), session_id)
                    .await;
                check_decision(allowed, final_payload, expect)
            }
        };
        outcome.map_err(|reason| format!("step {n}: {reason}"))?;
    }
    Ok(())
}

#[tokio::test]
async fn conformance_fixtures_pass() {
    let dir = suite_dir();
    let manifest: Manifest = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json"))
            .unwrap_or_else(|e| panic!("read {}: {e}; is shared/ beside the repo?", dir.display())),
    )
    .expect("manifest parses");
    assert!(
        !manifest.fixtures.is_empty(),
        "the manifest lists no fixtures"
    );

    let mut fixtures = Vec::new();
    for entry in &manifest.fixtures {
        let text = std::fs::read_to_string(dir.join(&entry.file))
            .expect("fixture file listed in the manifest");
        let fixture: Fixture = serde_json::from_str(&text).expect("fixture parses");
        assert_eq!(fixture.id, entry.id, "{} holds another fixture", entry.file);
        assert_eq!(
            (&fixture.kind, &fixture.requirement),
            (&entry.kind, &entry.requirement)
        );
        fixtures.push(fixture);
    }

    let mut failures = Vec::new();
    for reach in [Reach::Mcp, Reach::InProcess] {
        println!("\n== fixtures, {reach:?}");
        // requirement or kind -> (passed, total)
        let mut counts: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        for fixture in &fixtures {
            let result = replay(fixture, reach).await;
            for key in [&fixture.requirement, &fixture.kind] {
                let c = counts.entry(key.clone()).or_default();
                c.0 += u32::from(result.is_ok());
                c.1 += 1;
            }
            match result {
                Ok(()) => println!("PASS {}", fixture.id),
                Err(reason) => {
                    println!("FAIL {}: {reason}", fixture.id);
                    failures.push(format!("{reach:?} {}", fixture.id));
                }
            }
        }
        println!("requirement | passed / total");
        for (key, (passed, total)) in &counts {
            println!("{key} | {passed} / {total}");
        }
    }
    assert!(
        failures.is_empty(),
        "conformance fixtures failed: {failures:?}"
    );
}
