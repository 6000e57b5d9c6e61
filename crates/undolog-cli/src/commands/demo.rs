//! `undolog demo`: an agent session on the embedded store, told step by step.
//!
//! The tools are a small bank that lives in this process, run the way the SDK runs tools: the
//! engine decides, the demo runs the tool, and reports the result back.

use std::{collections::BTreeMap, path::PathBuf, sync::Arc, sync::Mutex};

use anyhow::{Context, bail};
use async_trait::async_trait;
use serde_json::{Value, json};
use undolog_engine::{
    Call, Compensated, CompensationFailure, Compensator, Decider, Engine, EngineConfig, Intercept,
    ToolPolicy,
};
use undolog_store::{Compensation, Effect, SqliteOptions, SqliteStore};
use undolog_types::{Args as CallArgs, OrgId, SessionId, Tier};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The embedded store's file.
    #[arg(long, default_value = "undolog.db", env = "UNDOLOG_STORE")]
    store: PathBuf,
}

/// The demo's bank: account balances in cents.
#[derive(Debug)]
struct Bank(Mutex<BTreeMap<String, i64>>);

impl Bank {
    fn new() -> Bank {
        Bank(Mutex::new(BTreeMap::from([
            ("alice".to_owned(), 100),
            ("bob".to_owned(), 0),
        ])))
    }

    fn balances(&self) -> String {
        let accounts = self.0.lock().expect("bank lock");
        accounts
            .iter()
            .map(|(name, cents)| format!("{name}={cents}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs one tool of the bank.
    fn run(&self, tool: &str, args: &Value) -> Value {
        let mut accounts = self.0.lock().expect("bank lock");
        match tool {
            "transfer" => {
                let amount = args["amount"].as_i64().unwrap_or(0);
                for (account, delta) in [(&args["from"], -amount), (&args["to"], amount)] {
                    *accounts
                        .entry(account.as_str().unwrap_or("?").to_owned())
                        .or_default() += delta;
                }
                json!({"moved": amount})
            }
            "get_balance" => {
                json!({"balance": accounts.get(args["account"].as_str().unwrap_or("")).copied()})
            }
            _ => json!({"sent": true}),
        }
    }
}

#[async_trait]
impl Compensator for Bank {
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, CompensationFailure> {
        let args = effect.args.as_map();
        let reverse = json!({"from": args["to"], "to": args["from"], "amount": args["amount"]});
        let result = self.run("transfer", &reverse);
        let (from, to) = (
            reverse["from"].as_str().unwrap_or("?"),
            reverse["to"].as_str().unwrap_or("?"),
        );
        println!(
            "  undo {}: transfer {from} -> {to} {}",
            short(&effect.id.to_string()),
            reverse["amount"]
        );
        Ok(Compensated::Done { result })
    }
}

fn short(id: &str) -> &str {
    &id[id.len() - 8..]
}

fn policy(tool: &str) -> ToolPolicy {
    match tool {
        "get_balance" => ToolPolicy::new(Tier::ReadOnly),
        "transfer" => ToolPolicy::new(Tier::Compensable).with_compensation(Compensation::Upstream {
            tool: "transfer".into(),
            args: json!({"from": "{{args.to}}", "to": "{{args.from}}", "amount": "{{args.amount}}"}),
        }),
        _ => ToolPolicy::new(Tier::Irreversible),
    }
}

pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let store = SqliteStore::open(SqliteOptions::file(&args.store))
        .await
        .with_context(|| format!("opening the embedded store {}", args.store.display()))?;
    let engine = Engine::new(Arc::new(store), EngineConfig::default());
    let org = OrgId::new("default")?;
    let session = SessionId::new(format!("demo-{}", uuid::Uuid::now_v7()))?;
    let bank = Bank::new();
    println!(
        "UndoLog demo — store {} (SQLite, WAL, synchronous=FULL)",
        args.store.display()
    );
    println!("session {session}; bank: {}\n", bank.balances());

    let transfer = json!({"from": "alice", "to": "bob", "amount": 10});
    call(
        &engine,
        &bank,
        &org,
        &session,
        "get_balance",
        json!({"account": "alice"}),
    )
    .await?;
    call(&engine, &bank, &org, &session, "transfer", transfer.clone()).await?;
    println!("  (the agent retries the same transfer)");
    call(&engine, &bank, &org, &session, "transfer", transfer).await?;
    let approval = match call(
        &engine,
        &bank,
        &org,
        &session,
        "send_email",
        json!({"to": "bob", "body": "paid"}),
    )
    .await?
    {
        Intercept::AwaitingApproval { approval_id, .. } => approval_id,
        other => bail!("send_email should wait for approval, got {other:?}"),
    };
    // Four eyes: the operator is not the agent that made the call.
    let operator = Decider {
        id: "demo-operator".into(),
        may_decide_own: false,
        via: "api".into(),
    };
    engine
        .approve(&org, approval, &operator, Some("looks right".into()))
        .await?;
    println!("  operator approved {}", short(&approval.to_string()));
    call(
        &engine,
        &bank,
        &org,
        &session,
        "send_email",
        json!({"to": "bob", "body": "paid"}),
    )
    .await?;
    call(
        &engine,
        &bank,
        &org,
        &session,
        "transfer",
        json!({"from": "alice", "to": "bob", "amount": 5}),
    )
    .await?;
    println!("\nbank before undo: {}", bank.balances());

    println!("undo session (compensations newest first):");
    let report = engine.undo(&org, &session, &bank).await?;
    println!(
        "session is now {}; not undoable: {} irreversible effect(s)",
        report.state,
        report.not_undoable.len()
    );
    println!("bank after undo:  {}", bank.balances());

    let snapshot = engine.snapshot(&org, &session).await?;
    let effects = snapshot.body["effects"].as_array().map_or(0, Vec::len);
    println!(
        "\nsnapshot kept: {effects} effects; see them all with any SQLite client in {}",
        args.store.display()
    );
    Ok(())
}

/// Intercepts one call, runs the tool when told to, and prints what happened.
async fn call(
    engine: &Engine,
    bank: &Bank,
    org: &OrgId,
    session: &SessionId,
    tool: &str,
    args: Value,
) -> anyhow::Result<Intercept> {
    let call = Call::new(
        org.clone(),
        session.clone(),
        tool,
        CallArgs::try_from(args.clone())?,
        policy(tool),
    )
    .with_caller("demo-agent");
    let answer = engine.intercept(call).await?;
    let tier = policy(tool).tier;
    match &answer {
        Intercept::Execute {
            effect_id,
            lease_token,
            ..
        } => {
            let result = bank.run(tool, &args);
            engine
                .commit(org, *effect_id, lease_token, result.clone())
                .await?;
            println!(
                "{tool:<12} {tier:<13} executed  {} -> {result}",
                short(&effect_id.to_string())
            );
        }
        Intercept::Replay { effect_id, result } => {
            println!(
                "{tool:<12} {tier:<13} REPLAYED  {} -> {result} (not run twice)",
                short(&effect_id.to_string())
            );
        }
        Intercept::AwaitingApproval { approval_id, .. } => {
            println!(
                "{tool:<12} {tier:<13} HELD      awaiting approval {}",
                short(&approval_id.to_string())
            );
        }
        Intercept::Failed {
            effect_id, error, ..
        } => {
            println!(
                "{tool:<12} {tier:<13} FAILED    {} -> {error} (as before; not run again)",
                short(&effect_id.to_string())
            );
        }
        Intercept::Rejected { reason, .. } => {
            println!("{tool:<12} {tier:<13} REJECTED  {}", reason.message())
        }
    }
    Ok(answer)
}
