//! The store conformance suite: the cases every backend must pass, written once.
//!
//! A backend's test crate runs them all with [`store_conformance_tests!`], giving an async function
//! that returns a fresh, empty store:
//!
//! ```text
//! undolog_store::store_conformance_tests!(fresh_sqlite);
//! ```

use std::{sync::Arc, time::Duration};

use serde_json::json;
use undolog_types::{
    ApprovalId, ApprovalState, Args, EffectId, EffectState, LockKey, OrgId, Role, SessionId,
    SessionState, Tier, Timestamp,
};

use crate::{
    ApiKey, Approval, Beat, Compensation, Effect, EffectLookup, Error, Lease, Result, Session,
    Snapshot, Store, Tx,
};

/// Generates one `#[tokio::test]` per conformance case, each on a fresh store from `$fresh`.
#[macro_export]
macro_rules! store_conformance_tests {
    ($fresh:path) => {
        $crate::store_conformance_tests!(@cases $fresh;
            sessions_round_trip, effects_round_trip, duplicate_effect_is_refused,
            updating_a_missing_row_is_not_found, latest_effect_by_signature_is_the_newest,
            latest_effect_by_key_is_the_newest, reads_made_together_match_reads_made_alone,
            session_effects_come_in_order,
            expired_leases_are_only_pending_effects_past_their_lease, approvals_round_trip_and_filter,
            undo_stack_keeps_completion_order, snapshots_round_trip, dropped_transaction_rolls_back,
            a_refused_write_leaves_nothing_of_its_transaction,
            orgs_see_only_their_own_rows, same_lock_key_serializes_transactions,
            a_session_read_then_written_loses_no_update, api_keys_are_found_by_hash_only,
            api_keys_are_listed_and_revoked, compensations_of_both_kinds_round_trip,
            the_latest_run_is_the_newest_of_that_principal,
            a_dead_executors_leases_and_claims_end_when_it_is_taken_for_dead,
            an_unsynced_transaction_keeps_all_its_writes_or_none,
            a_session_is_replaced_only_while_it_is_as_remembered,
            an_effect_is_replaced_only_while_it_is_as_remembered,
            no_earlier_effect_is_expected_of_a_new_call,
            calls_and_outcomes_written_together_are_all_kept_or_none);
    };
    (@cases $fresh:path; $($case:ident),+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store = $fresh().await;
                $crate::conformance::$case(store).await;
            }
        )+
    };
}

fn org(name: &str) -> OrgId {
    OrgId::new(name).unwrap()
}

fn sid(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

fn session(org_name: &str, id: &str) -> Session {
    Session {
        org: org(org_name),
        id: sid(id),
        state: SessionState::Active,
        next_seq: 0,
        failed_effect: None,
        undo_claim: None,
        run_of: None,
        created_at: Timestamp(1_000),
        updated_at: Timestamp(1_000),
    }
}

fn effect(org_name: &str, session_id: &str, seq: i64) -> Effect {
    let args = Args::try_from(json!({"to": "bøb 😀", "amount": 10.5, "n": seq})).unwrap();
    let signature = undolog_types::CallIdentity {
        org: &org(org_name),
        session: &sid(session_id),
        tool: "transfer",
        args: &args,
        step: None,
    }
    .signature();
    Effect {
        id: EffectId::generate(),
        org: org(org_name),
        session: sid(session_id),
        seq,
        tool: "transfer".into(),
        args,
        step: None,
        signature,
        idempotency_key: None,
        tier: Tier::Compensable,
        compensation: Some(Compensation::Upstream {
            tool: "transfer".into(),
            args: json!({"amount": "{{args.amount}}"}),
        }),
        state: EffectState::Pending,
        result: None,
        error: None,
        verdicts: None,
        approval: None,
        lease: Some(Lease {
            holder: "gateway-1".into(),
            expires_at: Timestamp(5_000),
        }),
        created_at: Timestamp(1_000 + seq),
        updated_at: Timestamp(1_000 + seq),
        completed_at: None,
        resolved_by: None,
    }
}

fn approval(org_name: &str, effect: &Effect, requested_at: i64) -> Approval {
    Approval {
        id: ApprovalId::generate(),
        org: org(org_name),
        session: effect.session.clone(),
        effect: effect.id,
        signature: effect.signature.clone(),
        state: ApprovalState::Pending,
        requested_at: Timestamp(requested_at),
        expires_at: Timestamp(requested_at + 60_000),
        requested_by: Some("api-key:agent-1".into()),
        decided_by: None,
        decided_via: None,
        decided_at: None,
        reason: None,
    }
}

/// Writes a session and its effects in one committed transaction.
async fn seed(store: &dyn Store, org_name: &str, session_id: &str, effects: &[&Effect]) {
    let mut tx = store.begin(&org(org_name)).await.unwrap();
    tx.put_session(&session(org_name, session_id))
        .await
        .unwrap();
    for e in effects {
        tx.insert_effect(e).await.unwrap();
    }
    tx.commit().await.unwrap();
}

pub async fn sessions_round_trip(store: Arc<dyn Store>) {
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.session(&sid("s1")).await.unwrap(), None);
    let mut s = session("acme", "s1");
    tx.put_session(&s).await.unwrap();
    tx.put_session(&session("acme", "s2")).await.unwrap();
    s.state = SessionState::Completed;
    s.next_seq = 3;
    s.failed_effect = Some(EffectId::generate());
    s.undo_claim = Some(Lease {
        holder: "gateway-1/undo-1".into(),
        expires_at: Timestamp(9_000),
    });
    s.updated_at = Timestamp(2_000);
    tx.put_session(&s).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.session(&sid("s1")).await.unwrap(), Some(s));
    let ids: Vec<_> = tx
        .sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, vec![sid("s1"), sid("s2")]);
}

