//! Calls refused before they were sent (an interceptor blocked them) are recorded as rejected
//! effects; the tool never ran, so an identical call later is decided afresh. Failures may keep
//! details (what the tool answered) beside their error, and every outcome the interceptors'
//! verdicts in a record of their own.

use serde_json::json;
use undolog_engine::{Event, Intercept};
use undolog_types::{EffectState, SessionState};

use crate::*;

#[tokio::test]
async fn a_rejected_call_is_recorded_with_its_reason_and_verdicts() {
    let (engine, _) = engine().await;
    let mut events = engine.subscribe();
    let details = json!({"request": {"status": "validation_failed"}});
    let id = engine
        .reject(
            &send_email("s1"),
            "blocked by policy",
            Some(details.clone()),
        )
        .await
        .unwrap()
        .expect("an active session records it");
    let effect = engine.effect(&org(), id).await.unwrap();
    assert_eq!(effect.state, EffectState::Rejected);
    assert_eq!(effect.error.as_deref(), Some("blocked by policy"));
    assert_eq!(effect.verdicts, Some(details.clone()));
    assert_eq!(effect.result, None, "the tool never answered");
    assert_eq!(effect.seq, 0);
    assert!(effect.completed_at.is_some());
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(
        seen.iter().any(
            |e| matches!(e, Event::EffectRejected { effect_id, reason, .. }
            if *effect_id == id && reason == "blocked by policy")
        ),
        "{seen:?}"
    );
}

#[tokio::test]
async fn an_identical_call_after_a_rejection_is_decided_afresh() {
    let (engine, _) = engine().await;
    let rejected = engine
        .reject(&transfer("s1", 10), "blocked", None)
        .await
        .unwrap()
        .unwrap();
    let (ran, token) = must_own(&engine, transfer("s1", 10)).await;
    assert_ne!(rejected, ran);
    engine
        .commit(&org(), ran, &token, json!({"ok": true}))
        .await
        .unwrap();
    assert!(matches!(
        engine.intercept(transfer("s1", 10)).await.unwrap(),
        Intercept::Replay { effect_id, .. } if effect_id == ran
    ));
    let states: Vec<EffectState> = engine
        .session_effects(&org(), &session("s1"))
        .await
        .unwrap()
        .iter()
        .map(|e| e.state)
        .collect();
    assert_eq!(states, [EffectState::Rejected, EffectState::Committed]);
}

#[tokio::test]
async fn nothing_is_recorded_in_a_closed_session() {
    let (engine, _) = engine().await;
    run(&engine, get_balance("s1"), json!(1)).await;
    let closed = engine.close_session(&org(), &session("s1")).await.unwrap();
    assert_ne!(closed.state, SessionState::Active);
    assert_eq!(
        engine
            .reject(&send_email("s1"), "blocked", None)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        engine
            .session_effects(&org(), &session("s1"))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_failure_keeps_what_the_tool_answered_and_the_verdicts_apart() {
    let (engine, _) = engine().await;
    let (id, token) = must_own(&engine, transfer("s1", 10)).await;
    let details = json!({"content": [{"type": "text", "text": "no"}], "isError": true});
    let verdicts = json!({"request": {"status": "success"}});
    engine
        .fail_with(
            &org(),
            id,
            &token,
            "upstream timed out",
            Some(details.clone()),
            Some(verdicts.clone()),
        )
        .await
        .unwrap();
    let effect = engine.effect(&org(), id).await.unwrap();
    assert_eq!(effect.state, EffectState::Failed);
    assert_eq!(effect.result, Some(details.clone()));
    assert_eq!(effect.verdicts, Some(verdicts));
    assert_eq!(
        engine.intercept(transfer("s1", 10)).await.unwrap(),
        Intercept::Failed {
            effect_id: id,
            error: "upstream timed out".into(),
            result: Some(details),
        },
        "the failure is replayed with what was recorded"
    );
}
