//! `undolog tail`: a running gateway's live events in the terminal, one line each, as `GET
//! /events` streams them (the key's org only). A dropped stream is reopened, so a gateway restart
//! costs a gap, not the command.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;

use super::remote::Remote;

#[derive(Debug, clap::Args)]
pub(crate) struct TailArgs {
    /// Only the events of this session.
    #[arg(long)]
    session: Option<String>,
    #[command(flatten)]
    remote: Remote,
}

/// The longest wait between two tries to reopen the stream.
const LONGEST_WAIT: Duration = Duration::from_secs(30);

pub(crate) async fn tail(args: TailArgs) -> anyhow::Result<()> {
    // The first connection must work: a wrong URL or key is said at once.
    let mut response = args.remote.open_stream("/events").await?;
    eprintln!(
        "undolog: following the events of {} (Ctrl-C to stop)",
        args.remote.base()
    );
    let mut wait = Duration::from_millis(500);
    loop {
        let mut events = response.bytes_stream().eventsource();
        while let Some(event) = events.next().await {
            let Ok(event) = event else { break };
            wait = Duration::from_millis(500);
            let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
            if args
                .session
                .as_ref()
                .is_some_and(|s| data["session"] != **s)
            {
                continue;
            }
            match args.remote.json {
                true => println!("{}", event.data),
                false => println!("{}", line(&now(), &event.event, &data)),
            }
        }
        eprintln!("undolog: the event stream ended; reopening…");
        loop {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(LONGEST_WAIT);
            match args.remote.open_stream("/events").await {
                Ok(again) => {
                    eprintln!("undolog: following again (events in between were missed)");
                    response = again;
                    break;
                }
                Err(e) => eprintln!("undolog: {e:#}; trying again in {wait:?}"),
            }
        }
    }
}

/// `HH:MM:SS`, UTC.
fn now() -> String {
    undolog_types::Timestamp::now().to_string()[11..19].to_owned()
}

/// One event as a line: time, kind, session, then what it says (tool, tier, state, decision,
/// replays, why, error).
fn line(at: &str, kind: &str, data: &Value) -> String {
    let text = |key: &str| data[key].as_str().map(str::to_owned);
    let mut said: Vec<String> = Vec::new();
    said.extend(text("tool"));
    said.extend(text("tier"));
    said.extend(text("state"));
    if let Some(approved) = data["approved"].as_bool() {
        said.push(if approved { "approved" } else { "denied" }.into());
    }
    if let Some(compensated) = data["compensated"].as_bool() {
        said.push(
            if compensated {
                "compensated"
            } else {
                "compensation failed"
            }
            .into(),
        );
    }
    if let Some(replays) = data["replays"].as_u64() {
        said.push(format!("replay {replays}"));
    }
    said.extend(text("reason"));
    said.extend(text("error"));
    if let Some(missed) = data["missed"].as_u64() {
        said.push(format!("{missed} events missed"));
    }
    let session = text("session").unwrap_or_default();
    format!("{at}  {kind:<20} {session:<24} {}", said.join(" · "))
        .trim_end()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::line;

    #[test]
    fn each_event_reads_as_one_line_with_what_it_says() {
        let cases = [
            (
                "effect_intercepted",
                json!({"session": "s-1", "tool": "transfer", "tier": "compensable"}),
                "12:00:00  effect_intercepted   s-1                      transfer · compensable",
            ),
            (
                "effect_replayed",
                json!({"session": "s-1", "replays": 2}),
                "12:00:00  effect_replayed      s-1                      replay 2",
            ),
            (
                "approval_required",
                json!({"session": "s-1", "tool": "send_email", "tier": "irreversible",
                       "reason": "it cannot be undone"}),
                "12:00:00  approval_required    s-1                      send_email · irreversible · it cannot be undone",
            ),
            (
                "approval_decided",
                json!({"session": "s-1", "approved": false}),
                "12:00:00  approval_decided     s-1                      denied",
            ),
            (
                "effect_failed",
                json!({"session": "s-2", "error": "upstream down"}),
                "12:00:00  effect_failed        s-2                      upstream down",
            ),
            (
                "lagged",
                json!({"missed": 3}),
                "12:00:00  lagged                                        3 events missed",
            ),
            (
                "effect_committed",
                json!({"session": "s-1"}),
                "12:00:00  effect_committed     s-1",
            ),
        ];
        for (kind, data, want) in cases {
            assert_eq!(line("12:00:00", kind, &data), want, "{kind}");
        }
    }
}