pub async fn effects_round_trip(store: Arc<dyn Store>) {
    let mut e = effect("acme", "s1", 0);
    e.step = Some(9_007_199_254_740_991);
    e.idempotency_key = Some("key-1".into());
    e.verdicts = Some(json!({"request": {"status": "success"}}));
    seed(&*store, "acme", "s1", &[&e]).await;

    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.effect(e.id).await.unwrap().as_ref(), Some(&e));
    e.state = EffectState::Committed;
    e.result = Some(json!({"content": [{"type": "text", "text": "ok ✓"}], "n": [1, 2.5, null]}));
    e.lease = None;
    e.completed_at = Some(Timestamp(3_000));
    e.resolved_by = Some("api-key:ops".into());
    e.verdicts = Some(json!({"request": {"status": "success", "results": []}}));
    e.updated_at = Timestamp(3_000);
    tx.update_effect(&e).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.effect(e.id).await.unwrap(), Some(e));
}

/// The error of a write that must fail: from the write itself or, for a backend that sends
/// writes later, from the commit that carries it.
async fn write_error(tx: Box<dyn Tx>, written: Result<()>) -> Error {
    match written {
        Err(e) => e,
        Ok(()) => tx
            .commit()
            .await
            .expect_err("the write, or at the latest its commit, fails"),
    }
}

pub async fn duplicate_effect_is_refused(store: Arc<dyn Store>) {
    let e = effect("acme", "s1", 0);
    seed(&*store, "acme", "s1", &[&e]).await;
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let written = tx.insert_effect(&e).await;
    let err = write_error(tx, written).await;
    assert!(matches!(err, Error::AlreadyExists(_)), "{err:?}");
}

pub async fn updating_a_missing_row_is_not_found(store: Arc<dyn Store>) {
    let e = effect("acme", "s1", 0);
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let written = tx.update_effect(&e).await;
    let err = write_error(tx, written).await;
    assert!(
        matches!(err, Error::NotFound { what: "effect", .. }),
        "{err:?}"
    );
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let written = tx.update_approval(&approval("acme", &e, 1)).await;
    let err = write_error(tx, written).await;
    assert!(
        matches!(
            err,
            Error::NotFound {
                what: "approval",
                ..
            }
        ),
        "{err:?}"
    );
}

pub async fn latest_effect_by_signature_is_the_newest(store: Arc<dyn Store>) {
    let first = effect("acme", "s1", 0);
    let mut second = effect("acme", "s1", 1);
    second.args = first.args.clone();
    second.signature = first.signature.clone();
    let other = effect("acme", "s1", 2);
    seed(&*store, "acme", "s1", &[&first, &second, &other]).await;
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let latest = tx
        .latest_effect_by_signature(&first.signature)
        .await
        .unwrap();
    assert_eq!(latest.map(|e| e.id), Some(second.id));
    let missing = undolog_types::Signature::of_canonical("{}");
    assert_eq!(tx.latest_effect_by_signature(&missing).await.unwrap(), None);
}

