//! `undolog engine`: the effect engine alone over gRPC (`undolog.engine.v1.EffectEngine`), on
//! the configured store, for proxies that ask it for every decision.

use super::serve::{Source, announce, report_upstreams, shutdown_signal};

#[derive(Debug, clap::Args)]
pub(crate) struct EngineArgs {
    #[command(flatten)]
    source: Source,
    /// The gRPC address (default 127.0.0.1:50051).
    #[arg(long, default_value = "127.0.0.1:50051")]
    listen: std::net::SocketAddr,
}

pub(crate) async fn run(args: EngineArgs, json_logs: bool) -> anyhow::Result<()> {
    let config = args.source.load(None)?;
    if let Some(other) = &config.engine {
        anyhow::bail!(
            "the configuration names an engine to ask ({other}), but `undolog engine` is the \
             engine: drop `engine` from its configuration and give it the store"
        );
    }
    let gateway = undolog_gateway::Gateway::build(config).await?;
    report_upstreams(json_logs, &gateway);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {}: {e}; is another program using it?",
                args.listen
            )
        })?;
    let at = args.listen;
    announce(
        json_logs,
        &format!("engine at grpc://{at} (undolog.engine.v1.EffectEngine)"),
    );
    undolog_gateway::serve_engine(gateway, listener, shutdown_signal(json_logs)).await?;
    Ok(())
}
