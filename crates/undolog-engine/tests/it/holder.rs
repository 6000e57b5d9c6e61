//! A connection that holds a lock while a test watches the engine wait on it.

use std::{
    process::{Child, Command},
    time::Duration,
};

use undolog_store::scratch::ScratchDatabase;

/// Waits up to ten seconds for `holds`.
pub(crate) async fn until(what: &str, holds: impl Fn() -> bool) {
    for _ in 0..200 {
        if holds() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not seen within ten seconds: {what}");
}

/// The holder's `application_name`, so that a test can tell its connection from the engine's.
const HOLDER: &str = "undolog_test_holder";

/// A connection that takes a lock (`locking`: a row's, a table's, an advisory one) and keeps its
/// transaction open until dropped.
pub(crate) struct Holder<'a> {
    db: &'a ScratchDatabase,
    psql: Child,
}

impl Holder<'_> {
    pub(crate) fn hold<'a>(db: &'a ScratchDatabase, locking: &str) -> Holder<'a> {
        let psql = Command::new("psql")
            .env("PGAPPNAME", HOLDER)
            .args([
                db.url().as_str(),
                "-qAtc",
                &format!("{locking}; SELECT pg_sleep(60)"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("psql runs");
        let held = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{HOLDER}' \
             AND datname = '{}' AND wait_event = 'PgSleep'",
            db.name()
        );
        for _ in 0..200 {
            if db.query(&held) == "1" {
                return Holder { db, psql };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut psql = psql;
        let _ = psql.kill();
        let _ = psql.wait();
        panic!("the holder did not take its lock: {locking}");
    }
}

impl Drop for Holder<'_> {
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

/// How many of the engine's connections wait for a lock: the holder's, or one another's.
pub(crate) fn waiting_for_locks(db: &ScratchDatabase) -> usize {
    let waiting = db.query(&format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' \
         AND application_name <> '{HOLDER}' AND wait_event_type = 'Lock'",
        db.name()
    ));
    waiting.parse().expect("a count")
}
