//! Effect updates that arrive together share a transaction (group commit); each caller still gets
//! its own answer, and a refused update takes nothing else down with it.

use std::sync::Arc;

use serde_json::json;
use undolog_engine::Error;
use undolog_store::Store;
use undolog_types::{EffectId, EffectState, LeaseToken};

use crate::*;

const SESSIONS: usize = 48;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_made_at_once_all_land_and_each_caller_hears_its_own_answer() {
    let dir = tempfile::tempdir().unwrap();
    let engine = file_engine(&dir).await;
    let mut owned = Vec::new();
    for n in 0..SESSIONS {
        owned.push(must_own(&engine, transfer(&format!("s{n}"), n as i64)).await);
    }
    let ids: Vec<EffectId> = owned.iter().map(|(id, _)| *id).collect();
    let token_of = |id: EffectId| {
        let found = owned.iter().find(|(owned, _)| *owned == id);
        found.map_or_else(LeaseToken::generate, |(_, token)| token.clone())
    };

    // Every effect committed at the same moment, beside a second commit of the first effect and a
    // commit of an effect that does not exist.
    let mut updates: Vec<(EffectId, serde_json::Value)> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| (*id, json!({"n": n})))
        .collect();
    updates.push((ids[0], json!({"n": "again"})));
    let unknown = EffectId::generate();
    updates.push((unknown, json!({})));
    let answers = at_once(updates.into_iter().map(|(id, result)| {
        let (engine, token) = (engine.clone(), token_of(id));
        async move { (id, engine.commit(&org(), id, &token, result).await) }
    }))
    .await;

    let first: Vec<_> = answers.iter().filter(|(id, _)| *id == ids[0]).collect();
    let refused = first
        .iter()
        .filter(|(_, a)| matches!(a, Err(Error::NotPending { .. })))
        .count();
    assert_eq!(
        refused, 1,
        "one of the two commits of one effect is refused: {first:?}"
    );
    for (id, answer) in &answers {
        if *id == unknown {
            assert!(
                matches!(answer, Err(Error::UnknownEffect(e)) if e == id),
                "{answer:?}"
            );
        } else if *id != ids[0] {
            assert!(answer.is_ok(), "{id}: {answer:?}");
        }
    }
    for (n, id) in ids.iter().enumerate().skip(1) {
        let effect = engine.effect(&org(), *id).await.unwrap();
        assert_eq!(effect.state, EffectState::Committed);
        assert_eq!(effect.result, Some(json!({"n": n})));
    }
    let first = engine.effect(&org(), ids[0]).await.unwrap();
    assert_eq!(first.state, EffectState::Committed);
    for n in 0..SESSIONS {
        let plan = engine
            .session_effects(&org(), &session(&format!("s{n}")))
            .await
            .unwrap();
        assert_eq!(plan.len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_renewal_and_a_commit_of_one_effect_at_once_both_take_effect_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let engine = file_engine(&dir).await;
    let (id, token) = must_own(&engine, transfer("s1", 1)).await;
    let acme = org();
    let (renewed, committed) = tokio::join!(
        engine.renew_lease(&acme, id, &token),
        engine.commit(&acme, id, &token, json!({"ok": true}))
    );
    committed.unwrap();
    // The renewal ran first (and succeeded) or after the commit (and was refused): never lost.
    if let Err(e) = renewed {
        assert!(matches!(e, Error::NotPending { .. }), "{e:?}");
    }
    let effect = engine.effect(&org(), id).await.unwrap();
    assert_eq!(effect.state, EffectState::Committed);
    assert_eq!(effect.result, Some(json!({"ok": true})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intercepts_made_at_once_each_hear_their_own_decision_and_a_bad_one_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let engine = file_engine(&dir).await;
    // New calls, identical calls of one signature, and a key reused for another call.
    engine
        .intercept(transfer("keyed", 1).with_idempotency_key("k-1"))
        .await
        .unwrap();
    let mut calls: Vec<undolog_engine::Call> = (0..SESSIONS)
        .map(|n| transfer(&format!("s{n}"), n as i64))
        .collect();
    calls.extend((0..8).map(|_| transfer("same", 7)));
    calls.push(transfer("keyed", 2).with_idempotency_key("k-1"));
    let answers = at_once(calls.into_iter().map(|call| {
        let engine = engine.clone();
        async move {
            let session = call.session.clone();
            let answer = tokio::time::timeout(
                std::time::Duration::from_millis(500),
                engine.intercept(call),
            )
            .await;
            (session, answer)
        }
    }))
    .await;
    let (mut executed, mut same_runs, mut same_waits, mut reused) = (0, 0, 0, 0);
    for answer in answers {
        match answer {
            (s, Ok(Ok(Intercept::Execute { .. }))) if s.as_str() == "same" => same_runs += 1,
            (s, Err(_)) if s.as_str() == "same" => same_waits += 1, // waits for the one running
            (_, Ok(Ok(Intercept::Execute { .. }))) => executed += 1,
            (_, Ok(Err(Error::KeyReused { .. }))) => reused += 1,
            other => panic!("unexpected answer: {other:?}"),
        }
    }
    assert_eq!(executed, SESSIONS, "every new call runs");
    assert_eq!((same_runs, same_waits), (1, 7), "identical calls run once");
    assert_eq!(reused, 1, "the reused key is refused, alone");
    let sessions = engine.sessions(&org()).await.unwrap();
    assert_eq!(
        sessions.len(),
        SESSIONS + 2,
        "every new call's session is recorded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_call_is_one_finished_record_and_a_closed_session_keeps_none() {
    use undolog_engine::ReadOutcome;
    let dir = tempfile::tempdir().unwrap();
    let engine = file_engine(&dir).await;
    let started = engine.now();
    let cases = [
        (
            "answered",
            ReadOutcome::Answered(json!({"balance": 100})),
            EffectState::Committed,
        ),
        (
            "failed",
            ReadOutcome::Failed {
                error: "no such account".into(),
                details: None,
            },
            EffectState::Failed,
        ),
    ];
    for (name, outcome, state) in cases {
        let id = EffectId::generate();
        let kept = engine
            .record_read(get_balance(name), id, started, outcome, None)
            .await
            .unwrap();
        assert_eq!(kept, None, "{name}");
        let effect = engine.effect(&org(), id).await.unwrap();
        assert_eq!(effect.state, state, "{name}");
        assert_eq!(effect.created_at, started, "{name}: when it was sent");
        assert!(
            effect.lease.is_none(),
            "{name}: nothing to be in doubt about"
        );
    }
    engine
        .close_session(&org(), &session("answered"))
        .await
        .unwrap();
    let id = EffectId::generate();
    let kept = engine
        .record_read(
            get_balance("answered"),
            id,
            started,
            ReadOutcome::Answered(json!({})),
            None,
        )
        .await
        .unwrap();
    assert!(
        matches!(kept, Some(undolog_engine::Rejection::SessionClosed { .. })),
        "a closed session takes no calls: {kept:?}"
    );
    assert!(engine.effect(&org(), id).await.is_err(), "nothing recorded");
}

/// Calls that arrive while a batch holds the store all go into the next one: the group-commit
/// thread takes whatever has gathered each time it is free, so 32 calls made while the store's
/// one connection is busy cost two COMMITs at most (the batch that was waiting for the
/// connection, and one for everything that came meanwhile), never one each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_arrive_while_the_store_is_busy_share_the_next_batch() {
    const CALLS: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(SqliteOptions::file(dir.path().join("log.db")))
        .await
        .unwrap();
    let engine = Engine::new(Arc::new(store.clone()), EngineConfig::default());
    let sizes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = sizes.clone();
    engine.observe_batches(Arc::new(move |size| seen.lock().unwrap().push(size)));
    let calls = (0..CALLS).map(|n| transfer(&format!("s{n}"), n as i64));
    execute_while_the_store_is_held(&store, &engine, calls).await;
    let sizes = sizes.lock().unwrap().clone();
    assert_eq!(
        sizes.iter().sum::<usize>(),
        CALLS,
        "every call batched once: {sizes:?}"
    );
    assert!(
        sizes.len() <= 2,
        "the calls that waited for the store share one batch: {sizes:?}"
    );
}

/// A batch writes each session once, as its last call left it, however many of its calls took
/// the session's next number: 32 calls of one session that wait for the store together cost
/// one write of the session per transaction, not 32.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_writes_each_session_once() {
    const CALLS: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("log.db");
    let store = SqliteStore::open(SqliteOptions::file(&file)).await.unwrap();
    let engine = Engine::new(Arc::new(store.clone()), EngineConfig::default());
    must_execute(&engine, transfer("s1", -1)).await;
    let batches = Arc::new(std::sync::Mutex::new(0_usize));
    let seen = batches.clone();
    engine.observe_batches(Arc::new(move |_| *seen.lock().unwrap() += 1));
    // Every write of a session row, counted beside the log.
    let count = rusqlite::Connection::open(&file).unwrap();
    count
        .execute_batch(
            "CREATE TABLE session_writes (n INTEGER); \
             CREATE TRIGGER count_session_writes AFTER UPDATE ON sessions \
             BEGIN INSERT INTO session_writes VALUES (1); END;",
        )
        .unwrap();
    let calls = (0..CALLS).map(|n| transfer("s1", n as i64));
    execute_while_the_store_is_held(&store, &engine, calls).await;
    let query = |sql: &str| -> i64 { count.query_row(sql, [], |row| row.get(0)).unwrap() };
    let writes = query("SELECT count(*) FROM session_writes");
    let batches = *batches.lock().unwrap() as i64;
    assert!(
        writes <= batches && batches < CALLS as i64,
        "one write of the session per transaction: {writes} writes in {batches} batches"
    );
    assert_eq!(
        query("SELECT next_seq FROM sessions"),
        CALLS as i64 + 1,
        "the write counts every call"
    );
}

/// Makes `calls` while another transaction holds the store's connection, so that they all wait
/// for it together, and checks that each is executed.
async fn execute_while_the_store_is_held(
    store: &SqliteStore,
    engine: &Engine,
    calls: impl Iterator<Item = undolog_engine::Call>,
) {
    let held = store.begin(&org()).await.unwrap();
    let calls: Vec<_> = calls
        .map(|call| {
            let engine = engine.clone();
            tokio::spawn(async move { engine.intercept(call).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(held);
    for call in calls {
        let answer = call.await.unwrap();
        assert!(
            matches!(answer, Ok(Intercept::Execute { .. })),
            "{answer:?}"
        );
    }
}
