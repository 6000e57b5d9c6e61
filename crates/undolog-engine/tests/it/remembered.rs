//! The engine writes what it remembers without reading it first (`remembered`): a new call in a
//! session it knows, the outcome of a call it runs. Here the rows change behind its
//! back, as another gateway or an operator would change them, and it must decide as if it had
//! read them: the store refuses the write made on an old memory, and the engine reads again.

use std::{collections::HashMap, time::Duration};

use serde_json::json;
use undolog_engine::{Engine, Error, Intercept};
use undolog_store::scratch::ScratchDatabase;
use undolog_types::{EffectState, SessionState};

use crate::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_a_session_two_gateways_share_are_numbered_without_gaps_or_repeats() {
    on_both_stores(|a, b| async move {
        for n in 0..8 {
            // a, a, b, b, a, a, …: each gateway's memory of the session is out of date every other call.
            let engine = if n / 2 % 2 == 0 { &a } else { &b };
            run(engine, transfer("s1", n), json!({"id": n})).await;
        }
        let effects = a.session_effects(&org(), &session("s1")).await.unwrap();
        let seqs: Vec<i64> = effects.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (0..8).collect::<Vec<_>>());
        assert!(effects.iter().all(|e| e.state == EffectState::Committed));
        let sessions = b.sessions(&org()).await.unwrap();
        assert_eq!(sessions[0].next_seq, 8);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_another_gateway_used_meanwhile_is_refused_not_run() {
    on_both_stores(|a, b| async move {
        run(&a, transfer("s1", 1), json!({"id": 1})).await;
        // The other gateway takes the key for a call of another session: `s1` is unchanged, so
        // only the check for an earlier effect of the key can tell.
        run(
            &b,
            transfer("s2", 2).with_idempotency_key("k"),
            json!({"id": 2}),
        )
        .await;
        let reused = a
            .intercept(transfer("s1", 2).with_idempotency_key("k"))
            .await;
        assert!(matches!(reused, Err(Error::KeyReused { .. })), "{reused:?}");
        // The same call again is a replay, from either gateway.
        for engine in [&a, &b] {
            let again = engine
                .intercept(transfer("s2", 2).with_idempotency_key("k"))
                .await
                .unwrap();
            assert!(matches!(again, Intercept::Replay { .. }), "{again:?}");
        }
        let effects = a.session_effects(&org(), &session("s1")).await.unwrap();
        assert_eq!(effects.len(), 1, "nothing recorded for the refused call");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_another_gateway_recorded_meanwhile_is_replayed_not_run_again() {
    on_both_stores(|a, b| async move {
        run(&a, transfer("s1", 1), json!({"id": 1})).await;
        run(&b, transfer("s1", 2), json!({"id": 2})).await;
        match a.intercept(transfer("s1", 2)).await.unwrap() {
            Intercept::Replay { result, .. } => assert_eq!(result, json!({"id": 2})),
            other => panic!("recorded by the other gateway, so replayed: {other:?}"),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_is_not_written_over_one_recorded_meanwhile() {
    on_both_stores(|a, b| async move {
        // The owner's token reaches the other gateway too (an SDK caller behind a balancer).
        let (id, token) = must_own(&a, transfer("s1", 1)).await;
        b.fail(&org(), id, &token, "recorded elsewhere first")
            .await
            .unwrap();
        let late = a.commit(&org(), id, &token, json!({"id": 1})).await;
        assert!(
            matches!(
                late,
                Err(Error::NotPending {
                    state: EffectState::Failed,
                    ..
                })
            ),
            "{late:?}"
        );
        let effect = a.effect(&org(), id).await.unwrap();
        assert_eq!(effect.state, EffectState::Failed);
        assert_eq!(effect.error.as_deref(), Some("recorded elsewhere first"));
    })
    .await;
}

/// Outcomes at once join their session's batches; one of them was recorded by another gateway
/// meanwhile. It alone is refused, on the row as read; its neighbours are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_at_once_keep_theirs_when_one_was_recorded_meanwhile() {
    on_both_stores(|a, b| async move {
        let mut owned = Vec::new();
        for n in 0..AT_ONCE {
            owned.push(must_own(&a, transfer("s1", n)).await);
        }
        let (recorded_elsewhere, its_token) = owned[owned.len() / 2].clone();
        b.fail(
            &org(),
            recorded_elsewhere,
            &its_token,
            "recorded elsewhere first",
        )
        .await
        .unwrap();
        let answers = at_once(owned.iter().cloned().map(|(id, token)| {
            let a = a.clone();
            async move { (id, a.commit(&org(), id, &token, json!({"ok": true})).await) }
        }))
        .await;
        for (id, answer) in answers {
            let effect = a.effect(&org(), id).await.unwrap();
            if id == recorded_elsewhere {
                assert!(
                    matches!(
                        answer,
                        Err(Error::NotPending {
                            state: EffectState::Failed,
                            ..
                        })
                    ),
                    "{answer:?}"
                );
                assert_eq!(effect.state, EffectState::Failed);
            } else {
                assert!(answer.is_ok(), "{answer:?}");
                assert_eq!(effect.state, EffectState::Committed);
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_closed_meanwhile_takes_no_new_call() {
    on_both_stores(|a, b| async move {
        run(&a, transfer("s1", 1), json!({"id": 1})).await;
        b.close_session(&org(), &session("s1")).await.unwrap();
        match a.intercept(transfer("s1", 2)).await.unwrap() {
            Intercept::Rejected { .. } => {}
            other => panic!("the session is closed: {other:?}"),
        }
        let sessions = a.sessions(&org()).await.unwrap();
        assert_eq!(sessions[0].state, SessionState::Completed);
        assert_eq!(sessions[0].next_seq, 1);
    })
    .await;
}

/// What the memory saves, seen from the server: how often each conditional write ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_calls_in_a_known_session_and_their_outcomes_write_without_reading_first() {
    const CALLS: i64 = 6;
    let db = counting_database();
    let engine = postgres_engine(&db).await;
    for n in 0..CALLS {
        run(&engine, transfer("s1", n), json!({"id": n})).await;
    }
    drop(engine);
    let expected: HashMap<String, i64> = [
        // The first call reads its session; every later one writes on the session as remembered,
        // and its effect with the check that the call is new, in one function.
        ("undolog_insert_effect", 1),
        ("undolog_insert_new_effect", CALLS - 1),
        ("undolog_expect_no_effect", 0),
        ("undolog_replace_session", CALLS - 1),
        // Every outcome is written on the effect as its intercept recorded it, with the effect's
        // entry on the undo stack, in one function.
        ("undolog_replace_effect_push_undo", CALLS),
        ("undolog_replace_effect", 0),
        ("undolog_push_undo", 0),
        // Each transaction's advisory locks are taken in one statement.
        ("undolog_lock_calls", CALLS),
    ]
    .into_iter()
    .map(|(name, calls)| (name.to_owned(), calls))
    .collect();
    let matches = |counted: &HashMap<String, i64>| {
        expected
            .iter()
            .all(|(name, calls)| counted.get(name).copied().unwrap_or(0) == *calls)
    };
    let counted = function_calls(&db, matches).await;
    assert!(
        matches(&counted),
        "expected {expected:?}, the server counted {counted:?}"
    );
}

/// Calls that arrive at once share batches (`session_batches`); in sessions the engine
/// remembers, a batch is decided without reading, and each of its calls is checked by the store.
/// When another gateway wrote to one of the sessions meanwhile, the batch writes nothing and its
/// calls are read and decided again: in one session, and in a batch of several.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_at_once_in_a_session_another_gateway_changed_are_read_again() {
    for sessions in [1, 4] {
        let db = counting_database();
        let (a, b) = (postgres_engine(&db).await, postgres_engine(&db).await);
        calls_at_once_after_another_gateway_wrote(&a, &b, sessions).await;

        // Every call of the second round was checked by the store, not read first.
        drop((a, b));
        let checked = |counted: &HashMap<String, i64>| {
            ["undolog_expect_no_effect", "undolog_insert_new_effect"]
                .iter()
                .map(|name| counted.get(*name).copied().unwrap_or(0))
                .sum::<i64>()
        };
        let counted = function_calls(&db, |c| checked(c) >= AT_ONCE).await;
        assert!(
            checked(&counted) >= AT_ONCE,
            "{sessions} sessions: checked without a read: {counted:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_too_calls_at_once_in_a_session_another_gateway_changed_are_read_again() {
    for sessions in [1, 4] {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (file_engine(&dir).await, file_engine(&dir).await);
        calls_at_once_after_another_gateway_wrote(&a, &b, sessions).await;
    }
}

/// `a` records a call in each of `sessions`, and `b` writes to the first of them; then `a` takes
/// calls in all of them at once, twice: every call is recorded, and each session's numbered
/// without gaps.
async fn calls_at_once_after_another_gateway_wrote(a: &Engine, b: &Engine, sessions: i64) {
    let name = |n: i64| format!("s{}", n % sessions);
    for n in 0..sessions {
        run(a, transfer(&name(n), -1 - n), json!({"id": n})).await;
    }
    run(b, transfer(&name(0), -100), json!({"id": -100})).await;
    for round in 0..2 {
        // The first round finds `a`'s memory of a session out of date; the second does not.
        let calls: Vec<_> = (0..AT_ONCE)
            .map(|n| {
                let a = a.clone();
                let call = transfer(&name(n), 1_000 + round * 100 + n);
                tokio::spawn(async move { a.intercept(call).await })
            })
            .collect();
        for call in calls {
            let answer = call.await.unwrap().unwrap();
            assert!(matches!(answer, Intercept::Execute { .. }), "{answer:?}");
        }
    }
    for n in 0..sessions {
        let effects = b.session_effects(&org(), &session(&name(n))).await.unwrap();
        let seqs: Vec<i64> = effects.iter().map(|e| e.seq).collect();
        let written_before = if n == 0 { 2 } else { 1 };
        let expected = written_before + 2 * AT_ONCE / sessions;
        assert_eq!(seqs, (0..expected).collect::<Vec<_>>(), "session {n}");
    }
}

/// Calls taken at once by one gateway.
const AT_ONCE: i64 = 16;

/// Runs `test` with two engines on one database, as two gateways share it: on PostgreSQL, then
/// on one SQLite file.
async fn on_both_stores<F, Fut>(test: F)
where
    F: Fn(Engine, Engine) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = ScratchDatabase::new("undolog_test_engine");
    eprintln!("on PostgreSQL");
    test(postgres_engine(&db).await, postgres_engine(&db).await).await;
    let dir = tempfile::tempdir().unwrap();
    eprintln!("on SQLite");
    test(file_engine(&dir).await, file_engine(&dir).await).await;
}

/// A scratch database whose server counts calls of the store's functions.
fn counting_database() -> ScratchDatabase {
    let db = ScratchDatabase::new("undolog_test_engine");
    db.query(&format!(
        "ALTER DATABASE {} SET track_functions = 'pl'",
        db.name()
    ));
    db
}

/// How often the server ran each of the store's functions, once `enough` says so (backends report
/// their counts when their connections close, a moment after the engine is dropped), or after
/// ten seconds.
async fn function_calls(
    db: &ScratchDatabase,
    enough: impl Fn(&HashMap<String, i64>) -> bool,
) -> HashMap<String, i64> {
    let mut counted = HashMap::new();
    for _ in 0..100 {
        let rows = db.query(
            "SELECT funcname, calls FROM pg_stat_user_functions WHERE funcname LIKE 'undolog_%'",
        );
        counted = rows
            .lines()
            .filter_map(|row| row.split_once('|'))
            .map(|(name, calls)| (name.to_owned(), calls.trim().parse().unwrap_or(0)))
            .collect();
        if enough(&counted) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    counted
}