pub async fn latest_effect_by_key_is_the_newest(store: Arc<dyn Store>) {
    let mut first = effect("acme", "s1", 0);
    first.idempotency_key = Some("k".into());
    let mut second = effect("acme", "s1", 1);
    second.idempotency_key = Some("k".into());
    second.created_at = Timestamp(first.created_at.0 + 10);
    seed(&*store, "acme", "s1", &[&first, &second]).await;
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(
        tx.latest_effect_by_key("k").await.unwrap().map(|e| e.id),
        Some(second.id)
    );
    assert_eq!(tx.latest_effect_by_key("other").await.unwrap(), None);
}

pub async fn reads_made_together_match_reads_made_alone(store: Arc<dyn Store>) {
    let mut first = effect("acme", "s1", 0);
    first.idempotency_key = Some("k".into());
    let second = effect("acme", "s1", 1);
    seed(&*store, "acme", "s1", &[&first, &second]).await;
    let mut tx = store.begin(&org("acme")).await.unwrap();
    // written in this transaction and not yet committed: the reads see it
    let third = effect("acme", "s1", 2);
    tx.insert_effect(&third).await.unwrap();

    let missing = EffectId::generate();
    let mut found = tx
        .effects(&[third.id, missing, first.id, second.id])
        .await
        .unwrap();
    found.sort_by_key(|e| e.seq);
    assert_eq!(found, vec![first.clone(), second.clone(), third.clone()]);
    assert!(tx.effects(&[]).await.unwrap().is_empty());

    let stored = tx.session(&sid("s1")).await.unwrap();
    assert!(stored.is_some());
    let table = [
        (EffectLookup::Nothing, None),
        (
            EffectLookup::LatestBySignature(&third.signature),
            Some(&third),
        ),
        (EffectLookup::LatestByKey("k"), Some(&first)),
        (EffectLookup::LatestByKey("other"), None),
    ];
    for (lookup, expected) in table {
        let (session, effects) = tx
            .session_with_effects(&sid("s1"), &[lookup])
            .await
            .unwrap();
        assert_eq!(session, stored, "{lookup:?}");
        assert_eq!(effects, vec![expected.cloned()], "{lookup:?}");
    }
    // All of them at once, in order; and none.
    let lookups: Vec<_> = table.iter().map(|(lookup, _)| *lookup).collect();
    let (session, effects) = tx.session_with_effects(&sid("s1"), &lookups).await.unwrap();
    assert_eq!(session, stored);
    let expected: Vec<_> = table.iter().map(|(_, e)| e.cloned()).collect();
    assert_eq!(effects, expected);
    let (session, effects) = tx.session_with_effects(&sid("s1"), &[]).await.unwrap();
    assert_eq!((session, effects), (stored, vec![]));
    let (session, effects) = tx
        .session_with_effects(&sid("nobody"), &[EffectLookup::LatestByKey("k")])
        .await
        .unwrap();
    assert_eq!(
        (session, effects[0].as_ref().map(|e| e.id)),
        (None, Some(first.id))
    );
}

pub async fn session_effects_come_in_order(store: Arc<dyn Store>) {
    let effects: Vec<Effect> = [2, 0, 1]
        .into_iter()
        .map(|seq| effect("acme", "s1", seq))
        .collect();
    let refs: Vec<&Effect> = effects.iter().collect();
    seed(&*store, "acme", "s1", &refs).await;
    seed(&*store, "acme", "s2", &[&effect("acme", "s2", 0)]).await;
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let seqs: Vec<i64> = tx
        .session_effects(&sid("s1"))
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, vec![0, 1, 2]);
}

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

pub async fn approvals_round_trip_and_filter(store: Arc<dyn Store>) {
    let e = effect("acme", "s1", 0);
    seed(&*store, "acme", "s1", &[&e]).await;
    let mut first = approval("acme", &e, 1_000);
    let second = approval("acme", &e, 2_000);
    let mut tx = store.begin(&org("acme")).await.unwrap();
    tx.insert_approval(&first).await.unwrap();
    tx.insert_approval(&second).await.unwrap();
    first.state = ApprovalState::Denied;
    first.decided_by = Some("alice".into());
    first.decided_via = Some("link:email".into());
    first.decided_at = Some(Timestamp(1_500));
    first.reason = Some("too much money".into());
    tx.update_approval(&first).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.approval(first.id).await.unwrap(), Some(first.clone()));
    let pending = tx.approvals(Some(ApprovalState::Pending)).await.unwrap();
    assert_eq!(pending, vec![second.clone()]);
    let all: Vec<_> = tx
        .approvals(None)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(all, vec![first.id, second.id]);
}

