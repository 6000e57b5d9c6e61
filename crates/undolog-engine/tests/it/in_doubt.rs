//! An effect whose executor vanished is in doubt: never silently run again, shown, resolvable.

use serde_json::json;
use undolog_engine::{Error, Intercept, Rejection, Resolution};
use undolog_types::EffectState;

use crate::*;

#[tokio::test]
async fn a_pending_effect_past_its_lease_is_in_doubt_and_not_run_again() {
    let (engine, clock) = engine().await;
    let id = must_execute(&engine, transfer("s1", 10)).await;
    assert!(
        engine.in_doubt(&org()).await.unwrap().is_empty(),
        "the lease is live"
    );

    clock.advance(engine.config().lease + std::time::Duration::from_secs(1)); // the executor died
    let doubtful = engine.in_doubt(&org()).await.unwrap();
    assert_eq!(doubtful.iter().map(|e| e.id).collect::<Vec<_>>(), vec![id]);
    let retry = engine.intercept(transfer("s1", 10)).await.unwrap();
    assert_eq!(
        retry,
        Intercept::Rejected {
            effect_id: Some(id),
            reason: Rejection::InDoubt
        }
    );
    assert!(
        Rejection::InDoubt
            .message()
            .contains("operator must resolve")
    );

    engine
        .resolve_in_doubt(
            &org(),
            id,
            Resolution::Committed(json!({"found": "in the bank's log"})),
            "api-key:ops",
        )
        .await
        .unwrap();
    assert!(engine.in_doubt(&org()).await.unwrap().is_empty());
    let resolved = engine.effect(&org(), id).await.unwrap();
    assert_eq!(
        resolved.resolved_by.as_deref(),
        Some("api-key:ops"),
        "who decided is kept"
    );
    assert!(matches!(
        engine.intercept(transfer("s1", 10)).await.unwrap(),
        Intercept::Replay { .. }
    ));
}

#[tokio::test]
async fn an_idempotent_tool_in_doubt_simply_runs_again() {
    let (engine, clock) = engine().await;
    let mut call = transfer("s1", 10);
    call.policy.idempotent = true;
    let id = must_execute(&engine, call.clone()).await;
    clock.advance(engine.config().lease);
    assert_eq!(
        must_execute(&engine, call).await,
        id,
        "same effect, new lease"
    );
}

#[tokio::test]
async fn only_in_doubt_effects_can_be_resolved_by_hand() {
    let (engine, clock) = engine().await;
    let id = must_execute(&engine, transfer("s1", 10)).await;
    let err = engine
        .resolve_in_doubt(&org(), id, Resolution::Failed("no".into()), "ops")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotInDoubt(_)), "{err:?}");
    clock.advance(engine.config().lease);
    engine
        .resolve_in_doubt(
            &org(),
            id,
            Resolution::Failed("not in the bank's log".into()),
            "ops",
        )
        .await
        .unwrap();
    assert_eq!(
        engine.effect(&org(), id).await.unwrap().state,
        EffectState::Failed
    );
}

#[tokio::test]
async fn renewing_the_lease_keeps_a_long_call_out_of_doubt() {
    let (engine, clock) = engine().await;
    let (id, token) = must_own(&engine, transfer("s1", 10)).await;
    clock.advance(engine.config().lease / 2);
    engine.renew_lease(&org(), id, &token).await.unwrap();
    clock.advance(engine.config().lease / 2 + std::time::Duration::from_secs(1));
    assert!(engine.in_doubt(&org()).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_executor_that_lost_the_answer_puts_the_effect_in_doubt_at_once() {
    let (engine, _) = engine().await;
    let (id, token) = must_own(&engine, transfer("s1", 10)).await;
    // The request went upstream and its answer was lost: no waiting out the lease.
    engine
        .doubt(
            &org(),
            id,
            &token,
            "upstream `bank` closed the connection before answering",
            None,
        )
        .await
        .unwrap();
    let doubtful = engine.in_doubt(&org()).await.unwrap();
    assert_eq!(doubtful.iter().map(|e| e.id).collect::<Vec<_>>(), vec![id]);
    let effect = engine.effect(&org(), id).await.unwrap();
    assert_eq!(
        effect.state,
        EffectState::Pending,
        "neither done nor failed"
    );
    assert!(
        effect
            .error
            .as_deref()
            .is_some_and(|e| e.contains("closed the connection")),
        "what is known is kept: {effect:?}"
    );
    assert_eq!(
        engine.intercept(transfer("s1", 10)).await.unwrap(),
        Intercept::Rejected {
            effect_id: Some(id),
            reason: Rejection::InDoubt
        },
        "never run again on a guess"
    );
    engine
        .resolve_in_doubt(
            &org(),
            id,
            Resolution::Failed("not in the bank's log".into()),
            "ops",
        )
        .await
        .unwrap();
    // Only a pending effect can be in doubt.
    let err = engine
        .doubt(&org(), id, &token, "again", None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotPending {
                state: EffectState::Failed,
                ..
            }
        ),
        "{err:?}"
    );
}
