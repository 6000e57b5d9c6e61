//! The gateway as a component: [`Gateway::build`] from a configuration, then [`serve_http`] on a
//! listener the caller bound (tests bind port 0), or [`serve_stdio`] on stdin/stdout.

use std::{future::Future, sync::Arc};

use rmcp::ServiceExt;
use tokio::net::TcpListener;
use undolog_engine::{Engine, EngineConfig};
use undolog_store::Store;

use crate::{
    Error, GatewayConfig, Principal, UpstreamStatus, engine_link::EngineLink,
    grpc::client::RemoteEngine, http, mcp::McpFront, upstream::Upstreams,
};

/// The running gateway's shared state. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Gateway {
    pub(crate) config: GatewayConfig,
    /// Its own, or the one it asks over gRPC (`[engine]`).
    pub(crate) engine: EngineLink,
    pub(crate) upstreams: Upstreams,
    pub(crate) interceptors: Arc<crate::interceptors::Interceptors>,
    /// `None` in front of a remote engine, which holds the store.
    pub(crate) store: Option<Arc<dyn Store>>,
    pub(crate) key_cache: undolog_identity::KeyCache,
    /// The calls this gateway runs as tasks.
    pub(crate) tasks: crate::tasks::Tasks,
    /// The authorization server whose tokens it takes, when `[oauth]` is configured.
    pub(crate) oauth: Option<crate::oauth::OAuth>,
    /// The dashboard's sign-ins through it, in progress and signed in.
    pub(crate) logins: crate::sign_in::Logins,
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    pub(crate) traces: crate::traces::Traces,
    /// Tells people of held calls (`[[notify]]`) and checks the links it sent.
    pub(crate) notifier: Arc<crate::notify::Notifier>,
    /// Each org's last hour of calls, for the dashboard.
    pub(crate) overview: crate::overview::Overview,
}

impl Gateway {
    /// Opens the store the configuration names (or dials the engine it names) and connects to
    /// the upstreams.
    pub async fn build(config: GatewayConfig) -> Result<Arc<Gateway>, Error> {
        if let Some(url) = config.engine.clone() {
            let remote = RemoteEngine::connect(&url, engine_config(&config))?;
            return Gateway::assemble(config, EngineLink::Remote(remote), None).await;
        }
        let store = undolog_store::open_with(&config.store, &config.store_pool)
            .await
            .map_err(|e| Error::Startup(e.to_string()))?;
        Gateway::with_store(config, store).await
    }

    /// The same, on a store the caller opened. Fails when an interceptor cannot be started or
    /// its config does not match its `configSchema`.
    pub async fn with_store(
        config: GatewayConfig,
        store: Arc<dyn Store>,
    ) -> Result<Arc<Gateway>, Error> {
        let engine = Engine::new(store.clone(), engine_config(&config));
        Gateway::assemble(config, EngineLink::Local(engine), Some(store)).await
    }

    async fn assemble(
        config: GatewayConfig,
        engine: EngineLink,
        store: Option<Arc<dyn Store>>,
    ) -> Result<Arc<Gateway>, Error> {
        let upstreams = Upstreams::start(
            &config.upstreams,
            &config.prefix_separator,
            config.limits.upstream_timeout,
            &crate::demo::DemoBank::for_upstream,
        )
        .await;
        let names = upstreams.connections().iter().map(|c| c.name());
        let mut metrics = crate::metrics::Metrics::for_upstreams(names);
        metrics.holds_engine = engine.local().is_some();
        let metrics = Arc::new(metrics);
        if let Some(engine) = engine.local() {
            metrics.follow(engine);
            let batches = Arc::downgrade(&metrics);
            engine.observe_batches(Arc::new(move |size| {
                if let Some(metrics) = batches.upgrade() {
                    metrics.batch(size);
                }
            }));
        }
        let notifier = Arc::new(crate::notify::Notifier::new(&config, metrics.clone()));
        if let Some(engine) = engine.local() {
            notifier.follow(engine);
        }
        let interceptors =
            crate::interceptors::Interceptors::start(&config, &upstreams, metrics.clone());
        let interceptors = Arc::new(interceptors.await?);
        for conn in upstreams.connections() {
            conn.relay
                .use_interceptors(interceptors.clone() as Arc<dyn crate::upstream::RelayChain>);
        }
        let oauth = config.oauth.clone().map(crate::oauth::OAuth::new);
        // OpenTelemetry's name of the database system.
        let system = store.as_ref().map(|s| match s.backend() {
            "postgres" => "postgresql",
            other => other,
        });
        let traces = crate::traces::Traces::start(config.traces.as_ref(), system)?;
        Ok(Arc::new(Gateway {
            overview: Default::default(),
            notifier,
            traces,
            metrics,
            oauth,
            logins: crate::sign_in::Logins::default(),
            config,
            engine,
            upstreams,
            interceptors,
            store,
            key_cache: undolog_identity::KeyCache::default(),
            tasks: crate::tasks::Tasks::default(),
        }))
    }

