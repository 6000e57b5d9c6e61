//! A read-only call's record is answered once its transaction has decided, before the COMMIT
//! (`group_commit`, `Op::answers_before_commit`): the call ran and changed nothing, so its caller
//! need not wait for the disk. On PostgreSQL, while another connection holds the session's row,
//! the record's transaction cannot commit (it writes the row last), and the caller has its answer
//! anyway; the record is kept once the row is let go.

use std::{
    process::{Child, Command},
    time::Duration,
};

use serde_json::json;
use undolog_engine::ReadOutcome;
use undolog_store::scratch::ScratchDatabase;
use undolog_types::EffectId;

use crate::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_calls_record_is_answered_before_its_commit() {
    let db = ScratchDatabase::new("undolog_test_engine");
    let engine = postgres_engine(&db).await;
    must_execute(&engine, transfer("s1", 0)).await;
    let holder = RowHolder::hold(
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
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' \
         AND application_name <> '{HOLDER}' AND wait_event_type = 'Lock'",
        db.name()
    );
    until("its transaction waits for the row to commit", || {
        db.query(&waiting) == "1"
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

/// Waits up to ten seconds for `holds`.
async fn until(what: &str, holds: impl Fn() -> bool) {
    for _ in 0..200 {
        if holds() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not seen within ten seconds: {what}");
}

const HOLDER: &str = "undolog_test_row_holder";

/// A connection that runs a locking read and keeps its transaction open until dropped.
struct RowHolder<'a> {
    db: &'a ScratchDatabase,
    psql: Child,
}

impl RowHolder<'_> {
    fn hold<'a>(db: &'a ScratchDatabase, locking: &str) -> RowHolder<'a> {
        let psql = Command::new("psql")
            .env("PGAPPNAME", HOLDER)
            .args([
                db.url().as_str(),
                "-qAtc",
                &format!("{locking}; SELECT pg_sleep(60)"),
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("psql runs");
        let held = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{HOLDER}' \
             AND datname = '{}' AND wait_event = 'PgSleep'",
            db.name()
        );
        for _ in 0..200 {
            if db.query(&held) == "1" {
                return RowHolder { db, psql };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut psql = psql;
        let _ = psql.kill();
        let _ = psql.wait();
        panic!("the row holder did not take the row");
    }
}

impl Drop for RowHolder<'_> {
    fn drop(&mut self) {
        self.db.query(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = '{HOLDER}' AND datname = '{}'",
            self.db.name()
        ));
        let _ = self.psql.kill();
        let _ = self.psql.wait();
    }
}
