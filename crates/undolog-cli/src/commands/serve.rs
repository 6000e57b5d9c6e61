//! `undolog serve` and `undolog stdio`: the gateway over HTTP, or for one client on stdin/stdout.

use std::path::PathBuf;

use anyhow::Context;
use undolog_gateway::{ConfigSource, Gateway, GatewayConfig, Principal};

/// Where the configuration comes from; flags win over `UNDOLOG_*` and the file.
#[derive(Debug, clap::Args)]
pub(crate) struct Source {
    /// A TOML configuration file (see docs/CONFIGURATION.md).
    #[arg(long, env = "UNDOLOG_CONFIG")]
    config: Option<PathBuf>,
    /// The store: sqlite://PATH (the default is sqlite://undolog.db).
    #[arg(long)]
    store: Option<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    source: Source,
    /// The address to listen on (default 127.0.0.1:8080).
    #[arg(long)]
    listen: Option<String>,
    /// Ask the engine at grpc://HOST:PORT (`undolog engine`) for every decision, owning no
    /// store: gateways then scale apart from the engine.
    #[arg(long, value_name = "grpc://HOST:PORT")]
    engine: Option<String>,
}

impl Source {
    pub(crate) fn load(&self, listen: Option<String>) -> anyhow::Result<GatewayConfig> {
        self.load_with(listen, None)
    }

    /// The same, in front of the engine at `engine` when one is named.
    pub(crate) fn load_with(
        &self,
        listen: Option<String>,
        engine: Option<String>,
    ) -> anyhow::Result<GatewayConfig> {
        Ok(GatewayConfig::load(&ConfigSource {
            file: self.config.clone(),
            listen,
            store: self.store.clone(),
            engine,
        })?)
    }
}

/// Tells the person (or log collector) watching stderr: a plain line, or with `json` a log
/// object like the others, whatever the log filter says.
pub(crate) fn announce(json: bool, message: &str) {
    if json {
        let line = serde_json::json!({
            "timestamp": undolog_types::Timestamp::now().to_string(),
            "level": "INFO",
            "target": "undolog",
            "message": message,
        });
        eprintln!("{line}");
    } else {
        eprintln!("undolog: {message}");
    }
}

/// One line per upstream: connected with how many tools, or why not and what to check.
pub(crate) fn report_upstreams(json: bool, gateway: &Gateway) {
    report(json, gateway.upstream_statuses());
}

fn report(json: bool, statuses: Vec<undolog_gateway::UpstreamStatus>) {
    for status in statuses {
        let line = match status.tools {
            Ok(tools) => format!("upstream `{}`: connected, {tools} tools", status.name),
            Err(reason) => format!(
                "upstream `{}` cannot be reached: {reason}. Check its command or url in the \
                 configuration; its tools appear once it answers",
                status.name
            ),
        };
        announce(json, &line);
    }
}

pub(crate) async fn serve(args: ServeArgs, json_logs: bool) -> anyhow::Result<()> {
    let config = args.source.load_with(args.listen, args.engine)?;
    let listen = config.listen;
    if let Some(engine) = &config.engine {
        announce(
            json_logs,
            &format!("asking the engine at {engine} for every decision (no store here)"),
        );
    }
    let gateway = Gateway::build(config).await?;
    report_upstreams(json_logs, &gateway);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}; is another program using it?"))?;
    // The port the system chose, when the configuration said 0.
    let listen = listener.local_addr().unwrap_or(listen);
    announce(
        json_logs,
        &format!("MCP at http://{listen}/mcp — admin API at http://{listen}/v1, events at /events"),
    );
    undolog_gateway::serve_http(gateway, listener, shutdown_signal(json_logs)).await?;
    Ok(())
}

/// `undolog check`: the configuration is valid, and every upstream and interceptor answers (and
/// the engine it names, if any), without opening the store or serving. Fails (exit 1) on the first thing that does not work.
pub(crate) async fn check(source: Source) -> anyhow::Result<()> {
    let config = source.load(None)?;
    println!(
        "configuration: valid ({} upstream(s), {} interceptor(s), {} notification target(s))",
        config.upstreams.len(),
        config.interceptors.len(),
        config.notify.len()
    );
    let engine = Gateway::check_engine(&config).await;
    match (&engine, &config.engine) {
        (Some(Ok(said)), Some(url)) => println!("engine {url}: {said}"),
        (Some(Err(why)), Some(url)) => eprintln!("undolog: engine {url}: {why}"),
        _ => {}
    }
    let statuses = Gateway::check(&config).await?;
    let failed = statuses.iter().filter(|s| s.tools.is_err()).count();
    report(false, statuses);
    if let Some(Err(_)) = engine {
        anyhow::bail!("the engine cannot be asked; see above");
    }
    if !config.interceptors.is_empty() {
        println!("interceptors: every one started and took its config");
    }
    if failed > 0 {
        anyhow::bail!("{failed} upstream(s) cannot be reached; see above");
    }
    println!("check: ok");
    Ok(())
}

pub(crate) async fn stdio(source: Source) -> anyhow::Result<()> {
    let config = source.load(None)?;
    if config.engine.is_some() {
        anyhow::bail!(
            "`undolog stdio` runs its own engine; drop `engine` from the configuration \
             (only `undolog serve` asks a remote one)"
        );
    }
    let gateway = Gateway::build(config).await?;
    undolog_gateway::serve_stdio(gateway, Principal::stdio()).await?;
    Ok(())
}

pub(crate) async fn shutdown_signal(json_logs: bool) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => drop(s.recv().await),
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! { () = ctrl_c => {}, () = terminate => {} }
    announce(json_logs, "shutting down");
}
