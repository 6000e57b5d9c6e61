//! A full disk under the embedded store: writes fail with the disk's error and nothing of them is
//! kept, and they resume as soon as space returns, on the same open store (no restart).

use std::time::{Duration, Instant};

use serde_json::json;
use undolog_store::{SmallDisk, SqliteOptions, SqliteStore, Store};
use undolog_types::{OrgId, SessionId, SessionState, Timestamp};

fn org() -> OrgId {
    OrgId::new("acme").unwrap()
}

/// Writes one session with a large field, so each write needs fresh pages.
async fn write(store: &SqliteStore, n: usize) -> Result<(), undolog_store::Error> {
    let mut tx = store.begin(&org()).await?;
    let session = undolog_store::Session {
        org: org(),
        id: SessionId::new(format!("s{n}")).unwrap(),
        state: SessionState::Active,
        next_seq: 0,
        failed_effect: None,
        undo_claim: None,
        run_of: Some(json!({"pad": "x".repeat(8 * 1024)}).to_string()),
        opened_by: None,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
    };
    tx.put_session(&session).await?;
    tx.commit().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_full_disk_writes_resume_as_soon_as_space_returns_without_a_restart() {
    let disk = SmallDisk::mount();
    let store = SqliteStore::open(SqliteOptions::file(disk.path().join("log.db")))
        .await
        .unwrap();
    write(&store, 0).await.unwrap();
    let filler = disk.fill();

    // Writes fail while the disk is full, each with the disk's error...
    let mut failures = 0;
    let mut written = 1;
    for n in 1..40 {
        match write(&store, n).await {
            Ok(()) => written += 1,
            Err(e) => {
                failures += 1;
                let text = e.to_string();
                assert!(
                    text.contains("full") || text.contains("disk"),
                    "a full disk says so: {text}"
                );
            }
        }
    }
    assert!(
        failures > 30,
        "the disk is full: {failures} of 39 writes failed"
    );

    // ...and resume once space returns, on the same store.
    std::fs::remove_file(filler).unwrap();
    let returned = Instant::now();
    let mut n = 100;
    loop {
        n += 1;
        match write(&store, n).await {
            Ok(()) => break,
            Err(e) => assert!(
                returned.elapsed() < Duration::from_secs(5),
                "writes have not resumed 5 s after space returned: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resumed = returned.elapsed();
    for m in n + 1..n + 20 {
        write(&store, m).await.unwrap();
    }
    // Nothing of a failed write is kept; everything acknowledged is.
    let sessions = store.begin(&org()).await.unwrap().sessions().await.unwrap();
    assert_eq!(
        sessions.len(),
        written + 20,
        "acknowledged writes, and only those"
    );
    println!(
        "writes resumed {resumed:?} after space returned ({failures} writes refused while full)"
    );
}
