//! Leases: the pending effects whose lease ended, and the leases and undo claims of an executor
//! taken for dead.

use super::*;

pub async fn expired_leases_are_only_pending_effects_past_their_lease(store: Arc<dyn Store>) {
    let expired = effect("acme", "s1", 0); // lease ends at 5_000
    let mut live = effect("acme", "s1", 1);
    live.lease = Some(Lease {
        holder: "g".into(),
        expires_at: Timestamp(50_000),
    });
    let mut done = effect("acme", "s1", 2);
    done.state = EffectState::Committed;
    seed(&*store, "acme", "s1", &[&expired, &live, &done]).await;
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let ids: Vec<_> = tx
        .expired_leases(Timestamp(10_000))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, vec![expired.id]);
    assert!(
        tx.expired_leases(Timestamp(4_000))
            .await
            .unwrap()
            .is_empty()
    );
    // A lease that ends now has ended (as the engine reads it).
    let at_the_end: Vec<_> = tx
        .expired_leases(Timestamp(5_000))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(at_the_end, vec![expired.id]);
}

fn held_by(mut effect: Effect, holder: &str) -> Effect {
    effect.lease = Some(Lease {
        holder: holder.into(),
        expires_at: Timestamp(50_000),
    });
    effect
}

async fn beat(
    store: &dyn Store,
    executor: &str,
    name: &str,
    at: i64,
    stale_before: i64,
    starting: bool,
) -> crate::BeatReport {
    store
        .beat(&Beat {
            executor,
            name,
            at: Timestamp(at),
            stale_before: Timestamp(stale_before),
            starting,
        })
        .await
        .unwrap()
}

async fn lease_end(store: &dyn Store, e: &Effect) -> Option<Timestamp> {
    let mut tx = store.begin(&e.org).await.unwrap();
    let found = tx.effect(e.id).await.unwrap().unwrap();
    found.lease.map(|l| l.expires_at)
}

pub async fn a_dead_executors_leases_and_claims_end_when_it_is_taken_for_dead(
    store: Arc<dyn Store>,
) {
    // Two gateways, a and b; a's calls in two orgs, b's in one, and a finished call of a's.
    let a_acme = held_by(effect("acme", "s1", 0), "gw-a");
    let a_globex = held_by(effect("globex", "s1", 0), "gw-a");
    let b_acme = held_by(effect("acme", "s2", 0), "gw-b");
    let mut a_done = held_by(effect("acme", "s1", 1), "gw-a");
    a_done.state = EffectState::Committed;
    seed(&*store, "acme", "s1", &[&a_acme, &a_done]).await;
    seed(&*store, "globex", "s1", &[&a_globex]).await;
    seed(&*store, "acme", "s2", &[&b_acme]).await;
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let mut undoing = session("acme", "s3");
    undoing.undo_claim = Some(Lease {
        holder: "gw-a/undo-1".into(),
        expires_at: Timestamp(50_000),
    });
    tx.put_session(&undoing).await.unwrap();
    // An SDK caller's step-by-step undo is that caller's: it keeps its claim.
    let mut stepping = session("acme", "s4");
    stepping.undo_claim = Some(Lease {
        holder: "gw-a/steps-1".into(),
        expires_at: Timestamp(50_000),
    });
    tx.put_session(&stepping).await.unwrap();
    tx.commit().await.unwrap();

    let first = beat(&*store, "gw-a", "host:8080", 1_000, 0, true).await;
    assert_eq!(first.dead, Vec::<String>::new());
    assert_eq!(first.leases_ended, 0, "nobody is dead yet");
    assert!(
        beat(&*store, "gw-b", "host:9090", 1_000, 0, true)
            .await
            .dead
            .is_empty()
    );

    // gw-a restarts as gw-a2: the process before it, of the same name, is gone.
    let restart = beat(&*store, "gw-a2", "host:8080", 2_000, 0, true).await;
    assert_eq!(restart.dead, vec!["gw-a".to_owned()]);
    assert_eq!(
        restart.leases_ended, 3,
        "two pending effects and one undo claim"
    );
    assert_eq!(lease_end(&*store, &a_acme).await, Some(Timestamp(2_000)));
    assert_eq!(
        lease_end(&*store, &a_globex).await,
        Some(Timestamp(2_000)),
        "across orgs"
    );
    assert_eq!(
        lease_end(&*store, &b_acme).await,
        Some(Timestamp(50_000)),
        "gw-b is alive"
    );
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let ids: Vec<_> = tx
        .expired_leases(Timestamp(2_000))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(
        ids,
        vec![a_acme.id],
        "in doubt at once; the committed effect is untouched"
    );
    let claim = tx
        .session(&sid("s3"))
        .await
        .unwrap()
        .unwrap()
        .undo_claim
        .unwrap();
    assert_eq!(claim.expires_at, Timestamp(2_000));
    drop(tx);

    // gw-b stops beating: the next beat after its last one went stale takes it for dead.
    let quiet = beat(&*store, "gw-a2", "host:8080", 4_000, 500, false).await;
    assert!(
        quiet.dead.is_empty(),
        "gw-b beat at 1 000, within the window: {quiet:?}"
    );
    let stale = beat(&*store, "gw-a2", "host:8080", 9_000, 8_000, false).await;
    assert_eq!(stale.dead, vec!["gw-b".to_owned()]);
    assert_eq!(lease_end(&*store, &b_acme).await, Some(Timestamp(9_000)));
    assert!(!stale.was_taken_for_dead);

    // gw-b comes back: it learns it was taken for dead, and is alive again.
    assert!(
        beat(&*store, "gw-b", "host:9090", 9_500, 0, false)
            .await
            .was_taken_for_dead
    );
    assert!(
        !beat(&*store, "gw-b", "host:9090", 9_600, 0, false)
            .await
            .was_taken_for_dead
    );
    let again = beat(&*store, "gw-a2", "host:8080", 10_000, 8_000, false).await;
    assert!(again.dead.is_empty(), "gw-b beats again: {again:?}");
}

/// The digest of an effect's lease token goes in with its insert and changes with any write that
/// hands the call to another executor: a plain update and a write on a remembered row alike.
pub async fn a_lease_token_is_kept_by_every_write_of_an_effect(store: Arc<dyn Store>) {
    let first = effect("acme", "s1", 0);
    seed(&*store, "acme", "s1", &[&first]).await;

    let mut taken_over = first.clone();
    taken_over.lease_token = Some(LeaseToken::from_bytes([1; 32]).digest());
    taken_over.lease = Some(Lease {
        holder: "gateway-2".into(),
        expires_at: Timestamp(9_000),
    });
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(stored_token(&mut *tx, first.id).await, first.lease_token);
    tx.update_effect(&taken_over).await.unwrap();
    tx.commit().await.unwrap();

    let mut again = taken_over.clone();
    again.lease_token = Some(LeaseToken::from_bytes([2; 32]).digest());
    again.lease = Some(Lease {
        holder: "gateway-3".into(),
        expires_at: Timestamp(12_000),
    });
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(
        stored_token(&mut *tx, first.id).await,
        taken_over.lease_token
    );
    tx.replace_effect(&taken_over, &again).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(stored_token(&mut *tx, first.id).await, again.lease_token);
    assert_ne!(again.lease_token, first.lease_token);
}

async fn stored_token(tx: &mut dyn Tx, id: EffectId) -> Option<undolog_types::TokenDigest> {
    tx.effect(id).await.unwrap().unwrap().lease_token
}
