//! What only the file-backed SQLite store does: durability across reopen, migrations, URLs.

use undolog_store::{SqliteOptions, SqliteStore, Store, StoreUrl};
use undolog_types::{OrgId, SessionId, SessionState, Timestamp};

#[tokio::test]
async fn a_file_store_keeps_committed_rows_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    let org = OrgId::new("acme").unwrap();
    {
        let store = SqliteStore::open(SqliteOptions::file(&path)).await.unwrap();
        let mut tx = store.begin(&org).await.unwrap();
        tx.put_session(&undolog_store::Session {
            org: org.clone(),
            id: SessionId::new("s1").unwrap(),
            state: SessionState::Active,
            next_seq: 7,
            failed_effect: None,
            undo_claim: None,
            run_of: None,
            opened_by: None,
            created_at: Timestamp(1),
            updated_at: Timestamp(1),
        })
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }
    let store = SqliteStore::open(SqliteOptions::file(&path)).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 8);
    let mut tx = store.begin(&org).await.unwrap();
    let s = tx
        .session(&SessionId::new("s1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.next_seq, 7);
}

#[tokio::test]
async fn a_schema_newer_than_the_binary_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    drop(SqliteStore::open(SqliteOptions::file(&path)).await.unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)")
        .unwrap();
    let err = SqliteStore::open(SqliteOptions::file(&path))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("version 99, newer than this binary"),
        "{err}"
    );
}

/// A log made before roles existed: its keys become agents (least privilege), none is revoked,
/// and its sessions hold no undo claim.
#[tokio::test]
async fn a_version_2_log_upgrades_with_its_keys_as_agents() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db");
    let old = rusqlite::Connection::open(&path).unwrap();
    for sql in [
        include_str!("../../src/sqlite/0001_init.sql"),
        include_str!("../../src/sqlite/0002_api_keys.sql"),
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
         INSERT INTO schema_migrations VALUES (1, 0), (2, 0);
         INSERT INTO api_keys (id, org, hash, label, created_at) VALUES ('old', 'acme', 'h1', NULL, 5);
         INSERT INTO sessions VALUES ('acme', 's1', 'active', 0, NULL, 1, 1);",
    ] {
        old.execute_batch(sql).unwrap();
    }
    drop(old);

    let store = SqliteStore::open(SqliteOptions::file(&path)).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 8);
    let key = store.api_key_by_hash("h1").await.unwrap().unwrap();
    assert_eq!(
        (key.role, key.revoked_at),
        (undolog_types::Role::Agent, None)
    );
    let mut tx = store.begin(&OrgId::new("acme").unwrap()).await.unwrap();
    let session = tx.session(&SessionId::new("s1").unwrap()).await.unwrap();
    assert_eq!(session.unwrap().undo_claim, None);
}

#[test]
fn store_urls_name_a_backend_or_say_what_to_write() {
    assert_eq!(
        "sqlite::memory:".parse::<StoreUrl>().unwrap(),
        StoreUrl::SqliteMemory
    );
    assert_eq!(
        "sqlite://a/b.db".parse::<StoreUrl>().unwrap(),
        StoreUrl::SqliteFile("a/b.db".into())
    );
    assert_eq!(
        "log.db".parse::<StoreUrl>().unwrap(),
        StoreUrl::SqliteFile("log.db".into())
    );
    for bad in ["", "sqlite://", "mysql://x"] {
        let err = bad.parse::<StoreUrl>().unwrap_err().to_string();
        assert!(
            err.contains("use sqlite://") || err.contains("write sqlite://"),
            "{bad}: {err}"
        );
    }
}

/// One connection serves the store: a transaction that waits for another held open in the same
/// task gets an error after the busy timeout, never a hang.
#[tokio::test]
async fn a_transaction_waiting_behind_one_held_open_fails_after_the_busy_timeout() {
    let mut options = SqliteOptions::in_memory();
    options.busy_timeout = std::time::Duration::from_millis(200);
    let store = SqliteStore::open(options).await.unwrap();
    let org = OrgId::new("acme").unwrap();
    let held = store.begin(&org).await.unwrap();
    let started = std::time::Instant::now();
    let err = store
        .begin(&org)
        .await
        .err()
        .expect("the second begin fails");
    assert!(err.to_string().contains("not free within"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    drop(held);
    store.begin(&org).await.unwrap().commit().await.unwrap();
}
