//! Transactions: all of one kept or none, one org each, and one lock key or session row at a
//! time.

use super::*;

pub async fn dropped_transaction_rolls_back(store: Arc<dyn Store>) {
    for read_before_drop in [false, true] {
        {
            let mut tx = store.begin(&org("acme")).await.unwrap();
            tx.put_session(&session("acme", "s1")).await.unwrap();
            tx.insert_effect(&effect("acme", "s1", 0)).await.unwrap();
            if read_before_drop {
                // a backend that holds writes back has sent them now
                assert_eq!(tx.session_effects(&sid("s1")).await.unwrap().len(), 1);
            }
            // dropped here without commit
        }
        let mut tx = store.begin(&org("acme")).await.unwrap();
        assert!(tx.sessions().await.unwrap().is_empty());
        assert!(tx.session_effects(&sid("s1")).await.unwrap().is_empty());
    }
}

/// A transaction from `begin_unsynced` commits like any other: every write is visible after it,
/// and a refused write keeps none of it.
pub async fn an_unsynced_transaction_keeps_all_its_writes_or_none(store: Arc<dyn Store>) {
    let kept = effect("acme", "s1", 0);
    let mut tx = store.begin_unsynced(&org("acme")).await.unwrap();
    tx.put_session(&session("acme", "s1")).await.unwrap();
    tx.insert_effect(&kept).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.session_effects(&sid("s1")).await.unwrap().len(), 1);
    drop(tx);

    let refused = {
        let mut tx = store.begin_unsynced(&org("acme")).await.unwrap();
        tx.put_session(&session("acme", "s2")).await.unwrap();
        match tx.insert_effect(&kept).await {
            Err(e) => Err(e),
            Ok(()) => tx.commit().await, // a backend that holds writes back refuses here
        }
    };
    assert!(
        matches!(refused, Err(Error::AlreadyExists(_))),
        "{refused:?}"
    );
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert!(tx.session(&sid("s2")).await.unwrap().is_none());
}

pub async fn a_refused_write_leaves_nothing_of_its_transaction(store: Arc<dyn Store>) {
    let mut tx = store.begin(&org("acme")).await.unwrap();
    tx.put_session(&session("acme", "s1")).await.unwrap();
    tx.insert_effect(&effect("acme", "s1", 0)).await.unwrap();
    let missing = effect("acme", "s1", 1);
    let written = tx.update_effect(&missing).await;
    let err = write_error(tx, written).await;
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");

    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert!(tx.sessions().await.unwrap().is_empty());
    assert!(tx.session_effects(&sid("s1")).await.unwrap().is_empty());
}

pub async fn orgs_see_only_their_own_rows(store: Arc<dyn Store>) {
    let e = effect("acme", "s1", 0);
    seed(&*store, "acme", "s1", &[&e]).await;
    let a = approval("acme", &e, 1_000);
    let mut tx = store.begin(&org("acme")).await.unwrap();
    tx.insert_approval(&a).await.unwrap();
    tx.push_undo(&sid("s1"), e.id, Timestamp(1)).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin(&org("globex")).await.unwrap();
    assert_eq!(tx.effect(e.id).await.unwrap(), None);
    assert_eq!(tx.session(&sid("s1")).await.unwrap(), None);
    assert!(tx.sessions().await.unwrap().is_empty());
    assert_eq!(
        tx.latest_effect_by_signature(&e.signature).await.unwrap(),
        None
    );
    assert!(tx.session_effects(&sid("s1")).await.unwrap().is_empty());
    assert!(
        tx.expired_leases(Timestamp(i64::MAX))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(tx.approval(a.id).await.unwrap(), None);
    assert!(tx.approvals(None).await.unwrap().is_empty());
    assert!(tx.undo_stack(&sid("s1")).await.unwrap().is_empty());
    let written = tx.update_effect(&e).await;
    let err = write_error(tx, written).await;
    assert!(
        matches!(err, Error::NotFound { .. }),
        "another org's effect cannot be updated: {err:?}"
    );
}

pub async fn same_lock_key_serializes_transactions(store: Arc<dyn Store>) {
    concurrent_increments_lose_no_update(store, "counter", Some(LockKey(42))).await;
}

/// No [`crate::Tx::lock`] here: reading a session is enough to keep others from changing it
/// before this transaction ends.
pub async fn a_session_read_then_written_loses_no_update(store: Arc<dyn Store>) {
    concurrent_increments_lose_no_update(store, "s1", None).await;
}

/// Sixteen transactions at once each read `session`, wait a little, and write it back with its
/// next number one higher (taking `lock` first, if any): every increment is kept.
async fn concurrent_increments_lose_no_update(
    store: Arc<dyn Store>,
    session: &'static str,
    lock: Option<LockKey>,
) {
    seed(&*store, "acme", session, &[]).await;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut tx = store.begin(&org("acme")).await.unwrap();
                if let Some(lock) = lock {
                    tx.lock(lock).await.unwrap();
                }
                let mut s = tx.session(&sid(session)).await.unwrap().unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
                s.next_seq += 1;
                tx.put_session(&s).await.unwrap();
                tx.commit().await.unwrap();
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(
        tx.session(&sid(session)).await.unwrap().unwrap().next_seq,
        16,
        "no update was lost"
    );
}
