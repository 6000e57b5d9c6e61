//! Admin commands against a running gateway: `sessions`, `effects`, `export`, `approvals`,
//! `approve`, `deny` and `undo`. Each prints an aligned table, or the gateway's JSON with `--json`.

use serde_json::{Value, json};

use super::{
    remote::{Remote, segment},
    table,
};

#[derive(Debug, clap::Args)]
pub(crate) struct SessionsArgs {
    #[command(flatten)]
    remote: Remote,
}

#[derive(Debug, clap::Args)]
pub(crate) struct EffectsArgs {
    /// The session id.
    session: String,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The session id.
    session: String,
    /// Write the JSON to this file instead of standard output (it must not exist yet).
    #[arg(long, short)]
    output: Option<std::path::PathBuf>,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ApprovalsArgs {
    /// Which approvals: pending, approved, denied, expired, or all.
    #[arg(long, default_value = "pending")]
    status: String,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ApproveArgs {
    /// The approval id (see `undolog approvals`).
    id: String,
    /// Why, kept with the decision.
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DenyArgs {
    /// The approval id (see `undolog approvals`).
    id: String,
    /// Why not; the agent sees it.
    #[arg(long)]
    reason: String,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Debug, clap::Args)]
pub(crate) struct UndoArgs {
    /// The session id.
    session: String,
    #[command(flatten)]
    remote: Remote,
}

pub(crate) async fn sessions(args: SessionsArgs) -> anyhow::Result<()> {
    let sessions = args.remote.get("/v1/sessions").await?;
    if args.remote.json {
        return print_json(&sessions);
    }
    let rows = list(&sessions)
        .map(|s| {
            vec![
                table::text(&s["id"]),
                table::text(&s["state"]),
                table::text(&s["next_seq"]),
                table::text(&s["failed_effect"]),
                table::time(&s["created_at"]),
                table::time(&s["updated_at"]),
            ]
        })
        .collect::<Vec<_>>();
    table::print(
        &[
            "SESSION",
            "STATE",
            "EFFECTS",
            "FAILED EFFECT",
            "CREATED (UTC)",
            "UPDATED (UTC)",
        ],
        &rows,
    );
    Ok(())
}

/// The session's whole history as the gateway exports it (`undolog.session-snapshot.v1`).
pub(crate) async fn export(args: ExportArgs) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    let path = format!("/v1/sessions/{}/export", segment(&args.session));
    let snapshot = args.remote.get(&path).await?;
    let text = serde_json::to_string_pretty(&snapshot)? + "\n";
    let Some(file) = args.output else {
        print!("{text}");
        return Ok(());
    };
    // Never over an existing file: an export is a record.
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)
        .with_context(|| format!("cannot create {} (it must not exist yet)", file.display()))?;
    out.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    let effects = snapshot["effects"].as_array().map_or(0, Vec::len);
    eprintln!(
        "undolog: session {} exported to {} ({effects} effect(s))",
        args.session,
        file.display()
    );
    Ok(())
}

pub(crate) async fn effects(args: EffectsArgs) -> anyhow::Result<()> {
    let path = format!("/v1/sessions/{}/effects", segment(&args.session));
    let effects = args.remote.get(&path).await?;
    if args.remote.json {
        return print_json(&effects);
    }
    let in_doubt = args.remote.get("/v1/effects/in_doubt").await?;
    let doubtful = |id: &Value| list(&in_doubt).any(|e| &e["id"] == id);
    let rows = list(&effects)
        .map(|e| {
            let state = table::text(&e["state"]);
            let outcome = if e["error"].is_null() {
                table::compact(result_summary(&e["result"]), 40)
            } else {
                format!("error: {}", table::compact(&e["error"], 33))
            };
            vec![
                table::text(&e["seq"]),
                table::text(&e["id"]),
                table::text(&e["tool"]),
                table::text(&e["tier"]),
                if doubtful(&e["id"]) {
                    format!("{state} (IN DOUBT)")
                } else {
                    state
                },
                table::duration(&e["created_at"], &e["completed_at"]),
                table::compact(&e["args"], 40),
                outcome,
            ]
        })
        .collect::<Vec<_>>();
    table::print(
        &[
            "SEQ",
            "EFFECT",
            "TOOL",
            "TIER",
            "STATE",
            "DURATION",
            "ARGUMENTS",
            "RESULT",
        ],
        &rows,
    );
    Ok(())
}

