//! A read-only call's record is answered once its transaction has decided, before the COMMIT
//! (`group_commit`, `Op::answers_before_commit`): the call ran and changed nothing, so its caller
//! need not wait for the disk. On PostgreSQL, while another connection holds the session's row,
//! the record's transaction cannot commit (it writes the row last), and the caller has its answer
//! anyway; the record is kept once the row is let go.

use std::time::Duration;

use serde_json::json;
use undolog_engine::ReadOutcome;
use undolog_store::scratch::ScratchDatabase;
use undolog_types::EffectId;

use crate::{
    holder::{Holder, until, waiting_for_locks},
    *,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_calls_record_is_answered_before_its_commit() {
    let db = ScratchDatabase::new("undolog_test_engine");
    let engine = postgres_engine(&db).await;
    must_execute(&engine, transfer("s1", 0)).await;
    let holder = Holder::hold(
        &db,
        "SELECT 1 FROM sessions WHERE id = 's1' FOR NO KEY UPDATE",
    );

    let (id, started) = (EffectId::generate(), engine.now());
    let outcome = ReadOutcome::Answered(json!({"balance": 100}));
    let recorded = engine.record_read(get_balance("s1"), id, started, outcome, None);
    let kept = tokio::time::timeout(Duration::from_secs(10), recorded)
        .await
        .expect("answered while its transaction waits for the session's row");
    assert_eq!(kept.unwrap(), None, "the record is taken");
    until("its transaction waits for the row to commit", || {
        waiting_for_locks(&db) == 1
    })
    .await;
    let stored = || db.query(&format!("SELECT count(*) FROM effects WHERE id = '{id}'"));
    assert_eq!(stored(), "0", "not committed while the row is held");

    drop(holder);
    until("the record is kept once the row is let go", || {
        stored() == "1"
    })
    .await;
}
