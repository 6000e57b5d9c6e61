//! Bad input gets a typed error and leaves nothing written.

use serde_json::json;
use undolog_engine::{Call, Engine, EngineConfig, Error, ToolPolicy};
use undolog_store::SqliteStore;
use undolog_types::{Args, EffectId, EffectState, LeaseToken, Tier};

use crate::*;

async fn nothing_written(engine: &Engine) {
    assert!(
        engine.sessions(&org()).await.unwrap().is_empty(),
        "no session was written"
    );
}

#[tokio::test]
async fn malformed_and_non_object_arguments_are_refused_before_the_engine() {
    assert!(matches!(
        Args::parse("{\"a\":"),
        Err(undolog_types::Error::MalformedJson(_))
    ));
    assert!(matches!(
        Args::parse("[1,2]"),
        Err(undolog_types::Error::ArgumentsNotObject("an array"))
    ));
    assert!(matches!(
        Args::parse("{\"n\":18446744073709551617}"),
        Err(undolog_types::Error::InexactNumber(_))
    ));
}

#[tokio::test]
async fn oversize_arguments_are_refused_with_the_limit() {
    let store = SqliteStore::in_memory().await.unwrap();
    let engine = Engine::new(
        std::sync::Arc::new(store),
        EngineConfig {
            max_args_bytes: 64,
            ..EngineConfig::default()
        },
    );
    let call = Call::new(
        org(),
        session("s1"),
        "t",
        args(json!({"blob": "x".repeat(100)})),
        ToolPolicy::new(Tier::Compensable),
    );
    let err = engine.intercept(call).await.unwrap_err();
    assert!(
        matches!(err, Error::ArgsTooLarge { limit: 64, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("raise max_args_bytes"));
    nothing_written(&engine).await;
}

#[tokio::test]
async fn the_default_argument_limit_is_one_mebibyte() {
    let (engine, _) = engine().await;
    assert_eq!(engine.config().max_args_bytes, 1024 * 1024);
    let big = Call::new(
        org(),
        session("s1"),
        "t",
        args(json!({"blob": "x".repeat(1024 * 1024)})),
        ToolPolicy::new(Tier::Compensable),
    );
    assert!(matches!(
        engine.intercept(big).await,
        Err(Error::ArgsTooLarge { .. })
    ));
    nothing_written(&engine).await;
}

#[tokio::test]
async fn empty_tool_names_and_keys_are_refused() {
    let (engine, _) = engine().await;
    let call = Call::new(
        org(),
        session("s1"),
        "",
        Args::empty(),
        ToolPolicy::new(Tier::ReadOnly),
    );
    assert!(matches!(
        engine.intercept(call).await,
        Err(Error::EmptyToolName)
    ));
    assert!(matches!(
        engine
            .intercept(transfer("s1", 1).with_idempotency_key(""))
            .await,
        Err(Error::EmptyIdempotencyKey)
    ));
    nothing_written(&engine).await;
}

#[tokio::test]
async fn unknown_ids_are_typed_errors() {
    let (engine, _) = engine().await;
    let ghost = EffectId::generate();
    let token = LeaseToken::generate();
    assert!(
        matches!(engine.commit(&org(), ghost, &token, json!(1)).await, Err(Error::UnknownEffect(id)) if id == ghost)
    );
    assert!(matches!(
        engine.fail(&org(), ghost, &token, "x").await,
        Err(Error::UnknownEffect(_))
    ));
    let approval = undolog_types::ApprovalId::generate();
    assert!(matches!(
        engine.approve(&org(), approval, &person("a"), None).await,
        Err(Error::UnknownApproval(_))
    ));
    assert!(matches!(
        engine.close_session(&org(), &session("nope")).await,
        Err(Error::UnknownSession(_))
    ));
}

#[tokio::test]
async fn a_second_commit_and_a_commit_after_fail_are_refused_and_change_nothing() {
    let (engine, _) = engine().await;
    let (id, token) = must_own(&engine, transfer("s1", 1)).await;
    engine
        .commit(&org(), id, &token, json!("first"))
        .await
        .unwrap();
    let err = engine
        .commit(&org(), id, &token, json!("second"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotPending {
                state: EffectState::Committed,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        engine.effect(&org(), id).await.unwrap().result,
        Some(json!("first"))
    );
    assert!(matches!(
        engine.fail(&org(), id, &token, "late").await,
        Err(Error::NotPending { .. })
    ));

    let (failed, token) = must_own(&engine, transfer("s1", 2)).await;
    engine.fail(&org(), failed, &token, "boom").await.unwrap();
    let err = engine
        .commit(&org(), failed, &token, json!("late"))
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
    let effect = engine.effect(&org(), failed).await.unwrap();
    assert_eq!((effect.state, effect.result), (EffectState::Failed, None));
}

#[tokio::test]
async fn another_org_cannot_touch_an_effect() {
    let (engine, _) = engine().await;
    let (id, token) = must_own(&engine, transfer("s1", 1)).await;
    let other = undolog_types::OrgId::new("globex").unwrap();
    assert!(matches!(
        engine.commit(&other, id, &token, json!(1)).await,
        Err(Error::UnknownEffect(_))
    ));
    assert_eq!(
        engine.effect(&org(), id).await.unwrap().state,
        EffectState::Pending
    );
}

#[tokio::test]
async fn closing_a_session_twice_is_an_illegal_transition() {
    let (engine, _) = engine().await;
    run(&engine, get_balance("s1"), json!(1)).await;
    engine.close_session(&org(), &session("s1")).await.unwrap();
    let err = engine
        .close_session(&org(), &session("s1"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "a session cannot go from completed to completed"
    );
}