pub async fn undo_stack_keeps_completion_order(store: Arc<dyn Store>) {
    let effects: Vec<Effect> = (0..3).map(|seq| effect("acme", "s1", seq)).collect();
    let refs: Vec<&Effect> = effects.iter().collect();
    seed(&*store, "acme", "s1", &refs).await;
    let mut tx = store.begin(&org("acme")).await.unwrap();
    for i in [2, 0, 1] {
        tx.push_undo(&sid("s1"), effects[i].id, Timestamp(10))
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let stack = tx.undo_stack(&sid("s1")).await.unwrap();
    assert_eq!(stack, vec![effects[2].id, effects[0].id, effects[1].id]);
    assert!(tx.undo_stack(&sid("s2")).await.unwrap().is_empty());
}

pub async fn snapshots_round_trip(store: Arc<dyn Store>) {
    seed(&*store, "acme", "s1", &[]).await;
    let snap = |n: i64| Snapshot {
        org: org("acme"),
        session: sid("s1"),
        taken_at: Timestamp(n),
        body: json!({"n": n, "effects": [], "text": "été"}),
    };
    let mut tx = store.begin(&org("acme")).await.unwrap();
    tx.insert_snapshot(&snap(1)).await.unwrap();
    tx.insert_snapshot(&snap(1)).await.unwrap(); // same instant twice is fine
    tx.insert_snapshot(&snap(2)).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(
        tx.snapshots(&sid("s1")).await.unwrap(),
        vec![snap(1), snap(1), snap(2)]
    );
}

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
    seed(&*store, "acme", "counter", &[]).await;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut tx = store.begin(&org("acme")).await.unwrap();
                tx.lock(LockKey(42)).await.unwrap();
                let mut s = tx.session(&sid("counter")).await.unwrap().unwrap();
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
        tx.session(&sid("counter")).await.unwrap().unwrap().next_seq,
        16,
        "no update was lost"
    );
}

/// No [`crate::Tx::lock`] here: reading a session is enough to keep others from changing it
/// before this transaction ends.
pub async fn a_session_read_then_written_loses_no_update(store: Arc<dyn Store>) {
    seed(&*store, "acme", "s1", &[]).await;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut tx = store.begin(&org("acme")).await.unwrap();
                let mut s = tx.session(&sid("s1")).await.unwrap().unwrap();
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
        tx.session(&sid("s1")).await.unwrap().unwrap().next_seq,
        16,
        "no update was lost"
    );
}

pub async fn api_keys_are_found_by_hash_only(store: Arc<dyn Store>) {
    assert!(!store.has_api_keys().await.unwrap());
    let key = ApiKey {
        id: "key_1".into(),
        org: org("acme"),
        hash: "ab".repeat(32),
        role: Role::Approver,
        label: Some("ci".into()),
        created_at: Timestamp(7),
        revoked_at: None,
    };
    store.insert_api_key(&key).await.unwrap();
    assert!(store.has_api_keys().await.unwrap());
    assert_eq!(
        store.api_key_by_hash(&key.hash).await.unwrap(),
        Some(key.clone())
    );
    assert_eq!(store.api_key_by_hash(&"cd".repeat(32)).await.unwrap(), None);
    let same_hash = ApiKey {
        id: "key_2".into(),
        ..key.clone()
    };
    assert!(matches!(
        store.insert_api_key(&same_hash).await,
        Err(Error::AlreadyExists(_))
    ));
}

