//! The engine on PostgreSQL, where the intercepts and read-only records that arrive together
//! share transactions (`session_batches`): each call still gets an effect of
//! its own, numbered without gaps, identical calls still run once, and a refused call takes no
//! neighbour down with it.

use std::{collections::BTreeSet, sync::Arc};

use serde_json::json;
use tokio::sync::Barrier;
use undolog_engine::{Error, Intercept, ReadOutcome};
use undolog_store::scratch::ScratchDatabase;
use undolog_types::{EffectId, EffectState};

use crate::*;

const TRANSFERS: usize = 48;
const READS: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_calls_at_once_share_transactions_and_each_gets_its_own_effect() {
    let db = ScratchDatabase::new("undolog_test_engine");
    let engine = postgres_engine(&db).await;
    let barrier = Arc::new(Barrier::new(TRANSFERS + READS + 2));
    let mut transfers = Vec::new();
    for n in 0..TRANSFERS {
        let (engine, barrier) = (engine.clone(), barrier.clone());
        transfers.push(tokio::spawn(async move {
            barrier.wait().await;
            engine.intercept(transfer("s1", n as i64)).await
        }));
    }
    let mut reads = Vec::new();
    for _ in 0..READS {
        let (engine, barrier) = (engine.clone(), barrier.clone());
        reads.push(tokio::spawn(async move {
            barrier.wait().await;
            let (id, started) = (EffectId::generate(), engine.now());
            let outcome = ReadOutcome::Answered(json!({"balance": 100}));
            let kept = engine
                .record_read(get_balance("s1"), id, started, outcome, None)
                .await;
            (id, kept)
        }));
    }
    // Beside them, a call the engine refuses (its idempotency key names another call) ...
    let first = must_execute(&engine, transfer("s1", -1).with_idempotency_key("k")).await;
    let refused = {
        let (engine, barrier) = (engine.clone(), barrier.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            engine
                .intercept(transfer("s1", -2).with_idempotency_key("k"))
                .await
        })
    };
    barrier.wait().await;

    let mut executed = BTreeSet::new();
    for task in transfers {
        match task.await.unwrap() {
            Ok(Intercept::Execute { effect_id, .. }) => assert!(executed.insert(effect_id)),
            other => panic!("a new transfer executes: {other:?}"),
        }
    }
    for task in reads {
        let (id, kept) = task.await.unwrap();
        assert_eq!(kept.unwrap(), None, "the read is recorded");
        assert!(executed.insert(id), "each read its own effect");
    }
    let refused = refused.await.unwrap();
    assert!(
        matches!(refused, Err(Error::KeyReused { .. })),
        "... refused alone: {refused:?}"
    );

    let effects = engine
        .session_effects(&org(), &session("s1"))
        .await
        .unwrap();
    let ids: BTreeSet<EffectId> = effects
        .iter()
        .map(|e| e.id)
        .filter(|id| *id != first)
        .collect();
    assert_eq!(
        ids, executed,
        "every call answered is recorded, nothing else"
    );
    let seqs: Vec<i64> = effects.iter().map(|e| e.seq).collect();
    let expected: Vec<i64> = (0..=(TRANSFERS + READS) as i64).collect();
    assert_eq!(
        seqs, expected,
        "numbered in their session without gaps or repeats"
    );
    let (rows, transactions) = inserting_transactions(&db);
    assert_eq!(rows, TRANSFERS + READS + 1);
    assert!(
        transactions < rows,
        "calls that arrived together shared a transaction: {rows} effects in {transactions}"
    );
}

