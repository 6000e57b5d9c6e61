//! Identical calls at once: exactly one runs; the others wait and get its result (or its error).

use std::time::Duration;

use serde_json::json;
use undolog_engine::{Error, Intercept};
use undolog_types::EffectState;

use crate::*;

const CALLERS: usize = 64;

#[derive(Debug, PartialEq)]
enum Seen {
    Executed,
    Replayed(serde_json::Value),
    Failed(String),
}

async fn race(engine: &Engine, tool_fails: bool, session: &str) -> Vec<Seen> {
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(CALLERS));
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (engine, barrier, session) = (engine.clone(), barrier.clone(), session.to_owned());
            tokio::spawn(async move {
                barrier.wait().await;
                match engine.intercept(transfer(&session, 10)).await {
                    Ok(Intercept::Execute {
                        effect_id,
                        lease_token,
                        ..
                    }) => {
                        tokio::time::sleep(Duration::from_millis(50)).await; // the tool runs
                        if tool_fails {
                            engine
                                .fail(&org(), effect_id, &lease_token, "insufficient funds")
                                .await
                                .unwrap();
                        } else {
                            engine
                                .commit(&org(), effect_id, &lease_token, json!({"txn": 1}))
                                .await
                                .unwrap();
                        }
                        Seen::Executed
                    }
                    Ok(Intercept::Replay { result, .. }) => Seen::Replayed(result),
                    Ok(Intercept::Failed { error, .. }) => Seen::Failed(error),
                    other => panic!("unexpected {other:?}"),
                }
            })
        })
        .collect();
    let mut seen = Vec::new();
    for t in tasks {
        seen.push(t.await.unwrap());
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_identical_calls_run_once_and_the_rest_replay() {
    let dir = tempfile::tempdir().unwrap();
    let engine = file_engine(&dir).await;
    let seen = race(&engine, false, "s1").await;
    assert_eq!(seen.iter().filter(|s| **s == Seen::Executed).count(), 1);
    assert_eq!(
        seen.iter()
            .filter(|s| **s == Seen::Replayed(json!({"txn": 1})))
            .count(),
        CALLERS - 1
    );
    assert_eq!(
        engine
            .session_effects(&org(), &session("s1"))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn when_the_one_running_call_fails_the_waiters_get_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let engine = file_engine(&dir).await;
    let seen = race(&engine, true, "s1").await;
    assert_eq!(seen.iter().filter(|s| **s == Seen::Executed).count(), 1);
    let failed = seen
        .iter()
        .filter(|s| **s == Seen::Failed("insufficient funds".into()))
        .count();
    assert_eq!(failed, CALLERS - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_postgres_too_identical_calls_run_once_and_the_rest_hear_its_answer() {
    let db = undolog_store::scratch::ScratchDatabase::new("undolog_test_engine");
    let engine = postgres_engine(&db).await;
    for (tool_fails, heard) in [
        (false, Seen::Replayed(json!({"txn": 1}))),
        (true, Seen::Failed("insufficient funds".into())),
    ] {
        // A session of their own each time: a failed call is not replayed, but decided afresh.
        let seen = race(&engine, tool_fails, &format!("s-{tool_fails}")).await;
        assert_eq!(seen.iter().filter(|s| **s == Seen::Executed).count(), 1);
        assert_eq!(seen.iter().filter(|s| **s == heard).count(), CALLERS - 1);
    }
}

#[tokio::test]
async fn a_waiter_gives_up_with_a_clear_error_when_the_call_runs_too_long() {
    let store = undolog_store::SqliteStore::in_memory().await.unwrap();
    let config = undolog_engine::EngineConfig {
        wait_timeout: Duration::from_millis(50),
        ..Default::default()
    };
    let engine = Engine::new(std::sync::Arc::new(store), config);
    let running = must_execute(&engine, transfer("s1", 10)).await;
    let err = engine.intercept(transfer("s1", 10)).await.unwrap_err();
    assert!(
        matches!(err, Error::StillRunning { effect, .. } if effect == running),
        "{err:?}"
    );
    assert!(err.to_string().contains("retry later"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_idempotency_key_in_flight_waits_for_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let engine = file_engine(&dir).await;
    let (first, token) = must_own(&engine, transfer("s1", 10).with_idempotency_key("k")).await;
    let second = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .intercept(transfer("s1", 10).with_idempotency_key("k"))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    engine
        .commit(&org(), first, &token, json!("done"))
        .await
        .unwrap();
    assert_eq!(
        second.await.unwrap().unwrap(),
        Intercept::Replay {
            effect_id: first,
            result: json!("done")
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_caller_went_away_before_it_heard_execute_is_never_sent_and_runs_on_retry() {
    let dir = tempfile::tempdir().unwrap();
    let db = undolog_store::scratch::ScratchDatabase::new("undolog_test_engine");
    let engines = [
        ("SQLite", file_engine(&dir).await),
        ("PostgreSQL", postgres_engine(&db).await),
    ];
    for (store, engine) in engines {
        // Polled once (queued for its batch), then dropped: nobody will hear "execute". Under
        // load the batch may already have answered within that one poll (another worker ran
        // it): then that call was heard, and the next try takes a session of its own.
        let mut unheard = None;
        for i in 0..20 {
            let name = format!("s{i}");
            let call = engine.intercept(transfer(&name, 10));
            if tokio::time::timeout(Duration::ZERO, call).await.is_err() {
                unheard = Some(name);
                break;
            }
        }
        let unheard =
            unheard.unwrap_or_else(|| panic!("{store}: every call was answered in its first poll"));
        let retry = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match engine
                    .intercept(transfer(&unheard, 10).with_wait(Duration::from_millis(50)))
                    .await
                {
                    Ok(Intercept::Execute { effect_id, .. }) => break effect_id,
                    Err(Error::StillRunning { .. }) => continue,
                    other => panic!("{store}: unexpected {other:?}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{store}: the identical call still waits for one nobody runs"));
        let effects = engine
            .session_effects(&org(), &session(&unheard))
            .await
            .unwrap();
        let states: Vec<_> = effects.iter().map(|e| (e.id == retry, e.state)).collect();
        assert_eq!(
            states,
            vec![(false, EffectState::Rejected), (true, EffectState::Pending)],
            "{store}: the unheard one never sent, the retry running"
        );
    }
}
