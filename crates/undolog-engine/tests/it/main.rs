//! The engine against a real SQLite store: each module reads like one feature.

mod answered_early;
mod approvals;
mod bad_input;
mod compensation_in_doubt;
mod concurrency;
mod core_is_pure;
mod executors;
mod group_commit;
mod hints;
mod holder;
mod in_doubt;
mod ownership_properties;
mod postgres_batches;
mod properties;
mod rejected;
mod remembered;
mod replay;
mod runs;
mod session_owners;
mod settle_decisions;
mod snapshots;
mod undo;
mod undo_decisions;
mod undo_steps;

use std::{future::Future, sync::Arc, time::Duration};

use serde_json::{Value, json};
use undolog_engine::{Call, Decider, Engine, EngineConfig, Intercept, ManualClock, ToolPolicy};
use undolog_store::{Compensation, SqliteOptions, SqliteStore};
use undolog_types::{Args, EffectId, LeaseToken, OrgId, SessionId, Tier, Timestamp};

/// An engine over a fresh in-memory store, with a clock the test moves.
pub async fn engine() -> (Engine, ManualClock) {
    let clock = ManualClock::starting_at(Timestamp(1_700_000_000_000));
    let store = SqliteStore::in_memory().await.unwrap();
    let config = EngineConfig {
        compensation_backoff: Duration::from_millis(1),
        ..EngineConfig::default()
    };
    (
        Engine::with_clock(Arc::new(store), config, Arc::new(clock.clone())),
        clock,
    )
}

/// An engine over a scratch PostgreSQL database, on the system clock.
pub async fn postgres_engine(db: &undolog_store::scratch::ScratchDatabase) -> Engine {
    let options = undolog_store::PostgresOptions::new(db.url());
    let store = undolog_store::PostgresStore::open(options).await.unwrap();
    system_clock_engine(Arc::new(store))
}

/// An engine over a fresh SQLite file with its full connection pool, on the system clock.
pub async fn file_engine(dir: &tempfile::TempDir) -> Engine {
    let store = SqliteStore::open(SqliteOptions::file(dir.path().join("log.db")))
        .await
        .unwrap();
    system_clock_engine(Arc::new(store))
}

/// An engine on the system clock that looks for other processes' changes every 20 ms.
fn system_clock_engine(store: Arc<dyn undolog_store::Store>) -> Engine {
    let config = EngineConfig {
        poll_interval: Duration::from_millis(20),
        ..EngineConfig::default()
    };
    Engine::new(store, config)
}

pub fn org() -> OrgId {
    OrgId::new("acme").unwrap()
}

pub fn session(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

pub fn args(value: Value) -> Args {
    Args::try_from(value).unwrap()
}

pub fn transfer_policy() -> ToolPolicy {
    ToolPolicy::new(Tier::Compensable).with_compensation(Compensation::Upstream {
        tool: "transfer".into(),
        args: json!({"from": "{{args.to}}", "to": "{{args.from}}", "amount": "{{args.amount}}"}),
    })
}

pub fn transfer(session_name: &str, amount: i64) -> Call {
    Call::new(
        org(),
        session(session_name),
        "transfer",
        args(json!({"from": "alice", "to": "bob", "amount": amount})),
        transfer_policy(),
    )
}

pub fn get_balance(session_name: &str) -> Call {
    Call::new(
        org(),
        session(session_name),
        "get_balance",
        args(json!({"account": "alice"})),
        ToolPolicy::new(Tier::ReadOnly),
    )
}

pub fn send_email(session_name: &str) -> Call {
    Call::new(
        org(),
        session(session_name),
        "send_email",
        args(json!({"to": "ceo@example.com", "body": "hi"})),
        ToolPolicy::new(Tier::Irreversible),
    )
}

/// A person deciding approvals (never their own calls).
pub fn person(name: &str) -> Decider {
    Decider {
        id: name.to_owned(),
        may_decide_own: false,
        via: "api".into(),
    }
}

/// Intercepts a call that must execute, and returns its effect id.
pub async fn must_execute(engine: &Engine, call: Call) -> EffectId {
    must_own(engine, call).await.0
}

/// Intercepts a call that must execute, and returns its effect id and the lease token that
/// settles it.
pub async fn must_own(engine: &Engine, call: Call) -> (EffectId, LeaseToken) {
    match engine.intercept(call).await.unwrap() {
        Intercept::Execute {
            effect_id,
            lease_token,
            ..
        } => (effect_id, lease_token),
        other => panic!("expected execute, got {other:?}"),
    }
}

/// Intercepts, executes and commits a call; returns its effect id.
pub async fn run(engine: &Engine, call: Call, result: Value) -> EffectId {
    let (id, token) = must_own(engine, call).await;
    engine.commit(&org(), id, &token, result).await.unwrap();
    id
}

/// Runs each of `work` on a task of its own, all released together by a barrier (so they reach
/// the engine at the same moment), and gives their answers in order.
pub async fn at_once<T, F>(work: impl IntoIterator<Item = F>) -> Vec<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let work: Vec<F> = work.into_iter().collect();
    let barrier = Arc::new(tokio::sync::Barrier::new(work.len()));
    let tasks: Vec<_> = work
        .into_iter()
        .map(|work| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                work.await
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}
