//! A session's whole history, exported as JSON and kept in the log.

use serde_json::json;
use undolog_engine::SNAPSHOT_FORMAT;

use crate::*;

#[tokio::test]
async fn a_snapshot_holds_the_session_its_effects_approvals_and_undo_stack() {
    let (engine, _) = engine().await;
    let t = run(&engine, transfer("s1", 5), json!({"txn": 1})).await;
    run(&engine, get_balance("s1"), json!(95)).await;
    engine.intercept(send_email("s1")).await.unwrap();

    let snapshot = engine.snapshot(&org(), &session("s1")).await.unwrap();
    let body = &snapshot.body;
    assert_eq!(body["format"], SNAPSHOT_FORMAT);
    assert_eq!(body["session"]["state"], "active");
    let tools: Vec<&str> = body["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["transfer", "get_balance", "send_email"]);
    assert_eq!(body["effects"][0]["result"], json!({"txn": 1}));
    assert_eq!(body["effects"][2]["state"], "awaiting_approval");
    assert_eq!(body["approvals"][0]["state"], "pending");
    assert_eq!(body["undo_stack"], json!([t.to_string()]));

    let kept = engine.snapshots(&org(), &session("s1")).await.unwrap();
    assert_eq!(kept, vec![snapshot]);
}

#[tokio::test]
async fn an_unknown_session_has_no_snapshot() {
    let (engine, _) = engine().await;
    let err = engine.snapshot(&org(), &session("nope")).await.unwrap_err();
    assert!(
        matches!(err, undolog_engine::Error::UnknownSession(_)),
        "{err:?}"
    );
}
