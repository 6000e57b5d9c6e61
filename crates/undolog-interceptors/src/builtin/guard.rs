//! The cross-boundary guard: a validator that stops a credential read from one server from being
//! sent to another server in the same session.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{for_each_string, secrets};
use crate::descriptor::{Descriptor, InterceptorType, Phase};
use crate::error::Error;
use crate::interceptor::{Interceptor, Invocation};
use crate::wire::{Outcome, Validation};

/// Tracks, per session, which server each verbatim credential was first read from (taint comes
/// only from responses, so only strictly earlier reads count) and denies a request that carries
/// one to a different server. Writing a credential back to its own server is allowed.
///
/// A request's server is found from the tool name through `toolServers` (the constructor's map,
/// overridden per invocation by `config.toolServers`), else the tool name itself; for
/// `resources/*` the URI's authority or scheme; else the event's namespace. A response is
/// attributed to the server of the session's last request. Sessions are keyed by the context's
/// `sessionId`, else its `traceId`.
#[derive(Debug)]
pub struct CrossBoundaryGuard {
    descriptor: Descriptor,
    tool_servers: BTreeMap<String, String>,
    sessions: Mutex<HashMap<String, SessionTaint>>,
}

#[derive(Debug, Default)]
struct SessionTaint {
    /// Secret → (format, server it was first read from).
    origins: HashMap<String, (&'static str, String)>,
    in_flight: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GuardConfig {
    #[serde(default)]
    tool_servers: BTreeMap<String, String>,
}

impl CrossBoundaryGuard {
    /// Name of the default descriptor.
    pub const NAME: &'static str = "undolog/cross-boundary-guard";

    /// The guard on `tools/call` and `resources/read`, both phases, with a tool → server map.
    pub fn new(tool_servers: BTreeMap<String, String>) -> Self {
        let d = Descriptor::new(
            Self::NAME,
            InterceptorType::Validation,
            &["tools/call", "resources/read"],
            &[Phase::Request, Phase::Response],
        );
        Self::with_descriptor(d, tool_servers)
    }

    /// The guard under another descriptor (name, hooks, mode); the type must be `validation`.
    pub fn with_descriptor(descriptor: Descriptor, tool_servers: BTreeMap<String, String>) -> Self {
        let descriptor = Descriptor {
            kind: InterceptorType::Validation,
            version: descriptor
                .version
                .or(Some(env!("CARGO_PKG_VERSION").into())),
            config_schema: descriptor
                .config_schema
                .or_else(|| Some(Self::config_schema())),
            ..descriptor
        };
        CrossBoundaryGuard {
            descriptor,
            tool_servers,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The JSON Schema of the guard's config.
    pub fn config_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "toolServers": {"type": "object", "additionalProperties": {"type": "string"}}
            },
            "additionalProperties": false
        })
    }

    /// Drop what the guard remembers of a session (call when the session ends; taint is kept in
    /// memory only, per guard instance).
    pub fn forget_session(&self, session_id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id);
    }

    fn server_of(&self, config: &GuardConfig, event: &str, payload: &Value) -> String {
        if let Some(tool) = payload.get("name").and_then(Value::as_str) {
            let server = config
                .tool_servers
                .get(tool)
                .or_else(|| self.tool_servers.get(tool));
            return server.cloned().unwrap_or_else(|| tool.to_string());
        }
        if let Some(uri) = payload.get("uri").and_then(Value::as_str) {
            if let Some((scheme, rest)) = uri.split_once("://") {
                let authority = rest.split('/').next().unwrap_or_default();
                return if authority.is_empty() {
                    scheme.to_string()
                } else {
                    authority.to_string()
                };
            }
            if let Some((scheme, _)) = uri.split_once(':') {
                return scheme.to_string();
            }
        }
        event.split('/').next().unwrap_or("unknown").to_string()
    }
}

#[async_trait]
impl Interceptor for CrossBoundaryGuard {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    async fn invoke(&self, inv: Invocation) -> Result<Outcome, Error> {
        let config: GuardConfig = match &inv.config {
            None => GuardConfig::default(),
            Some(c) => serde_json::from_value(c.clone()).map_err(|e| Error::InvalidConfig {
                name: self.descriptor.name.clone(),
                reason: e.to_string(),
            })?,
        };
        let key = inv
            .context
            .as_ref()
            .and_then(|c| c.session_id.clone().or_else(|| c.trace_id.clone()))
            .unwrap_or_default();
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let session = sessions.entry(key).or_default();
        let mut found = Vec::new();
        for_each_string(&inv.payload, &mut |s| {
            found.extend(secrets::find_secrets(s))
        });
        match inv.phase {
            Phase::Request => {
                let target = self.server_of(&config, &inv.event, &inv.payload);
                for hit in &found {
                    if let Some((format, origin)) = session.origins.get(hit.value)
                        && *origin != target
                    {
                        return Ok(Outcome::Validation(Validation::deny(format!(
                            "cross-boundary secret flow: a {format} read from `{origin}` may not be sent to `{target}`; redact it or send it back only to `{origin}`"
                        ))));
                    }
                }
                session.in_flight = Some(target);
                Ok(Outcome::Validation(Validation::pass()))
            }
            Phase::Response => {
                let origin = session
                    .in_flight
                    .clone()
                    .unwrap_or_else(|| self.server_of(&config, &inv.event, &inv.payload));
                for hit in found {
                    session
                        .origins
                        .entry(hit.value.to_string())
                        .or_insert((hit.format, origin.clone()));
                }
                Ok(Outcome::Validation(Validation::pass()))
            }
        }
    }
}