pub async fn api_keys_are_listed_and_revoked(store: Arc<dyn Store>) {
    let key = |id: &str, org_name: &str, role: Role, at: i64| ApiKey {
        id: id.into(),
        org: org(org_name),
        hash: blake3_like(id),
        role,
        label: None,
        created_at: Timestamp(at),
        revoked_at: None,
    };
    let (a1, a2, b1) = (
        key("a1", "acme", Role::Agent, 1),
        key("a2", "acme", Role::Admin, 2),
        key("b1", "beta", Role::Approver, 3),
    );
    for k in [&a1, &a2, &b1] {
        store.insert_api_key(k).await.unwrap();
    }
    let ids = |keys: Vec<ApiKey>| keys.into_iter().map(|k| k.id).collect::<Vec<_>>();
    assert_eq!(ids(store.api_keys(None).await.unwrap()), ["a1", "a2", "b1"]);
    assert_eq!(
        ids(store.api_keys(Some(&org("acme"))).await.unwrap()),
        ["a1", "a2"]
    );

    let revoked = store.revoke_api_key("a1", Timestamp(50)).await.unwrap();
    assert_eq!(revoked.unwrap().revoked_at, Some(Timestamp(50)));
    // Revoking again keeps the first time; the lookup by hash shows the revocation.
    let again = store.revoke_api_key("a1", Timestamp(60)).await.unwrap();
    assert_eq!(again.unwrap().revoked_at, Some(Timestamp(50)));
    let found = store.api_key_by_hash(&a1.hash).await.unwrap().unwrap();
    assert_eq!(found.revoked_at, Some(Timestamp(50)));
    assert_eq!(found.role, Role::Agent);
    assert_eq!(
        store.revoke_api_key("nope", Timestamp(70)).await.unwrap(),
        None
    );
    // A revoked key still counts: revoking every key never opens the gateway.
    store.revoke_api_key("a2", Timestamp(80)).await.unwrap();
    store.revoke_api_key("b1", Timestamp(80)).await.unwrap();
    assert!(store.has_api_keys().await.unwrap());
}

