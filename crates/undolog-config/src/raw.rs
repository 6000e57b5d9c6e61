//! The configuration as written: TOML file, `UNDOLOG_*` environment and flags, merged by figment.
//! Nothing here is checked beyond its shape; [`super::GatewayConfig::validate`] does the rest.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub(crate) listen: Option<String>,
    pub(crate) store: Option<String>,
    /// `grpc://HOST:PORT` of the engine to ask, when this gateway runs no engine of its own.
    pub(crate) engine: Option<String>,
    /// The tier of a tool that neither the configuration nor trusted annotations classify.
    pub(crate) default_tier: Option<String>,
    /// Put between an upstream's prefix and a tool name: `bank__transfer`.
    pub(crate) prefix_separator: Option<String>,
    #[serde(default)]
    pub(crate) approvals: RawApprovals,
    #[serde(default)]
    pub(crate) sessions: RawSessions,
    #[serde(default)]
    pub(crate) limits: RawLimits,
    #[serde(default)]
    pub(crate) http: RawHttp,
    #[serde(default)]
    pub(crate) executor: RawExecutor,
    #[serde(default)]
    pub(crate) store_pool: RawStorePool,
    #[serde(default)]
    pub(crate) upstreams: Vec<RawUpstream>,
    #[serde(default)]
    pub(crate) tools: BTreeMap<String, RawTool>,
    #[serde(default)]
    pub(crate) interceptors: Vec<RawInterceptor>,
    /// Where held calls are announced.
    #[serde(default)]
    pub(crate) notify: Vec<super::notify::RawNotify>,
    pub(crate) oauth: Option<RawOAuth>,
    #[serde(default)]
    pub(crate) metrics: RawMetrics,
    pub(crate) traces: Option<RawTraces>,
}

/// `[traces]`: OpenTelemetry spans of every tool call, exported over OTLP/HTTP.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTraces {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); spans go to `/v1/traces`.
    pub(crate) otlp_endpoint: Option<String>,
    /// `service.name` of the spans (default `undolog`).
    pub(crate) service_name: Option<String>,
    /// How often finished spans are sent, in milliseconds (default 1000).
    pub(crate) export_every_ms: Option<u64>,
}

/// `[metrics]`: Prometheus metrics on a listener of their own.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMetrics {
    /// `IP:PORT` of `/metrics`; none: no metrics are served.
    pub(crate) listen: Option<String>,
}

/// `[oauth]`: access tokens of an OAuth 2.1 authorization server, beside API keys.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOAuth {
    /// The authorization server's issuer identifier; tokens must carry it as `iss`.
    pub(crate) issuer: Option<String>,
    /// This gateway's resource URL (its `/mcp`); tokens must name it in `aud` (RFC 8707).
    pub(crate) resource: Option<String>,
    /// Where the issuer's signing keys are; read from its metadata when absent.
    pub(crate) jwks_uri: Option<String>,
    /// `RS256` and/or `ES256` (both by default).
    pub(crate) algorithms: Option<Vec<String>>,
    /// The claim that names the org (default `org`).
    pub(crate) org_claim: Option<String>,
    /// The org of tokens that carry no such claim; without it they are refused.
    pub(crate) org: Option<String>,
    pub(crate) agent_scope: Option<String>,
    pub(crate) approver_scope: Option<String>,
    pub(crate) admin_scope: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds (default 30).
    pub(crate) leeway_secs: Option<u64>,
    /// The dashboard's sign-in through the authorization server (authorization code + PKCE).
    pub(crate) dashboard_client_id: Option<String>,
    pub(crate) dashboard_client_secret: Option<String>,
    /// Token introspection (RFC 7662) for tokens that are not JWTs: this gateway's client there.
    pub(crate) introspection_client_id: Option<String>,
    pub(crate) introspection_client_secret: Option<String>,
    /// Read from the issuer's metadata when absent.
    pub(crate) introspection_endpoint: Option<String>,
}

