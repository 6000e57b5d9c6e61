//! The `undolog` command. Thin: parses flags and hands each command to its module.

mod commands;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "undolog",
    version,
    about = "A durable effect log, replay, approvals and undo for AI agents' tool calls"
)]
struct Cli {
    /// How log lines are written to stderr: `text` for people, `json` (one object per line,
    /// with the call's session, effect and trace ids) for log collectors.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "UNDOLOG_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway: MCP at /mcp, REST, admin API and events (the demo bank with no config).
    Serve(commands::serve::ServeArgs),
    /// Run the effect engine alone over gRPC (undolog.engine.v1.EffectEngine) on the store.
    Engine(commands::engine::EngineArgs),
    /// Run the gateway for one MCP client on stdin/stdout (for desktop clients).
    Stdio(commands::serve::Source),
    /// Check a configuration and reach every upstream and interceptor, serving nothing.
    Check(commands::serve::Source),
    /// Manage API keys.
    #[command(subcommand)]
    Keys(commands::keys::KeysCommand),
    /// Serve the built-in demo bank alone, as a plain MCP server (for benchmarks).
    #[command(hide = true)]
    DemoBank(commands::demo_bank::Args),
    /// Walk through the engine on the embedded store and print what happens.
    Demo(commands::demo::Args),
    /// Print the signature of a call (how other languages check parity).
    Signature(commands::signature::Args),
    /// List the sessions of a running gateway (the key's org).
    Sessions(commands::admin::SessionsArgs),
    /// List a session's effects in order: tool, tier, state, duration, arguments, result.
    Effects(commands::admin::EffectsArgs),
    /// Export a session's whole history as JSON: session, effects, approvals, undo stack.
    Export(commands::admin::ExportArgs),
    /// List approvals (pending unless --status says otherwise).
    Approvals(commands::admin::ApprovalsArgs),
    /// Approve a held call; the identical call then runs (or the held request resumes).
    Approve(commands::admin::ApproveArgs),
    /// Deny a held call, with a reason the agent sees.
    Deny(commands::admin::DenyArgs),
    /// Undo a session: run its compensations newest first and print the report.
    Undo(commands::admin::UndoArgs),
    /// Follow a running gateway's live events, one line each (--json: the events' JSON).
    Tail(commands::tail::TailArgs),
}

/// `UNDOLOG_LOG`, with two libraries held down whatever it says, because they print what a call
/// carries before any redaction: rmcp (at info and debug, every request and notification whole)
/// and sqlx (statements, slow ones at warn; PostgreSQL's carry their values as literals). rmcp's
/// transport worker is silenced: what it says of a dead upstream, the gateway says in one line.
fn log_filter() -> tracing_subscriber::EnvFilter {
    ["rmcp=warn", "rmcp::transport::worker=off", "sqlx=error"]
        .into_iter()
        .fold(
            tracing_subscriber::EnvFilter::from_env("UNDOLOG_LOG"),
            |filter, cap| filter.add_directive(cap.parse().expect("a valid directive")),
        )
}

/// Logs to stderr in `format`. A call's lines carry the fields of its `call` span (tool,
/// session, effect, trace id); arguments and results are never logged.
fn start_logging(format: LogFormat) {
    let logs = tracing_subscriber::fmt()
        .with_env_filter(log_filter())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
}

/// Runs the command; an error is one line on stderr (its causes joined), and exit status 1. The
/// error's debug form, with a backtrace when `RUST_BACKTRACE` asks, only under `UNDOLOG_DEBUG`:
/// many machines set `RUST_BACKTRACE`, and a user needs the sentence, not thirty frames.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    start_logging(cli.log_format);
    undolog_engine::crash_points::from_env(); // nothing unless the fault suite built it in
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if std::env::var_os("UNDOLOG_DEBUG").is_some() => {
            eprintln!("undolog: {e:?}");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("undolog: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => {
            commands::serve::serve(args, cli.log_format == LogFormat::Json).await
        }
        Command::Engine(args) => {
            commands::engine::run(args, cli.log_format == LogFormat::Json).await
        }
        Command::Stdio(source) => commands::serve::stdio(source).await,
        Command::Check(source) => commands::serve::check(source).await,
        Command::Keys(command) => commands::keys::run(command).await,
        Command::DemoBank(args) => commands::demo_bank::run(args).await,
        Command::Demo(args) => commands::demo::run(args).await,
        Command::Signature(args) => commands::signature::run(&args),
        Command::Sessions(args) => commands::admin::sessions(args).await,
        Command::Effects(args) => commands::admin::effects(args).await,
        Command::Export(args) => commands::admin::export(args).await,
        Command::Approvals(args) => commands::admin::approvals(args).await,
        Command::Approve(args) => commands::admin::approve(args).await,
        Command::Deny(args) => commands::admin::deny(args).await,
        Command::Undo(args) => commands::admin::undo(args).await,
        Command::Tail(args) => commands::tail::tail(args).await,
    }
}