/// A stand-in hash of 64 hex digits, distinct per id.
fn blake3_like(id: &str) -> String {
    format!(
        "{:0>64}",
        id.bytes().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

pub async fn compensations_of_both_kinds_round_trip(store: Arc<dyn Store>) {
    let mut upstream = effect("acme", "s1", 0);
    upstream.compensation = Some(Compensation::Upstream {
        tool: "refund".into(),
        args: json!({"id": "{{result.id}}"}),
    });
    let mut local = effect("acme", "s1", 1);
    local.compensation = Some(Compensation::Local {
        function: "cancel_order".into(),
    });
    seed(&*store, "acme", "s1", &[&upstream, &local]).await;
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.effect(upstream.id).await.unwrap(), Some(upstream));
    assert_eq!(tx.effect(local.id).await.unwrap(), Some(local));
}

pub async fn the_latest_run_is_the_newest_of_that_principal(store: Arc<dyn Store>) {
    let run = |id: &str, of: Option<&str>, at: i64| Session {
        run_of: of.map(str::to_owned),
        created_at: Timestamp(at),
        updated_at: Timestamp(at),
        ..session("acme", id)
    };
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.latest_run("api-key:a").await.unwrap(), None);
    for s in [
        run("r-1", Some("api-key:a"), 1_000),
        run("r-2", Some("api-key:a"), 2_000),
        run("r-3", Some("api-key:b"), 3_000),
        run("named", None, 4_000),
    ] {
        tx.put_session(&s).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let latest = tx.latest_run("api-key:a").await.unwrap().unwrap();
    assert_eq!(
        (latest.id, latest.run_of.as_deref()),
        (sid("r-2"), Some("api-key:a"))
    );
    assert_eq!(
        tx.latest_run("api-key:b").await.unwrap().unwrap().id,
        sid("r-3")
    );
    drop(tx);
    // Another org's principal of the same name has no run here.
    let mut other = store.begin(&org("globex")).await.unwrap();
    assert_eq!(other.latest_run("api-key:a").await.unwrap(), None);
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

/// How a remembered row differs from the stored one.
type Stale<T> = Box<dyn Fn(&mut T)>;

/// A transaction for a write on a remembered row, holding another write beside it: a session of
/// its own, named in the transaction.
async fn beside_a_bystander(store: &dyn Store) -> (Box<dyn Tx>, SessionId) {
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let bystander = sid(&format!("bystander-{}", EffectId::generate()));
    let mut row = session("acme", "bystander");
    row.id = bystander.clone();
    tx.put_session(&row).await.unwrap();
    (tx, bystander)
}

/// A compensable call's outcome as its commit writes it: `done` in place of `remembered`, then the
/// effect's undo entry, pushed only when the outcome was written.
async fn outcome_with_undo_entry(
    tx: &mut dyn Tx,
    remembered: &Effect,
    done: &Effect,
    at: Timestamp,
) -> Result<()> {
    tx.replace_effect(remembered, done).await?;
    tx.push_undo(&remembered.session, remembered.id, at).await
}

/// Commits `tx` after its write on a remembered row: `Ok` when the write held, the error
/// otherwise, and then nothing of the transaction is kept.
async fn remembered_write(
    store: &dyn Store,
    (tx, bystander): (Box<dyn Tx>, SessionId),
    written: Result<()>,
) -> Result<()> {
    let result = match written {
        Ok(()) => tx.commit().await,
        Err(e) => {
            drop(tx);
            Err(e)
        }
    };
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let kept = tx.session(&bystander).await.unwrap().is_some();
    assert_eq!(kept, result.is_ok(), "all or nothing: {result:?}");
    result
}

pub async fn a_session_is_replaced_only_while_it_is_as_remembered(store: Arc<dyn Store>) {
    let stored = session("acme", "s1");
    seed(&*store, "acme", "s1", &[]).await;
    let mut next = stored.clone();
    next.next_seq = 1;
    next.updated_at = Timestamp(2_000);

    // Each row differs from the stored one in one column a transaction may change.
    let claim = Lease {
        holder: "gateway-1/undo-1".into(),
        expires_at: Timestamp(9_000),
    };
    let stale: Vec<(&str, Stale<Session>)> = vec![
        ("state", Box::new(|s| s.state = SessionState::Completed)),
        ("next_seq", Box::new(|s| s.next_seq = 7)),
        (
            "failed_effect",
            Box::new(|s| s.failed_effect = Some(EffectId::generate())),
        ),
        (
            "undo_claim",
            Box::new(move |s| s.undo_claim = Some(claim.clone())),
        ),
        ("updated_at", Box::new(|s| s.updated_at = Timestamp(1_001))),
    ];
    for (column, change) in &stale {
        let mut remembered = stored.clone();
        change(&mut remembered);
        let mut tx = beside_a_bystander(&*store).await;
        let written = tx.0.replace_session(&remembered, &next).await;
        let result = remembered_write(&*store, tx, written).await;
        assert!(
            matches!(
                result,
                Err(Error::Changed {
                    what: "session",
                    ..
                })
            ),
            "remembered with another {column}: {result:?}"
        );
    }

    let mut tx = beside_a_bystander(&*store).await;
    let written = tx.0.replace_session(&stored, &next).await;
    remembered_write(&*store, tx, written).await.unwrap();
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.session(&sid("s1")).await.unwrap(), Some(next.clone()));
    drop(tx);

    // Another org's transaction does not see the session, so cannot replace it.
    let mut tx = store.begin(&org("globex")).await.unwrap();
    let mut theirs = next.clone();
    theirs.next_seq = 99;
    let written = tx.replace_session(&next, &theirs).await;
    let err = write_error(tx, written).await;
    assert!(matches!(err, Error::Changed { .. }), "{err:?}");
}

pub async fn an_effect_is_replaced_only_while_it_is_as_remembered(store: Arc<dyn Store>) {
    let stored = effect("acme", "s1", 0);
    seed(&*store, "acme", "s1", &[&stored]).await;
    let mut done = stored.clone();
    done.state = EffectState::Committed;
    done.result = Some(json!({"id": "tx-1"}));
    done.verdicts = Some(json!({"response": {"status": "success"}}));
    done.lease = None;
    done.updated_at = Timestamp(3_000);
    done.completed_at = Some(Timestamp(3_000));

    let stale: Vec<(&str, Stale<Effect>)> = vec![
        (
            "state",
            Box::new(|e| e.state = EffectState::AwaitingApproval),
        ),
        (
            "lease holder",
            Box::new(|e| e.lease.as_mut().unwrap().holder = "gateway-2".into()),
        ),
        (
            "lease end",
            Box::new(|e| e.lease.as_mut().unwrap().expires_at = Timestamp(4_000)),
        ),
        ("lease", Box::new(|e| e.lease = None)),
        ("error", Box::new(|e| e.error = Some("in doubt".into()))),
        (
            "approval",
            Box::new(|e| e.approval = Some(ApprovalId::generate())),
        ),
        ("updated_at", Box::new(|e| e.updated_at = Timestamp(2_500))),
        (
            "completed_at",
            Box::new(|e| e.completed_at = Some(Timestamp(2_500))),
        ),
        (
            "resolved_by",
            Box::new(|e| e.resolved_by = Some("api-key:ops".into())),
        ),
    ];
    // An outcome and its effect's undo entry, as a compensable call's commit writes them (one
    // statement on PostgreSQL): the entry is kept only with the outcome.
    let pushed = Timestamp(3_000);
    for (column, change) in &stale {
        let mut remembered = stored.clone();
        change(&mut remembered);
        let mut tx = beside_a_bystander(&*store).await;
        let written = outcome_with_undo_entry(&mut *tx.0, &remembered, &done, pushed).await;
        let result = remembered_write(&*store, tx, written).await;
        assert!(
            matches!(result, Err(Error::Changed { what: "effect", .. })),
            "remembered with another {column}: {result:?}"
        );
    }
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.undo_stack(&stored.session).await.unwrap(), []);
    drop(tx);

    let mut tx = beside_a_bystander(&*store).await;
    let written = outcome_with_undo_entry(&mut *tx.0, &stored, &done, pushed).await;
    remembered_write(&*store, tx, written).await.unwrap();
    let mut tx = store.begin(&org("acme")).await.unwrap();
    assert_eq!(tx.effect(stored.id).await.unwrap(), Some(done.clone()));
    assert_eq!(tx.undo_stack(&stored.session).await.unwrap(), [stored.id]);
    drop(tx);

    let mut tx = store.begin(&org("globex")).await.unwrap();
    let written = tx.replace_effect(&done, &stored).await;
    let err = write_error(tx, written).await;
    assert!(matches!(err, Error::Changed { .. }), "{err:?}");
}

