//! Records written and read back as they were: sessions, effects, approvals, undo stacks,
//! snapshots, compensations and runs, and the lookups that find them.

use super::*;

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
        opened_by: None,
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

/// Who a session belongs to is kept with it, and a caller's sessions are those it opened, its
/// runs, and those recorded before sessions had openers; never another caller's.
pub async fn a_callers_sessions_are_those_it_opened_and_no_others(store: Arc<dyn Store>) {
    let made = |id: &str, opened_by: Option<&str>, run_of: Option<&str>, at: i64| Session {
        opened_by: opened_by.map(str::to_owned),
        run_of: run_of.map(str::to_owned),
        created_at: Timestamp(at),
        updated_at: Timestamp(at),
        ..session("acme", id)
    };
    let mut tx = store.begin(&org("acme")).await.unwrap();
    for s in [
        made("a-named", Some("api-key:a"), None, 1_000),
        made("b-named", Some("api-key:b"), None, 2_000),
        made("a-run", Some("api-key:a"), Some("api-key:a"), 3_000),
        made("b-old-run", None, Some("api-key:b"), 4_000),
        made("from-before", None, None, 5_000),
    ] {
        tx.put_session(&s).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin(&org("acme")).await.unwrap();
    let ids = |sessions: Vec<Session>| sessions.into_iter().map(|s| s.id).collect::<Vec<_>>();
    // (caller, the sessions it reads)
    let rows = [
        ("api-key:a", vec!["a-named", "a-run", "from-before"]),
        ("api-key:b", vec!["b-named", "b-old-run", "from-before"]),
        ("api-key:c", vec!["from-before"]),
    ];
    for (caller, expected) in rows {
        let expected: Vec<SessionId> = expected.into_iter().map(sid).collect();
        assert_eq!(
            ids(tx.sessions_of(caller).await.unwrap()),
            expected,
            "{caller}"
        );
    }
    let kept = tx.session(&sid("a-named")).await.unwrap().unwrap();
    assert_eq!(kept.opened_by.as_deref(), Some("api-key:a"));
    assert!(kept.belongs_to(Some("api-key:a")) && !kept.belongs_to(Some("api-key:b")));
    assert!(!kept.belongs_to(None));
    drop(tx);
    let mut other = store.begin(&org("globex")).await.unwrap();
    assert!(other.sessions_of("api-key:a").await.unwrap().is_empty());
}
