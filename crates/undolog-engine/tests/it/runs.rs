//! A client that names no session still gets replay and undo: its principal's calls join one
//! run until an idle gap ends it.

use std::time::Duration;

use serde_json::json;
use undolog_engine::{Call, Engine, Intercept, ManualClock};
use undolog_types::{SessionId, SessionState};

use crate::{
    holder::{Holder, until, waiting_for_locks},
    *,
};

const IDLE: Duration = Duration::from_secs(15 * 60);

/// A call of `api-key:a`, whose run it is, in `run`.
fn in_run(run: &SessionId, amount: i64) -> Call {
    let mut call = transfer("unused", amount).with_caller("api-key:a");
    call.session = run.clone();
    call
}

#[tokio::test]
async fn a_principals_calls_share_a_run_until_an_idle_gap() {
    let (engine, clock) = engine().await;
    let run = engine
        .implicit_run(&org(), "api-key:a", IDLE)
        .await
        .unwrap();
    assert!(run.as_str().starts_with("run-"), "{run}");
    run_call(&engine, &run).await;

    // Within the gap: the same run, so an identical call replays.
    clock.advance(IDLE / 2);
    let again = engine
        .implicit_run(&org(), "api-key:a", IDLE)
        .await
        .unwrap();
    assert_eq!(again, run);
    assert!(matches!(
        engine.intercept(in_run(&again, 5)).await.unwrap(),
        Intercept::Replay { .. }
    ));
    // Another principal has a run of its own.
    let other = engine
        .implicit_run(&org(), "api-key:b", IDLE)
        .await
        .unwrap();
    assert_ne!(other, run);

    // After the gap (counted from the run's last call): a new run, where the call runs again.
    clock.advance(IDLE + Duration::from_secs(1));
    let next = engine
        .implicit_run(&org(), "api-key:a", IDLE)
        .await
        .unwrap();
    assert_ne!(next, run);
    must_execute(&engine, in_run(&next, 5)).await;
    let sessions = engine.sessions(&org()).await.unwrap();
    let mine: Vec<_> = sessions
        .iter()
        .filter(|s| s.run_of.as_deref() == Some("api-key:a"))
        .collect();
    assert_eq!(mine.len(), 2, "{sessions:?}");
}

#[tokio::test]
async fn a_run_that_was_undone_is_not_joined_again() {
    let (engine, _) = engine().await;
    let run = engine
        .implicit_run(&org(), "api-key:a", IDLE)
        .await
        .unwrap();
    run_call(&engine, &run).await;
    let plan = engine.begin_undo(&org(), &run).await.unwrap();
    assert_eq!(plan.state, SessionState::Compensating);
    let next = engine
        .implicit_run(&org(), "api-key:a", IDLE)
        .await
        .unwrap();
    assert_ne!(next, run, "a compensating run takes no more calls");
}

async fn run_call(engine: &undolog_engine::Engine, run: &SessionId) {
    crate::run(engine, in_run(run, 5), json!("ok")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_arriving_together_join_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let engine = file_engine(&dir).await;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let engine = engine.clone();
            tokio::spawn(async move { engine.implicit_run(&org(), "api-key:a", IDLE).await })
        })
        .collect();
    let mut runs = std::collections::BTreeSet::new();
    for t in tasks {
        runs.insert(t.await.unwrap().unwrap());
    }
    assert_eq!(runs.len(), 1, "{runs:?}");
}

/// Callers that find no run remembered, arriving together, wait for one read of it instead of
/// each reading it in turn: on PostgreSQL a read takes the principal's lock, so reads one after
/// another would hold every caller of the principal up (once a second under load, when the
/// remembered run goes stale).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_find_no_run_remembered_wait_for_one_read() {
    let db = undolog_store::scratch::ScratchDatabase::new("undolog_test_engine");
    let engine = postgres_engine(&db).await;
    let holder = Holder::hold(&db, "BEGIN; LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE");
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let engine = engine.clone();
            tokio::spawn(async move { engine.implicit_run(&org(), "api-key:a", IDLE).await })
        })
        .collect();
    until("a read waits for the held table", || {
        waiting_for_locks(&db) >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        waiting_for_locks(&db),
        1,
        "one read, the others wait for it"
    );

    drop(holder);
    let mut runs = std::collections::BTreeSet::new();
    for caller in callers {
        runs.insert(caller.await.unwrap().unwrap());
    }
    assert_eq!(runs.len(), 1, "{runs:?}");
}