pub async fn no_earlier_effect_is_expected_of_a_new_call(store: Arc<dyn Store>) {
    let mut keyed = effect("acme", "s1", 0);
    keyed.idempotency_key = Some("key-1".into());
    let other = effect("acme", "s1", 1);
    seed(&*store, "acme", "s1", &[&keyed]).await;
    let theirs = effect("globex", "s1", 0);
    seed(&*store, "globex", "s1", &[&theirs]).await;

    let cases: Vec<(&str, EffectLookup<'_>, bool)> = vec![
        ("nothing to look for", EffectLookup::Nothing, true),
        (
            "its signature",
            EffectLookup::LatestBySignature(&keyed.signature),
            false,
        ),
        ("its key", EffectLookup::LatestByKey("key-1"), false),
        (
            "another signature",
            EffectLookup::LatestBySignature(&other.signature),
            true,
        ),
        ("another key", EffectLookup::LatestByKey("key-2"), true),
        (
            "another org's signature",
            EffectLookup::LatestBySignature(&theirs.signature),
            true,
        ),
    ];
    for (case, lookup, new) in &cases {
        let mut tx = beside_a_bystander(&*store).await;
        let written = tx.0.expect_no_effect(*lookup).await;
        let result = remembered_write(&*store, tx, written).await;
        match new {
            true => assert!(result.is_ok(), "{case}: {result:?}"),
            false => assert!(
                matches!(result, Err(Error::Changed { what: "call", .. })),
                "{case}: {result:?}"
            ),
        }
    }

    // Followed by the insert of the call's effect, which the lookup would find: the check and
    // the insert may travel as one write, with the same answers.
    for (n, (case, lookup, new)) in cases.iter().enumerate() {
        let mut call = effect("acme", "s1", 10 + n as i64);
        match lookup {
            EffectLookup::LatestBySignature(signature) => call.signature = (*signature).clone(),
            EffectLookup::LatestByKey(key) => call.idempotency_key = Some((*key).to_owned()),
            EffectLookup::Nothing => {}
        }
        let mut tx = beside_a_bystander(&*store).await;
        let written = match tx.0.expect_no_effect(*lookup).await {
            Ok(()) => tx.0.insert_effect(&call).await,
            refused => refused,
        };
        let result = remembered_write(&*store, tx, written).await;
        match new {
            true => assert!(result.is_ok(), "{case}, then its effect: {result:?}"),
            false => assert!(
                matches!(result, Err(Error::Changed { what: "call", .. })),
                "{case}, then its effect: {result:?}"
            ),
        }
        let mut tx = store.begin(&org("acme")).await.unwrap();
        let kept = tx.effect(call.id).await.unwrap();
        assert_eq!(
            kept.is_some(),
            *new,
            "{case}: the effect is kept only if new"
        );
    }
}