pub(crate) async fn approvals(args: ApprovalsArgs) -> anyhow::Result<()> {
    let path = match args.status.as_str() {
        "all" => "/v1/approvals".to_owned(),
        status => format!("/v1/approvals?status={}", segment(status)),
    };
    let approvals = args.remote.get(&path).await?;
    if args.remote.json {
        return print_json(&approvals);
    }
    print_approvals(&args.remote, &approvals).await;
    Ok(())
}

pub(crate) async fn approve(args: ApproveArgs) -> anyhow::Result<()> {
    let path = format!("/v1/approvals/{}/approve", segment(&args.id));
    let body = match args.reason {
        Some(reason) => json!({ "reason": reason }),
        None => json!({}),
    };
    let approval = args.remote.post(&path, body).await?;
    if args.remote.json {
        return print_json(&approval);
    }
    print_approvals(&args.remote, &json!([approval])).await;
    Ok(())
}

pub(crate) async fn deny(args: DenyArgs) -> anyhow::Result<()> {
    let path = format!("/v1/approvals/{}/deny", segment(&args.id));
    let approval = args
        .remote
        .post(&path, json!({ "reason": args.reason }))
        .await?;
    if args.remote.json {
        return print_json(&approval);
    }
    print_approvals(&args.remote, &json!([approval])).await;
    Ok(())
}

pub(crate) async fn undo(args: UndoArgs) -> anyhow::Result<()> {
    let path = format!("/v1/sessions/{}/undo", segment(&args.session));
    let report = args.remote.post(&path, json!({})).await?;
    if args.remote.json {
        return print_json(&report);
    }
    let rows = list(&report["steps"])
        .map(|step| {
            let outcome = &step["outcome"];
            vec![
                table::text(&step["effect_id"]),
                table::text(&step["tool"]),
                table::text(&step["attempts"]),
                match outcome["kind"].as_str() {
                    Some("failed") => format!("failed: {}", table::text(&outcome["error"])),
                    _ => "compensated".to_owned(),
                },
            ]
        })
        .collect::<Vec<_>>();
    table::print(&["EFFECT", "COMPENSATION", "ATTEMPTS", "OUTCOME"], &rows);
    let not_undoable = list(&report["not_undoable"])
        .map(table::text)
        .collect::<Vec<_>>();
    println!(
        "\nsession {} is now {}",
        table::text(&report["session"]),
        table::text(&report["state"])
    );
    if !not_undoable.is_empty() {
        println!("not undoable (irreversible): {}", not_undoable.join(", "));
    }
    Ok(())
}

/// Approvals with the tool and arguments of the call each one holds.
async fn print_approvals(remote: &Remote, approvals: &Value) {
    let mut rows = Vec::new();
    for a in list(approvals) {
        let effect = remote
            .get(&format!(
                "/v1/effects/{}",
                segment(&table::text(&a["effect"]))
            ))
            .await
            .unwrap_or(Value::Null);
        rows.push(vec![
            table::text(&a["id"]),
            table::text(&a["session"]),
            table::text(&effect["tool"]),
            table::compact(&effect["args"], 40),
            table::text(&a["state"]),
            table::time(&a["requested_at"]),
            table::time(&a["expires_at"]),
            table::text(&a["decided_by"]),
            table::text(&a["reason"]),
        ]);
    }
    table::print(
        &[
            "APPROVAL",
            "SESSION",
            "TOOL",
            "ARGUMENTS",
            "STATE",
            "REQUESTED (UTC)",
            "EXPIRES (UTC)",
            "DECIDED BY",
            "REASON",
        ],
        &rows,
    );
}

/// What a person wants of a tool result: its structured content, else all of it.
fn result_summary(result: &Value) -> &Value {
    match &result["structuredContent"] {
        Value::Null => result,
        structured => structured,
    }
}

fn list(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

fn print_json(value: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