    /// What `undolog check` reports: connects to every upstream and starts every interceptor as
    /// serving would, opening no store and serving nothing, then lets them go. `Err` when an
    /// interceptor cannot start or its config does not fit its schema.
    pub async fn check(config: &GatewayConfig) -> Result<Vec<UpstreamStatus>, Error> {
        let upstreams = Upstreams::start(
            &config.upstreams,
            &config.prefix_separator,
            config.limits.upstream_timeout,
            &crate::demo::DemoBank::for_upstream,
        )
        .await;
        let metrics = Arc::new(crate::metrics::Metrics::default());
        crate::interceptors::Interceptors::start(config, &upstreams, metrics).await?;
        Ok(upstreams.statuses())
    }

    /// For `undolog check`: whether the engine the configuration names (`engine =
    /// "grpc://…"`) answers and is ready, in words; `None` when the gateway runs its own.
    pub async fn check_engine(config: &GatewayConfig) -> Option<Result<String, String>> {
        let url = config.engine.as_ref()?;
        let remote = match RemoteEngine::connect(url, engine_config(config)) {
            Ok(remote) => remote,
            Err(e) => return Some(Err(e.to_string())),
        };
        Some(match remote.health().await {
            Ok(health) if health.ready => Ok(format!("ready, on its {} store", health.backend)),
            Ok(health) => Err(format!(
                "answers but is not ready: {}",
                health.reason.unwrap_or_else(|| "no reason given".into())
            )),
            Err(e) => Err(e.to_string()),
        })
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// Its engine, unless it asks one in another process.
    pub fn engine(&self) -> Option<&Engine> {
        self.engine.local()
    }

    /// How each upstream answered at start-up (or its last listing): how many tools, or why not.
    pub fn upstream_statuses(&self) -> Vec<crate::upstream::UpstreamStatus> {
        self.upstreams.statuses()
    }

    /// Its store, unless it asks an engine in another process.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }
}

/// The engine's settings from the gateway's configuration (a remote engine's are its own; these
/// are what a gateway in front of it leases and waits by).
fn engine_config(config: &GatewayConfig) -> EngineConfig {
    EngineConfig {
        approval_timeout: config.approvals.timeout,
        // Renewed while the tool runs (Engine::while_running): it runs out only if we die.
        lease: config.executor.lease,
        heartbeat: config.executor.heartbeat,
        executor_timeout: config.executor.dead_after,
        peer_silence: config.executor.peer_silence,
        wait_timeout: config.limits.identical_call_wait,
        // A compensation may run as long as the upstream timeout; the claim is renewed at
        // every step, and ends at once if this process is taken for dead.
        undo_claim: (config.limits.upstream_timeout * 4).max(EngineConfig::default().undo_claim),
        ..EngineConfig::default()
    }
}

/// Serves HTTP (MCP at `/mcp`, REST, admin API, events) until `shutdown` completes.
///
/// Refuses to start on a non-loopback address while no API key exists: open mode is for one
/// machine only.
pub async fn serve_http(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let addr = gateway.start_serving(&listener).await?;
    let cancel = tokio_util::sync::CancellationToken::new();
    if let Some(at) = gateway.config.metrics_listen {
        crate::metrics::listen(gateway.clone(), at, cancel.clone()).await?;
    }
    let header_timeout = gateway.config.limits.header_timeout;
    let router = http::router(gateway, addr, cancel.clone());
    tracing::info!(%addr, "undolog gateway listening; MCP at http://{addr}/mcp");
    undolog_http_edge::server::serve(listener, router, header_timeout, async move {
        shutdown.await;
        cancel.cancel();
    })
    .await;
    Ok(())
}

/// Serves one MCP client on stdin/stdout (desktop clients spawn `undolog stdio`).
pub async fn serve_stdio(gateway: Arc<Gateway>, principal: Principal) -> Result<(), Error> {
    // One per client process: nothing to take over at start; it is taken for dead when silent.
    let name = gateway
        .config
        .executor
        .name
        .clone()
        .unwrap_or_else(unique_executor_name);
    gateway.start_executor(&name).await?;
    let front = McpFront::stdio(gateway, principal);
    let running = front
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::Startup(format!("the stdio client did not initialize: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| Error::Startup(format!("the stdio session ended abnormally: {e}")))?;
    Ok(())
}

impl Gateway {
    /// Before serving on `listener`: refuses open mode beyond loopback, then starts this
    /// process's executor. The address it serves.
    pub(crate) async fn start_serving(
        &self,
        listener: &TcpListener,
    ) -> Result<std::net::SocketAddr, Error> {
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Startup(format!("cannot read the listening address: {e}")))?;
        self.refuse_open_beyond_loopback(addr).await?;
        // In front of a remote engine, the engine's process is the executor that keeps leases.
        if self.engine.local().is_some() {
            self.start_executor_at(addr).await?;
        }
        Ok(addr)
    }

    /// Open mode serves one machine only: beyond loopback, a key or `[oauth]` must exist first.
    async fn refuse_open_beyond_loopback(&self, addr: std::net::SocketAddr) -> Result<(), Error> {
        if addr.ip().is_loopback() || self.oauth.is_some() {
            return Ok(());
        }
        let open = self.open_mode().await.map_err(|e| match e {
            Error::EngineUnreachable { url, reason } => Error::Startup(format!(
                "the engine at {url} cannot be reached ({reason}); start it first (`undolog \
                 engine --listen …`)"
            )),
            other => Error::Startup(other.to_string()),
        })?;
        if open {
            return Err(Error::Startup(format!(
                "refusing to listen on {addr}: no API keys exist, so anyone who can reach this \
                 address would act as org `default`. Create a key first (`undolog keys create \
                 --org NAME`), or listen on 127.0.0.1"
            )));
        }
        Ok(())
    }

    /// Starts this process's executor, named after the address it serves unless configured.
    /// Restarted on the same address, it takes the one before it for dead: whatever that one
    /// was running is in doubt now, not when its leases would have run out.
    async fn start_executor_at(&self, addr: std::net::SocketAddr) -> Result<(), Error> {
        let name = match &self.config.executor.name {
            Some(name) => name.clone(),
            None if addr.port() == 0 => unique_executor_name(),
            None => format!("{}:{addr}", host_name()),
        };
        self.start_executor(&name).await
    }

    /// Records this process as an executor named `name` and starts its heartbeat (the engine
    /// logs the calls of a previous process of that name, now in doubt).
    async fn start_executor(&self, name: &str) -> Result<(), Error> {
        let Some(engine) = self.engine.local() else {
            return Ok(());
        };
        engine.start_executor(name).await.map_err(|e| {
            Error::Startup(format!(
                "the store did not take this gateway's first heartbeat: {e}"
            ))
        })?;
        tracing::info!(executor = %engine.config().executor_id, name, "executor started");
        Ok(())
    }
}

fn host_name() -> String {
    whoami::hostname().unwrap_or_else(|_| "localhost".to_owned())
}

/// A name no restart will share: host, process id and executor-unique suffix.
fn unique_executor_name() -> String {
    format!(
        "{}:pid{}:{}",
        host_name(),
        std::process::id(),
        uuid::Uuid::now_v7()
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_engine_leases_beats_and_listens_by_the_executor_settings() {
        let config = GatewayConfig::from_toml(
            "[executor]\nlease_ms = 4000\nheartbeat_ms = 500\ndead_after_ms = 2000\npeer_silence_ms = 9000",
        )
        .unwrap();
        let engine = engine_config(&config);
        assert_eq!(engine.lease, Duration::from_secs(4));
        assert_eq!(engine.heartbeat, Duration::from_millis(500));
        assert_eq!(engine.executor_timeout, Duration::from_secs(2));
        assert_eq!(engine.peer_silence, Duration::from_secs(9));
    }
}
