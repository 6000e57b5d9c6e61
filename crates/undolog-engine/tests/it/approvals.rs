//! Irreversible calls wait for a person: approve, deny with a reason, expiry, hold mode.

use std::time::Duration;

use serde_json::json;
use undolog_engine::{Error, Intercept, Rejection};
use undolog_types::{ApprovalState, EffectState};

use crate::*;

async fn held(engine: &Engine) -> (undolog_types::EffectId, undolog_types::ApprovalId) {
    match engine.intercept(send_email("s1")).await.unwrap() {
        Intercept::AwaitingApproval {
            effect_id,
            approval_id,
            ..
        } => (effect_id, approval_id),
        other => panic!("expected awaiting approval, got {other:?}"),
    }
}

#[tokio::test]
async fn an_irreversible_call_runs_only_after_approval() {
    let (engine, _) = engine().await;
    let (effect, approval) = held(&engine).await;
    // Retrying before the decision gets the same request, not a new one.
    assert_eq!(held(&engine).await, (effect, approval));
    assert_eq!(
        engine
            .approvals(&org(), Some(ApprovalState::Pending))
            .await
            .unwrap()
            .len(),
        1
    );

    let decided = engine
        .approve(&org(), approval, &person("alice"), None)
        .await
        .unwrap();
    assert_eq!(
        (decided.state, decided.decided_by.as_deref()),
        (ApprovalState::Approved, Some("alice"))
    );
    let (executing, token) = must_own(&engine, send_email("s1")).await;
    assert_eq!(executing, effect);
    engine
        .commit(&org(), effect, &token, json!("sent"))
        .await
        .unwrap();
    // Sent once: the retry is a replay.
    assert_eq!(
        engine.intercept(send_email("s1")).await.unwrap(),
        Intercept::Replay {
            effect_id: effect,
            result: json!("sent")
        }
    );
}