/// Two engines on one store, as two processes that share no hints would be (SQLite has none),
/// on one manual clock.
async fn two_processes() -> (Engine, Engine, ManualClock) {
    let clock =
        undolog_engine::ManualClock::starting_at(undolog_types::Timestamp(1_700_000_000_000));
    let store: std::sync::Arc<dyn undolog_store::Store> =
        std::sync::Arc::new(undolog_store::SqliteStore::in_memory().await.unwrap());
    let on_store = || {
        let config = undolog_engine::EngineConfig::default();
        Engine::with_clock(store.clone(), config, std::sync::Arc::new(clock.clone()))
    };
    (on_store(), on_store(), clock)
}

#[tokio::test]
async fn a_run_that_closes_is_not_joined_again_even_a_moment_later() {
    let (engine, other, clock) = two_processes().await;
    let run = engine
        .implicit_run(&org(), "api-key:a", IDLE)
        .await
        .unwrap();
    run_call(&engine, &run).await;
    // Asked again at once: the same run (read a moment ago).
    assert_eq!(
        engine
            .implicit_run(&org(), "api-key:a", IDLE)
            .await
            .unwrap(),
        run
    );

    // Closed here: the next call starts a new run at once, with no time passing.
    engine.close_session(&org(), &run).await.unwrap();
    let next = engine
        .implicit_run(&org(), "api-key:a", IDLE)
        .await
        .unwrap();
    assert_ne!(next, run, "a closed run takes no calls");

    // Closed by another process on the store (no hints on SQLite): at most a second later, the
    // run is read again and found closed.
    other.close_session(&org(), &next).await.unwrap();
    clock.advance(Duration::from_secs(1));
    let after = engine
        .implicit_run(&org(), "api-key:a", IDLE)
        .await
        .unwrap();
    assert_ne!(after, next, "read again after a second");
}

/// A run closed by another process is remembered as current for a moment; a call that finds it
/// closed makes the engine forget it, and the principal's next call is in a new run at once.
#[tokio::test]
async fn a_run_a_call_found_closed_is_forgotten_at_once() {
    let (engine, other, _) = two_processes().await;
    let acme = org();
    let runs = || engine.implicit_run(&acme, "api-key:a", IDLE);
    let run = runs().await.unwrap();
    other.close_session(&org(), &run).await.unwrap();
    assert_eq!(runs().await.unwrap(), run, "remembered for a moment");

    let refused = engine.intercept(in_run(&run, 5)).await.unwrap();
    assert!(
        matches!(
            refused,
            Intercept::Rejected {
                effect_id: None,
                reason: undolog_engine::Rejection::SessionClosed { .. }
            }
        ),
        "{refused:?}"
    );
    let next = runs().await.unwrap();
    assert_ne!(next, run, "read afresh: the closed run is not joined");
    must_execute(&engine, in_run(&next, 5)).await;

    // So too when a read-only call's record finds it closed.
    other.close_session(&org(), &next).await.unwrap();
    assert_eq!(runs().await.unwrap(), next, "remembered for a moment");
    let read = undolog_engine::ReadOutcome::Answered(json!({"balance": 1}));
    let started = engine.now();
    let balance = Call {
        session: next.clone(),
        ..get_balance("unused").with_caller("api-key:a")
    };
    let refused = engine
        .record_read(balance, EffectId::generate(), started, read, None)
        .await
        .unwrap();
    assert!(
        matches!(
            refused,
            Some(undolog_engine::Rejection::SessionClosed { .. })
        ),
        "{refused:?}"
    );
    assert_ne!(
        runs().await.unwrap(),
        next,
        "read afresh after the record found it closed"
    );
}