/// New calls and outcomes in one transaction, interleaved as a batch of a session's calls writes
/// them: all are kept, the undo entries in the order pushed (not the order of the effects); when
/// one outcome's effect changed since it was read, or one call has an earlier effect of its
/// signature, none is. A store that gathers a transaction's writes into fewer statements must
/// keep both.
pub async fn calls_and_outcomes_written_together_are_all_kept_or_none(store: Arc<dyn Store>) {
    let ran: Vec<Effect> = (0..3).map(|n| effect("acme", "s1", n)).collect();
    seed(&*store, "acme", "s1", &ran.iter().collect::<Vec<_>>()).await;
    let done = |e: &Effect| {
        let mut done = e.clone();
        done.state = EffectState::Committed;
        done.result = Some(json!({"n": e.seq}));
        done.lease = None;
        done.updated_at = Timestamp(3_000);
        done.completed_at = Some(Timestamp(3_000));
        done
    };
    // Outcomes pushed in another order than the effects were made.
    let order = [2, 0, 1];
    let calls = |first: i64| -> Vec<Effect> {
        (first..first + 3)
            .map(|n| effect("acme", "s1", n))
            .collect()
    };
    let stale_outcome = |n: usize| -> Effect {
        let mut remembered = ran[n].clone();
        if n == order[1] {
            remembered.updated_at = Timestamp(2_500);
        }
        remembered
    };
    let made_before = {
        let mut calls = calls(10);
        calls[1].signature = ran[0].signature.clone();
        calls
    };
    // (case, the outcomes' effects as remembered, the new calls, what is refused)
    type Case = (&'static str, Vec<Effect>, Vec<Effect>, Option<&'static str>);
    let cases: Vec<Case> = vec![
        (
            "an outcome's effect changed",
            order.iter().map(|&n| stale_outcome(n)).collect(),
            calls(20),
            Some("effect"),
        ),
        (
            "a call made before",
            order.iter().map(|&n| ran[n].clone()).collect(),
            made_before,
            Some("call"),
        ),
        (
            "nothing",
            order.iter().map(|&n| ran[n].clone()).collect(),
            calls(30),
            None,
        ),
    ];
    for (case, remembered, new, refused) in cases {
        let mut tx = beside_a_bystander(&*store).await;
        let mut written = Ok(());
        for (before, call) in remembered.iter().zip(&new) {
            if written.is_ok() {
                written = write_call_and_outcome(&mut *tx.0, call, before, &done(before)).await;
            }
        }
        let result = remembered_write(&*store, tx, written).await;
        let mut tx = store.begin(&org("acme")).await.unwrap();
        let stack = tx.undo_stack(&sid("s1")).await.unwrap();
        let mut kept = Vec::new();
        for call in &new {
            kept.push(tx.effect(call.id).await.unwrap().is_some());
        }
        match refused {
            Some(what) => {
                assert!(
                    matches!(&result, Err(Error::Changed { what: w, .. }) if *w == what),
                    "{case}: {result:?}"
                );
                assert_eq!(kept, [false; 3], "{case}: no new call is kept");
                assert_eq!(stack, [], "{case}: no undo entry is kept");
                for e in &ran {
                    let stored = tx.effect(e.id).await.unwrap().unwrap();
                    assert_eq!(
                        stored.state,
                        EffectState::Pending,
                        "{case}: no outcome is kept"
                    );
                }
            }
            None => {
                result.unwrap();
                assert_eq!(kept, [true; 3]);
                let pushed: Vec<EffectId> = order.iter().map(|&n| ran[n].id).collect();
                assert_eq!(stack, pushed, "the undo entries in the order pushed");
                for e in &ran {
                    assert_eq!(tx.effect(e.id).await.unwrap().unwrap(), done(e));
                }
            }
        }
    }
}

/// A new call's effect with its check, then another call's outcome with its undo entry.
async fn write_call_and_outcome(
    tx: &mut dyn Tx,
    call: &Effect,
    remembered: &Effect,
    done: &Effect,
) -> Result<()> {
    tx.expect_no_effect(EffectLookup::LatestBySignature(&call.signature))
        .await?;
    tx.insert_effect(call).await?;
    outcome_with_undo_entry(tx, remembered, done, done.updated_at).await
}