/// Calls of many sessions at once share transactions too (a batch carries whatever sessions are
/// ready, at most a few batches at once), in sessions the engine remembers as in new ones; each
/// session's calls are still numbered in it without gaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_sessions_at_once_share_transactions_and_each_session_is_numbered_apart() {
    const SESSIONS: usize = 16;
    let db = ScratchDatabase::new("undolog_test_engine");
    let engine = postgres_engine(&db).await;
    let name = |n: usize| format!("s{}", n % SESSIONS);
    // The first call of each session creates it, and the engine then remembers it.
    at_once((0..SESSIONS).map(|n| {
        let engine = engine.clone();
        async move { must_execute(&engine, transfer(&name(n), n as i64)).await }
    }))
    .await;
    at_once((SESSIONS..SESSIONS + TRANSFERS).map(|n| {
        let engine = engine.clone();
        async move { must_execute(&engine, transfer(&name(n), n as i64)).await }
    }))
    .await;

    let shared = db.query(
        "SELECT count(*) FROM (SELECT xmin::text FROM effects GROUP BY xmin::text \
         HAVING count(DISTINCT session) > 1) shared",
    );
    assert_ne!(shared, "0", "no transaction carried calls of two sessions");
    let (rows, transactions) = inserting_transactions(&db);
    assert_eq!(rows, SESSIONS + TRANSFERS);
    assert!(
        transactions <= rows / 2,
        "calls that arrived together shared transactions: {rows} effects in {transactions}"
    );
    for n in 0..SESSIONS {
        let effects = engine
            .session_effects(&org(), &session(&name(n)))
            .await
            .unwrap();
        let seqs: Vec<i64> = effects.iter().map(|e| e.seq).collect();
        let expected: Vec<i64> = (0..effects.len() as i64).collect();
        assert_eq!(
            seqs, expected,
            "session {n} numbered without gaps or repeats"
        );
    }
    assert_references_hold(&db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_outcome_joins_its_sessions_next_transaction() {
    let db = ScratchDatabase::new("undolog_test_engine");
    let engine = postgres_engine(&db).await;
    let mut ran = Vec::new();
    for n in 0..TRANSFERS {
        ran.push(must_own(&engine, transfer("s1", n as i64)).await);
    }
    // Their outcomes arrive while new calls of the same session are intercepted.
    let outcomes = ran.iter().map(|(id, token)| {
        let (engine, id, token) = (engine.clone(), *id, token.clone());
        Box::pin(async move {
            engine
                .commit(&org(), id, &token, json!({"ok": true}))
                .await
                .map(|()| id)
        }) as std::pin::Pin<Box<dyn Future<Output = Result<EffectId, Error>> + Send>>
    });
    let intercepts = (0..TRANSFERS).map(|n| {
        let engine = engine.clone();
        Box::pin(async move { Ok(must_execute(&engine, transfer("s1", 1_000 + n as i64)).await) })
            as std::pin::Pin<Box<dyn Future<Output = Result<EffectId, Error>> + Send>>
    });
    let answered = at_once(outcomes.chain(intercepts)).await;
    assert!(answered.iter().all(Result::is_ok), "{answered:?}");

    let effects = engine
        .session_effects(&org(), &session("s1"))
        .await
        .unwrap();
    for effect in &effects {
        let expected = if ran.iter().any(|(id, _)| *id == effect.id) {
            EffectState::Committed
        } else {
            EffectState::Pending
        };
        assert_eq!(effect.state, expected, "effect {}", effect.seq);
    }
    assert_eq!(effects.len(), 2 * TRANSFERS);
    let undo = db.query("SELECT count(*) FROM effects WHERE undo_position IS NOT NULL");
    assert_eq!(
        undo,
        TRANSFERS.to_string(),
        "each committed transfer can be undone"
    );
    // A row's xmin is the transaction that last wrote it: one that recorded an outcome and
    // a new call at once carried both.
    let mixed = db.query(
        "SELECT count(*) FROM (SELECT xmin::text FROM effects GROUP BY xmin::text \
         HAVING bool_or(state = 'committed') AND bool_or(state = 'pending')) mixed",
    );
    assert_ne!(
        mixed, "0",
        "outcomes and new calls of a session share transactions"
    );
    assert_references_hold(&db);
}

/// Every effect's session exists: the writes check what a foreign key checked before migration
/// 14. (An undo entry is a column of its effect since migration 16.)
fn assert_references_hold(db: &ScratchDatabase) {
    let dangling = db.query(
        "SELECT count(*) FROM effects e WHERE NOT EXISTS \
         (SELECT FROM sessions s WHERE s.org = e.org AND s.id = e.session)",
    );
    assert_eq!(
        dangling, "0",
        "no reference names a row that does not exist"
    );
}

/// A batch holds its session writes back and writes each session once before its COMMIT, as
/// its last call left it: a trigger counts the writes of the session row per transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_writes_its_session_once_however_many_calls_it_carries() {
    let db = ScratchDatabase::new("undolog_test_engine");
    let engine = postgres_engine(&db).await;
    must_execute(&engine, transfer("s1", -1)).await;
    // Every write of a session row, with the transaction that made it (as the owner, so the
    // application role needs no rights on the count).
    db.query(
        "CREATE TABLE session_writes (tx BIGINT NOT NULL); \
         CREATE FUNCTION count_session_write() RETURNS trigger LANGUAGE plpgsql \
         SECURITY DEFINER AS $$ BEGIN INSERT INTO session_writes VALUES (txid_current()); \
         RETURN NULL; END $$; \
         CREATE TRIGGER count_session_writes AFTER INSERT OR UPDATE ON sessions \
         FOR EACH ROW EXECUTE FUNCTION count_session_write()",
    );
    at_once((0..TRANSFERS).map(|n| {
        let engine = engine.clone();
        async move { must_execute(&engine, transfer("s1", n as i64)).await }
    }))
    .await;

    let (rows, transactions) = inserting_transactions(&db);
    assert!(
        transactions < rows,
        "calls that arrived together shared a transaction: {rows} effects in {transactions}"
    );
    let writes = db.query("SELECT count(*), count(DISTINCT tx) FROM session_writes");
    let (writes, writing) = writes.split_once('|').expect("two counts");
    assert_eq!(
        writes, writing,
        "each transaction wrote the session once: {writes} writes in {writing} transactions"
    );
    let next_seq = db.query("SELECT next_seq FROM sessions");
    assert_eq!(
        next_seq,
        (TRANSFERS + 1).to_string(),
        "the last write counts every call"
    );
}

