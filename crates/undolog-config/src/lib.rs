//! Gateway configuration: defaults, then a TOML file, then `UNDOLOG_*` environment variables, then
//! flags — parsed raw by figment, then validated once into [`GatewayConfig`]. Every error names the
//! key and says how to fix it.
//!
//! It holds the settings and their checks, and the compensation templates they carry; it starts
//! nothing, opens no connection and reads no file but the one it is given.

mod notify;
mod oauth;
mod raw;
mod template;
mod validate;

use std::{collections::BTreeMap, fmt, net::SocketAddr, path::PathBuf, time::Duration};

use figment::{
    Figment,
    providers::{Env, Format, Serialized, Toml},
};
use serde::Serialize;
use undolog_store::{Compensation, StoreUrl};
use undolog_types::Tier;

pub use notify::{Channel, NotifyTarget, is_target_name};
pub use oauth::{DashboardClient, IntrospectionClient, OAuthSettings, RoleScopes};
pub(crate) use raw::RawConfig;
pub use template::Template;

/// Where the configuration comes from, besides defaults and the environment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConfigSource {
    #[serde(skip)]
    pub file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// `grpc://HOST:PORT`: the engine this gateway asks for every decision, owning no store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// The validated configuration the gateway runs with.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub listen: SocketAddr,
    pub store: StoreUrl,
    /// The engine this gateway asks for every decision (`undolog engine`), instead of running
    /// one on `store`: `grpc://HOST:PORT`. `None`: the engine runs here.
    pub engine: Option<String>,
    pub default_tier: Tier,
    pub prefix_separator: String,
    pub approvals: ApprovalSettings,
    /// How long a principal's implicit run lasts without a call (clients that name no session).
    pub run_idle: Duration,
    pub limits: Limits,
    pub executor: ExecutorSettings,
    pub http: HttpSettings,
    pub store_pool: undolog_store::PoolSettings,
    pub upstreams: Vec<UpstreamConfig>,
    /// Per exposed tool name.
    pub tools: BTreeMap<String, ToolSettings>,
    /// The interceptor chain, in configuration order (the chain orders by type and priority).
    pub interceptors: Vec<InterceptorConfig>,
    /// Where held calls are announced, in escalation order (`[[notify]]`).
    pub notify: Vec<NotifyTarget>,
    /// Access tokens of an authorization server, beside API keys; `None`: API keys alone.
    pub oauth: Option<OAuthSettings>,
    /// Where `/metrics` is served (Prometheus text format); `None`: nowhere.
    pub metrics_listen: Option<SocketAddr>,
    /// Where spans are exported (OTLP/HTTP); `None`: no traces.
    pub traces: Option<TraceSettings>,
}

/// `[traces]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSettings {
    /// The full OTLP/HTTP traces URL (the configured base and `/v1/traces`).
    pub endpoint: String,
    pub service_name: String,
    pub export_every: Duration,
}

/// One `[[interceptors]]` entry, checked for shape; its `config` is checked against the
/// interceptors' `configSchema`s when the gateway starts (remote schemas are known only then).
#[derive(Debug, Clone)]
pub struct InterceptorConfig {
    /// `interceptors[i]`, for messages.
    pub key: String,
    pub source: InterceptorSource,
    /// Only these interceptors of the source; all of them when `None`.
    pub names: Option<Vec<String>>,
    pub config: Option<serde_json::Value>,
    /// Replaces the events of every hook (phases stay as declared).
    pub events: Option<Vec<String>>,
    pub mode: Option<undolog_interceptors::Mode>,
    pub fail_open: Option<bool>,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone)]
pub enum InterceptorSource {
    Builtin(BuiltinInterceptor),
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: Vec<(String, Secret)>,
    },
}

/// The interceptors that ship with the gateway, run in process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinInterceptor {
    /// Replaces credentials in `tools/call` arguments with `[redacted:<format>]`.
    Redactor,
    /// Refuses a credential read from one upstream being sent to another.
    Guard,
    /// Checks `tools/call` arguments against the tool's `inputSchema`.
    Arguments,
    /// Refuses or flags `tools/call` by the tool's UndoLog tier and approval.
    Policy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// The MCP request stays open (with progress notifications) until the decision.
    Hold,
    /// The call answers at once with the approval id; the identical call retried later runs.
    Defer,
}

#[derive(Debug, Clone)]
pub struct ApprovalSettings {
    pub mode: ApprovalMode,
    /// How long a request for approval stays open before it expires.
    pub timeout: Duration,
    /// How long a held request waits before answering that the decision is still pending.
    pub hold: Duration,
    /// Whether a principal may decide a call it made itself. Off (four eyes) unless configured;
    /// open mode's single local operator always may.
    pub allow_self_approval: bool,
    /// The base of the approve and deny links notifications carry.
    pub public_url: String,
    /// The key links are signed with; `None`: one made at start-up.
    pub link_secret: Option<Secret>,
    /// Announce an undecided held call to the next target after this long; `None`: every target
    /// at once.
    pub escalate_after: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub upstream_timeout: Duration,
    /// How long a client may take to send a request's headers before the connection closes.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body before it is answered 408.
    pub body_timeout: Duration,
    /// How long a call waits for an identical call in flight (a client may ask for less).
    pub identical_call_wait: Duration,
    /// How long an SDK caller may run a tool before its effect is in doubt.
    pub sdk_lease: Duration,
}