#[tokio::test]
async fn a_denial_carries_the_reason_to_the_agent() {
    let (engine, _) = engine().await;
    let (effect, approval) = held(&engine).await;
    engine
        .deny(&org(), approval, &person("bob"), "not to the CEO")
        .await
        .unwrap();
    match engine.intercept(send_email("s1")).await.unwrap() {
        Intercept::Rejected {
            effect_id,
            reason: reason @ Rejection::Denied { .. },
        } => {
            assert_eq!(effect_id, Some(effect));
            assert_eq!(reason.message(), "denied by bob: not to the CEO");
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    assert_eq!(
        engine.effect(&org(), effect).await.unwrap().state,
        EffectState::Denied
    );
}

#[tokio::test]
async fn a_decision_is_made_once() {
    let (engine, _) = engine().await;
    let (_, approval) = held(&engine).await;
    engine
        .deny(&org(), approval, &person("bob"), "no")
        .await
        .unwrap();
    let err = engine
        .approve(&org(), approval, &person("alice"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::AlreadyDecided {
                state: ApprovalState::Denied,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_expired_request_cannot_be_approved_and_a_retry_asks_again() {
    let (engine, clock) = engine().await;
    let (effect, approval) = held(&engine).await;
    clock.advance(engine.config().approval_timeout + Duration::from_secs(1));
    let err = engine
        .approve(&org(), approval, &person("alice"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::ApprovalExpired(id) if id == approval),
        "{err:?}"
    );
    assert_eq!(
        engine.effect(&org(), effect).await.unwrap().state,
        EffectState::Expired
    );
    let (effect2, approval2) = held(&engine).await;
    assert_ne!((effect, approval), (effect2, approval2));
}

#[tokio::test]
async fn expiry_sweeps_every_overdue_request() {
    let (engine, clock) = engine().await;
    held(&engine).await;
    assert_eq!(engine.expire_approvals(&org()).await.unwrap(), 0);
    clock.advance(engine.config().approval_timeout);
    assert_eq!(engine.expire_approvals(&org()).await.unwrap(), 1);
    assert!(
        engine
            .approvals(&org(), Some(ApprovalState::Pending))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn hold_mode_wakes_when_a_person_decides() {
    let (engine, _) = engine().await;
    let (_, approval) = held(&engine).await;
    let waiter = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .wait_for_decision(&org(), approval, Duration::from_secs(10))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    engine
        .approve(&org(), approval, &person("alice"), Some("fine".into()))
        .await
        .unwrap();
    let decided = waiter.await.unwrap().unwrap();
    assert_eq!(decided.state, ApprovalState::Approved);
}

#[tokio::test]
async fn hold_mode_gives_up_after_its_timeout() {
    let (engine, _) = engine().await;
    let (_, approval) = held(&engine).await;
    let err = engine
        .wait_for_decision(&org(), approval, Duration::from_millis(30))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ApprovalWaitTimedOut(_)), "{err:?}");
}

#[tokio::test]
async fn a_policy_can_require_approval_for_a_compensable_tool() {
    let (engine, _) = engine().await;
    let mut call = transfer("s1", 1_000_000);
    call.policy.requires_approval = true;
    assert!(matches!(
        engine.intercept(call).await.unwrap(),
        Intercept::AwaitingApproval { .. }
    ));
}

/// Four eyes: whoever made a call may not decide it, unless the setup allows it.
#[tokio::test]
async fn the_principal_that_made_a_call_cannot_decide_it() {
    let cases = [
        // (decider, may decide own, decision is taken)
        ("api-key:agent", false, false),
        ("api-key:agent", true, true),
        ("api-key:approver", false, true),
    ];
    for (who, may_decide_own, taken) in cases {
        for approve in [true, false] {
            let (engine, _) = engine().await;
            let call = send_email("s1").with_caller("api-key:agent");
            let approval = match engine.intercept(call).await.unwrap() {
                Intercept::AwaitingApproval { approval_id, .. } => approval_id,
                other => panic!("{other:?}"),
            };
            let stored = engine.approval(&org(), approval).await.unwrap();
            assert_eq!(stored.requested_by.as_deref(), Some("api-key:agent"));
            let by = Decider {
                id: who.into(),
                may_decide_own,
                via: "link:email".into(),
            };
            let decided = if approve {
                engine.approve(&org(), approval, &by, None).await
            } else {
                engine.deny(&org(), approval, &by, "no").await
            };
            let case = format!("{who} (may decide own: {may_decide_own}, approve: {approve})");
            match decided {
                Ok(decided) => {
                    assert!(taken, "{case} decided");
                    assert_eq!(decided.decided_by.as_deref(), Some(who), "{case}");
                    assert_eq!(decided.decided_via.as_deref(), Some("link:email"), "{case}");
                }
                Err(e) => {
                    assert!(!taken, "{case}: {e}");
                    assert!(matches!(e, Error::OwnCall { .. }), "{case}: {e:?}");
                    assert!(e.to_string().contains("four eyes"), "{e}");
                    let still = engine.approval(&org(), approval).await.unwrap();
                    assert_eq!(
                        still.state,
                        ApprovalState::Pending,
                        "{case}: nothing changed"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn a_withdrawn_request_is_nobody_s_decision_and_a_retry_asks_again() {
    let (engine, _) = engine().await;
    let (effect, approval) = held(&engine).await;
    // The caller takes its own request back: not a decision, so four eyes do not apply.
    let withdrawn = engine.withdraw(&org(), approval, "agent-1").await.unwrap();
    assert_eq!(withdrawn.state, ApprovalState::Withdrawn);
    assert_eq!(withdrawn.decided_by.as_deref(), Some("agent-1"));
    assert_eq!(
        engine.effect(&org(), effect).await.unwrap().state,
        EffectState::Denied,
        "the withdrawn call never runs"
    );
    for err in [
        engine
            .approve(&org(), approval, &person("alice"), None)
            .await
            .unwrap_err(),
        engine
            .withdraw(&org(), approval, "agent-1")
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                Error::AlreadyDecided {
                    state: ApprovalState::Withdrawn,
                    ..
                }
            ),
            "{err:?}"
        );
    }
    let (effect2, approval2) = held(&engine).await;
    assert_ne!((effect, approval), (effect2, approval2), "asked again");
}

#[tokio::test]
async fn a_decided_request_cannot_be_withdrawn() {
    let (engine, _) = engine().await;
    let (_, approval) = held(&engine).await;
    engine
        .deny(&org(), approval, &person("bob"), "no")
        .await
        .unwrap();
    let err = engine
        .withdraw(&org(), approval, "agent-1")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::AlreadyDecided {
                state: ApprovalState::Denied,
                ..
            }
        ),
        "{err:?}"
    );
}