/// One `[[interceptors]]` entry: an interceptor server (stdio or Streamable HTTP) or a built-in.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawInterceptor {
    /// `redactor`, `guard` or `arguments`: run in process.
    pub(crate) builtin: Option<String>,
    pub(crate) command: Option<String>,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) url: Option<String>,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// Only these interceptors of the server (all it lists when absent).
    pub(crate) names: Option<Vec<String>>,
    /// Passed on every invocation; checked against each interceptor's `configSchema` at start-up.
    pub(crate) config: Option<Value>,
    /// The events each hook intercepts (names, `*` or globs), overriding what it declares.
    pub(crate) events: Option<Vec<String>>,
    /// `active` or `audit`, overriding what the interceptor declares.
    pub(crate) mode: Option<String>,
    /// Skip the interceptor when it crashes or times out instead of blocking the call.
    pub(crate) fail_open: Option<bool>,
    /// How long one invocation may take (the interceptor's own `timeoutMs`, else 10 s).
    pub(crate) timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawApprovals {
    /// `hold` (keep the MCP request open until the decision) or `defer` (answer at once).
    pub(crate) mode: Option<String>,
    /// How long a request for approval stays open before it expires.
    pub(crate) timeout_secs: Option<u64>,
    /// How long a held MCP request waits for the decision before it answers "still waiting".
    pub(crate) hold_secs: Option<u64>,
    /// Let a principal decide a call it made itself (single-person setups); off: four eyes.
    pub(crate) allow_self_approval: Option<bool>,
    /// Where a person's browser reaches this gateway: the base of the links notifications carry.
    pub(crate) public_url: Option<String>,
    /// The key approve and deny links are signed with (32 characters or more); one made at
    /// start-up when unset, so links end with the process.
    pub(crate) link_secret: Option<String>,
    /// A held call nobody decided in this long is announced to the next `[[notify]]` target.
    pub(crate) escalate_after_secs: Option<u64>,
}

/// The runs of clients that name no session.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSessions {
    /// A principal's run ends after this long without a call; its next call starts a new one.
    pub(crate) idle_secs: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub(crate) max_body_bytes: Option<usize>,
    pub(crate) upstream_timeout_secs: Option<u64>,
    pub(crate) header_timeout_secs: Option<u64>,
    pub(crate) body_timeout_secs: Option<u64>,
    /// How long a call waits for an identical call in flight before it answers "still running".
    pub(crate) identical_call_wait_secs: Option<u64>,
    /// How long an SDK caller may run a tool before its effect is in doubt (it cannot renew).
    pub(crate) sdk_lease_secs: Option<u64>,
}

/// This gateway process as an executor of calls: its name, heartbeat and lease.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExecutor {
    /// Stable across restarts; a gateway that starts under the name of one that ran before takes
    /// that one for dead. Default: host name and listen address.
    pub(crate) name: Option<String>,
    pub(crate) lease_ms: Option<u64>,
    pub(crate) heartbeat_ms: Option<u64>,
    pub(crate) dead_after_ms: Option<u64>,
    /// How long the gateway goes on sending hints of its changes to the other gateways on its
    /// store (PostgreSQL NOTIFY) after it last heard one.
    pub(crate) peer_silence_ms: Option<u64>,
}

/// Which `Host` and `Origin` headers every route accepts (DNS-rebinding and cross-site protection).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHttp {
    /// Host names or `host:port`; `["*"]` accepts any.
    pub(crate) allowed_hosts: Option<Vec<String>>,
    /// Origins with a scheme (`https://app.example.com`, `http://localhost:*`); `["*"]` accepts any.
    pub(crate) allowed_origins: Option<Vec<String>>,
}

/// Connection pool of a PostgreSQL store (the embedded store keeps one connection).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStorePool {
    pub(crate) max_connections: Option<u32>,
    pub(crate) min_connections: Option<u32>,
    pub(crate) acquire_timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUpstream {
    pub(crate) name: Option<String>,
    /// `demo`: the bank shipped in the binary.
    pub(crate) builtin: Option<String>,
    pub(crate) command: Option<String>,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) url: Option<String>,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// When set, every tool of this upstream is exposed as `PREFIX<separator>NAME`.
    pub(crate) prefix: Option<String>,
    /// Whether this upstream's `readOnlyHint` / `idempotentHint` annotations may classify tools.
    pub(crate) trust_annotations: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTool {
    pub(crate) tier: Option<String>,
    pub(crate) requires_approval: Option<bool>,
    pub(crate) idempotent: Option<bool>,
    pub(crate) compensation: Option<RawCompensation>,
    /// `never`, `optional` or `required`: whether calls run as tasks for clients that declare
    /// the tasks extension (2026-07-28).
    pub(crate) task: Option<String>,
    /// Milliseconds a call may run before it becomes a task (default 1000; 0: at once).
    pub(crate) task_after_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCompensation {
    pub(crate) tool: Option<String>,
    /// A JSON template; `"{{args.x}}"` and `"{{result.y}}"` read the original call.
    #[serde(default)]
    pub(crate) args: Option<Value>,
}
