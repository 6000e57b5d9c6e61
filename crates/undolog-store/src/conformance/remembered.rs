//! Writes on remembered rows: kept only while the row is as the caller last saw it, and no
//! earlier effect of a new call exists; and new calls and outcomes written together, all kept or
//! none.

use super::*;

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
