//! Replay by signature and by idempotency key; read-only calls always run.

use serde_json::json;
use undolog_engine::{Error, Intercept};
use undolog_types::EffectState;

use crate::*;

#[tokio::test]
async fn an_identical_compensable_call_is_replayed_not_run_again() {
    let (engine, _) = engine().await;
    let id = run(&engine, transfer("s1", 10), json!({"ok": true, "txn": 7})).await;
    let again = engine.intercept(transfer("s1", 10)).await.unwrap();
    assert_eq!(
        again,
        Intercept::Replay {
            effect_id: id,
            result: json!({"ok": true, "txn": 7})
        }
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
async fn different_arguments_session_or_step_run_separately() {
    let (engine, _) = engine().await;
    run(&engine, transfer("s1", 10), json!(1)).await;
    must_execute(&engine, transfer("s1", 11)).await;
    must_execute(&engine, transfer("s2", 10)).await;
    must_execute(&engine, transfer("s1", 10).with_step(1)).await;
}

#[tokio::test]
async fn read_only_calls_run_every_time_and_are_logged() {
    let (engine, _) = engine().await;
    let first = run(&engine, get_balance("s1"), json!(100)).await;
    let second = run(&engine, get_balance("s1"), json!(90)).await;
    assert_ne!(first, second);
    let effects = engine
        .session_effects(&org(), &session("s1"))
        .await
        .unwrap();
    assert_eq!(
        effects.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![0, 1]
    );
}

#[tokio::test]
async fn a_failed_call_is_answered_with_its_error_not_run_again() {
    let (engine, _) = engine().await;
    let (first, token) = must_own(&engine, transfer("s1", 10)).await;
    engine
        .fail(&org(), first, &token, "upstream said no")
        .await
        .unwrap();
    assert_eq!(
        engine.intercept(transfer("s1", 10)).await.unwrap(),
        Intercept::Failed {
            effect_id: first,
            error: "upstream said no".into(),
            result: None,
        }
    );
    // A new step is a new call.
    must_execute(&engine, transfer("s1", 10).with_step(2)).await;
    assert_eq!(
        engine.effect(&org(), first).await.unwrap().state,
        EffectState::Failed
    );
}

#[tokio::test]
async fn an_idempotency_key_replaces_signature_matching() {
    let (engine, _) = engine().await;
    // Same key: replayed even for a read-only tool.
    let id = run(
        &engine,
        get_balance("s1").with_idempotency_key("k1"),
        json!(100),
    )
    .await;
    let again = engine
        .intercept(get_balance("s1").with_idempotency_key("k1"))
        .await
        .unwrap();
    assert_eq!(
        again,
        Intercept::Replay {
            effect_id: id,
            result: json!(100)
        }
    );
    // A new key for the same call runs it again.
    let id2 = run(
        &engine,
        transfer("s1", 10).with_idempotency_key("k2"),
        json!("a"),
    )
    .await;
    let id3 = must_execute(&engine, transfer("s1", 10).with_idempotency_key("k3")).await;
    assert_ne!(id2, id3);
}

#[tokio::test]
async fn the_same_key_with_different_arguments_is_an_error() {
    let (engine, _) = engine().await;
    let id = run(
        &engine,
        transfer("s1", 10).with_idempotency_key("k"),
        json!(1),
    )
    .await;
    let err = engine
        .intercept(transfer("s1", 99).with_idempotency_key("k"))
        .await
        .unwrap_err();
    match err {
        Error::KeyReused { key, effect } => assert_eq!((key.as_str(), effect), ("k", id)),
        other => panic!("expected KeyReused, got {other:?}"),
    }
    assert!(
        engine
            .intercept(transfer("s1", 99).with_idempotency_key("k"))
            .await
            .unwrap_err()
            .to_string()
            .contains("use a new key")
    );
}

#[tokio::test]
async fn a_closed_session_takes_no_more_calls() {
    let (engine, _) = engine().await;
    run(&engine, transfer("s1", 10), json!(1)).await;
    engine.close_session(&org(), &session("s1")).await.unwrap();
    match engine.intercept(transfer("s1", 20)).await.unwrap() {
        Intercept::Rejected { reason, .. } => {
            assert!(reason.message().contains("start a new session"))
        }
        other => panic!("expected rejected, got {other:?}"),
    }
}

#[tokio::test]
async fn events_describe_what_happened() {
    let (engine, _) = engine().await;
    let mut events = engine.subscribe();
    let mut own = engine.subscribe_own();
    let id = run(&engine, transfer("s1", 10), json!(1)).await;
    engine.intercept(transfer("s1", 10)).await.unwrap();
    engine.intercept(transfer("s1", 10)).await.unwrap();
    engine.intercept(send_email("s1")).await.unwrap();
    let heard: Vec<serde_json::Value> = std::iter::from_fn(|| events.try_recv().ok())
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let kinds: Vec<&str> = heard.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "effect_intercepted",
            "effect_committed",
            "effect_replayed",
            "effect_replayed",
            "effect_intercepted",
            "approval_required"
        ]
    );
    // What each says besides its kind.
    assert_eq!(heard[0]["tier"], "compensable");
    let replays: Vec<_> = heard[2..4].iter().map(|e| e["replays"].clone()).collect();
    assert_eq!(replays, [json!(1), json!(2)], "each replay counted");
    assert_eq!(heard[2]["effect_id"], id.to_string());
    let held = &heard[5];
    assert_eq!(
        (&held["tool"], &held["tier"], &held["arguments"]["to"]),
        (
            &json!("send_email"),
            &json!("irreversible"),
            &json!("ceo@example.com")
        )
    );
    assert!(
        held["reason"]
            .as_str()
            .unwrap()
            .contains("cannot be undone"),
        "{held}"
    );
    // This engine's own commits reach its own subscribers too.
    let own: Vec<_> = std::iter::from_fn(|| own.try_recv().ok()).collect();
    assert_eq!(own.len(), heard.len());
}

#[tokio::test]
async fn an_input_round_is_neither_done_nor_failed_and_is_never_replayed() {
    let (engine, _) = engine().await;
    let (first, token) = must_own(&engine, transfer("s1", 10)).await;
    let asked = json!({"resultType": "input_required", "inputRequests": {"pin": {}}});
    engine
        .await_input(&org(), first, &token, asked.clone(), None)
        .await
        .unwrap();
    let effect = engine.effect(&org(), first).await.unwrap();
    assert_eq!(effect.state, EffectState::InputRequired);
    assert_eq!(effect.result, Some(asked), "the upstream's request is kept");
    // Asked again, identically: a call of its own, run again.
    let (again, token) = must_own(&engine, transfer("s1", 10)).await;
    assert_ne!(again, first);
    // Not done, so not undone: only the committed call is compensated.
    engine
        .commit(&org(), again, &token, json!({"txn": 2}))
        .await
        .unwrap();
    engine.close_session(&org(), &session("s1")).await.unwrap();
    let plan = engine.begin_undo(&org(), &session("s1")).await.unwrap();
    assert_eq!(
        plan.steps.iter().map(|s| s.effect_id).collect::<Vec<_>>(),
        vec![again],
        "{plan:?}"
    );
}