/// The effects, and the transactions that inserted them (a row's `xmin`).
fn inserting_transactions(db: &ScratchDatabase) -> (usize, usize) {
    let counts = db.query("SELECT count(*), count(DISTINCT xmin::text) FROM effects");
    let (rows, transactions) = counts.split_once('|').expect("two counts");
    (rows.parse().unwrap(), transactions.parse().unwrap())
}

/// The leaders of batches whose callers do something else between their calls (a gateway's
/// send each call upstream) run on the engine's batch thread once the leaders have seen that
/// yielding to those callers does not pay; the first batches, which find it out, run among the
/// callers. The thread ends with its engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_whose_callers_go_elsewhere_run_on_the_engines_thread_which_ends_with_it() {
    const CALLS: usize = 40;
    let db = ScratchDatabase::new("undolog_test_engine");
    let engine = postgres_engine(&db).await;
    // (thread name, thread id in /proc) of each batch, in the order they ran.
    let ran_on = Arc::new(std::sync::Mutex::new(Vec::<(String, String)>::new()));
    let observed = ran_on.clone();
    engine.observe_batches(Arc::new(move |_| {
        let name = std::thread::current().name().unwrap_or("").to_string();
        let tid = std::fs::read_link("/proc/thread-self").unwrap();
        let tid = tid.file_name().unwrap().to_string_lossy().into_owned();
        observed.lock().unwrap().push((name, tid));
    }));
    // One caller, each of whose operations follows a pause after its last answer (the
    // upstream's time, then its client's): nothing it submits can join the batch that answered
    // it while that batch's leader yields, however slow the machine.
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(1));
    for amount in 0..CALLS as i64 {
        let (id, token) = must_own(&engine, transfer("s1", amount)).await;
        pause().await;
        engine
            .commit(&org(), id, &token, json!({"ok": true}))
            .await
            .unwrap();
        pause().await;
    }
    let effects = engine
        .session_effects(&org(), &session("s1"))
        .await
        .unwrap();
    assert_eq!(effects.len(), CALLS);
    assert!(effects.iter().all(|e| e.state == EffectState::Committed));

    let ran_on = std::mem::take(&mut *ran_on.lock().unwrap());
    let on_thread: Vec<&String> = ran_on
        .iter()
        .filter(|(name, _)| name == "undolog-batches")
        .map(|(_, tid)| tid)
        .collect();
    let counts = format!(
        "{} of {} batches on the thread",
        on_thread.len(),
        ran_on.len()
    );
    let (first, last) = (&ran_on[0].0, &ran_on[ran_on.len() - 1].0);
    assert_ne!(
        first, "undolog-batches",
        "the first batches run among their callers"
    );
    assert_eq!(last, "undolog-batches", "the last batch; {counts}");
    assert!(on_thread.len() * 2 > ran_on.len(), "{counts}");
    let thread = format!("/proc/self/task/{}", on_thread[0]);
    assert!(std::path::Path::new(&thread).exists());

    drop(engine);
    let ended = async {
        while std::path::Path::new(&thread).exists() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), ended)
        .await
        .expect("the batch thread ends with its engine");
}
