//! `mcp-loadgen`: opens N MCP client sessions (the official Rust SDK, Streamable HTTP) and has
//! each call one tool in a closed loop for a fixed time, then prints one JSON line: calls/s and
//! latency percentiles. Arguments are a JSON template; `"{n}"` becomes a number unique to each
//! call, so a recording proxy sees distinct calls (nothing replayed).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Parser;
use rmcp::{
    ServiceExt,
    model::CallToolRequestParams,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;

#[derive(Debug, Parser)]
struct Args {
    /// The server's MCP endpoint, such as http://127.0.0.1:8080/mcp.
    #[arg(long)]
    url: String,
    #[arg(long)]
    tool: String,
    /// The arguments as JSON; the string "{n}" (quotes included) becomes a unique integer.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Concurrent sessions, each with one call in flight.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Extra header for every request, `Name: value` (repeatable).
    #[arg(long)]
    header: Vec<String>,
    /// A label copied into the output line.
    #[arg(long, default_value = "")]
    label: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Arc::new(Args::parse());
    let counter = Arc::new(AtomicU64::new(1));
    let warm_until = Instant::now() + Duration::from_secs_f64(args.warmup);
    let stop_at = warm_until + Duration::from_secs_f64(args.seconds);
    let mut workers = Vec::new();
    for worker in 0..args.connections {
        let (args, counter) = (args.clone(), counter.clone());
        workers.push(tokio::spawn(async move {
            run_worker(&args, worker, &counter, warm_until, stop_at).await
        }));
    }
    let mut latencies = Vec::new();
    let mut errors = 0u64;
    for worker in workers {
        let (mut l, e) = worker.await??;
        latencies.append(&mut l);
        errors += e;
    }
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let line = serde_json::json!({
        "label": args.label,
        "tool": args.tool,
        "connections": args.connections,
        "calls": latencies.len(),
        "errors": errors,
        "calls_per_sec": latencies.len() as f64 / args.seconds,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
    });
    println!("{line}");
    Ok(())
}

async fn run_worker(
    args: &Args,
    worker: usize,
    counter: &AtomicU64,
    warm_until: Instant,
    stop_at: Instant,
) -> anyhow::Result<(Vec<Duration>, u64)> {
    let mut headers = std::collections::HashMap::new();
    for h in &args.header {
        let (name, value) = h.split_once(':').context("--header wants `Name: value`")?;
        headers.insert(name.trim().parse()?, value.trim().parse()?);
    }
    let config =
        StreamableHttpClientTransportConfig::with_uri(args.url.as_str()).custom_headers(headers);
    let client = ()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .with_context(|| format!("worker {worker} cannot connect to {}", args.url))?;
    let mut latencies = Vec::new();
    let mut errors = 0;
    loop {
        let now = Instant::now();
        if now >= stop_at {
            break;
        }
        let n = counter.fetch_add(1, Ordering::Relaxed);
        let text = args.args.replace("\"{n}\"", &n.to_string());
        let Value::Object(arguments) = serde_json::from_str(&text)? else {
            anyhow::bail!("--args must be a JSON object");
        };
        let mut params = CallToolRequestParams::new(args.tool.clone());
        params.arguments = Some(arguments);
        let started = Instant::now();
        let ok = matches!(client.call_tool(params).await, Ok(r) if r.is_error != Some(true));
        if started >= warm_until {
            if ok {
                latencies.push(started.elapsed());
            } else {
                errors += 1;
            }
        }
    }
    drop(client.cancel().await);
    Ok((latencies, errors))
}
