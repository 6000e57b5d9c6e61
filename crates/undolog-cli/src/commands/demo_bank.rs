//! `undolog demo-bank`: the built-in demo bank alone, as an ordinary MCP server (an upstream for
//! benchmarks and experiments; `undolog serve` already runs it in-process).

use anyhow::Context;
use undolog_gateway::DemoBank;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Serve Streamable HTTP at http://ADDR/mcp.
    #[arg(long, conflicts_with = "stdio")]
    listen: Option<String>,
    /// Serve on stdin/stdout.
    #[arg(long)]
    stdio: bool,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let bank = DemoBank::default();
    match (args.listen, args.stdio) {
        (Some(addr), false) => {
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            eprintln!("demo bank: MCP at http://{}/mcp", listener.local_addr()?);
            Ok(bank.serve_http(listener).await?)
        }
        (None, true) => Ok(bank.serve_stdio().await?),
        _ => anyhow::bail!("say where to serve: --listen ADDR or --stdio"),
    }
}