/// This gateway process as an executor of calls.
#[derive(Debug, Clone)]
pub struct ExecutorSettings {
    /// `None`: the host name and listen address (unique per process when the port is 0).
    pub name: Option<String>,
    /// A running call's lease, renewed every third of it while the tool runs.
    pub lease: Duration,
    pub heartbeat: Duration,
    /// A gateway silent this long is taken for dead by the others on its store.
    pub dead_after: Duration,
    /// On PostgreSQL, how long the gateway goes on sending hints of its changes after it last
    /// heard another gateway on its store; it says hello every third of this, so gateways that
    /// share a store hear one another, and one alone sends only its hellos.
    pub peer_silence: Duration,
}

/// The `Host` and `Origin` headers every route accepts. `None`: the default for the listen
/// address (bound to loopback: loopback names and pages only; beyond it: any Host, and pages of
/// the gateway's own origin only). An empty list (written `["*"]`) accepts any.
#[derive(Debug, Clone, Default)]
pub struct HttpSettings {
    pub allowed_hosts: Option<Vec<String>>,
    pub allowed_origins: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    pub name: String,
    pub transport: UpstreamTransport,
    pub prefix: Option<String>,
    pub trust_annotations: bool,
}

#[derive(Debug, Clone)]
pub enum UpstreamTransport {
    /// The demo bank shipped in the binary, served in-process.
    Demo,
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: Vec<(String, Secret)>,
    },
}

/// How one tool is classified and undone; unset fields fall back to annotations and defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSettings {
    pub tier: Option<Tier>,
    pub requires_approval: Option<bool>,
    pub idempotent: Option<bool>,
    pub compensation: Option<Compensation>,
    /// Whether the gateway runs its calls as tasks (the 2026-07-28 tasks extension).
    pub task: TaskSupport,
    /// How long a call that may be a task has to answer before it becomes one; zero makes every
    /// such call a task at once. Unset: [`DEFAULT_TASK_AFTER`].
    pub task_after: Option<Duration>,
}

/// How long a call that may be a task runs before the client gets a task instead of its answer.
pub const DEFAULT_TASK_AFTER: Duration = Duration::from_secs(1);

/// Whether calls of a tool run as tasks, for clients that declare the tasks extension: a call
/// still running after `task_after_ms` answers with a task and goes on in the background (a
/// quick call answers as usual). A call that waits for a person is a task for such a client at
/// once, whatever this says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Calls answer when done (the default).
    #[default]
    Never,
    /// A task when the client declares the extension; otherwise the call answers when done.
    Optional,
    /// Only as a task: a client that does not declare the extension is refused (−32021).
    Required,
}

/// A value that never prints: header values may carry tokens.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A configuration that cannot be used. The message names the key and the fix.
#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct Error(pub(crate) String);

impl Error {
    pub fn key(key: impl fmt::Display, problem: impl fmt::Display) -> Error {
        Error(format!("`{key}`: {problem}"))
    }
}

/// Environment keys the gateway reads; anything else prefixed `UNDOLOG_` belongs to someone else.
const ENV_KEYS: &[&str] = &[
    "listen",
    "store",
    "engine",
    "default_tier",
    "prefix_separator",
    "approvals",
    "sessions",
    "limits",
    "http",
    "store_pool",
    "executor",
    "oauth",
    "metrics",
    "traces",
];

impl GatewayConfig {
    /// Whether `tool` is the upstream compensation of some configured tool: the only upstream
    /// tools an SDK effect may name as its compensation.
    pub fn is_declared_compensation(&self, tool: &str) -> bool {
        self.tools.values().any(|t| {
            matches!(&t.compensation, Some(Compensation::Upstream { tool: c, .. }) if c == tool)
        })
    }

    /// Loads and validates: defaults, the file, `UNDOLOG_*`, then the flags in `source`.
    pub fn load(source: &ConfigSource) -> Result<GatewayConfig, Error> {
        let mut figment = Figment::new();
        if let Some(file) = &source.file {
            if !file.is_file() {
                return Err(Error(format!(
                    "no configuration file at {}; check the --config path",
                    file.display()
                )));
            }
            figment = figment.merge(Toml::file_exact(file));
        }
        let env = Env::prefixed("UNDOLOG_").split("__").filter(|key| {
            let top = key.as_str().split('.').next().unwrap_or_default();
            ENV_KEYS.contains(&top)
        });
        GatewayConfig::extract(figment.merge(env).merge(Serialized::defaults(source)))
    }

    /// Loads and validates TOML text alone, without the environment or flags: what [`load`]
    /// makes of a file that says this and nothing else.
    ///
    /// [`load`]: GatewayConfig::load
    pub fn from_toml(text: &str) -> Result<GatewayConfig, Error> {
        GatewayConfig::extract(Figment::from(Toml::string(text)))
    }

    fn extract(figment: Figment) -> Result<GatewayConfig, Error> {
        let raw: RawConfig = figment.extract().map_err(|e| Error(figment_message(&e)))?;
        validate::validate(raw)
    }

    /// The configuration with nothing set: loopback, `undolog.db`, the demo upstream.
    pub fn defaults() -> GatewayConfig {
        validate::validate(RawConfig::default()).expect("the defaults are valid")
    }
}

fn figment_message(error: &figment::Error) -> String {
    let mut out = Vec::new();
    for e in error.clone() {
        let key = if e.path.is_empty() {
            "(top level)".to_owned()
        } else {
            e.path.join(".")
        };
        let place = e
            .metadata
            .as_ref()
            .map(|m| format!(" (from {})", m.name))
            .unwrap_or_default();
        out.push(format!("`{key}`{place}: {}", e.kind));
    }
    out.join("; ")
}
