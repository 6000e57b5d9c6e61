//! Undo run by the caller over HTTP: begin answers the plan newest first, each step is reported,
//! out-of-order reports are refused, and the last one closes the session.

use serde_json::{Value, json};

use crate::harness::TestGateway;

async fn record_local_call(gw: &TestGateway, session: &str, step: u64, cents: u64) -> String {
    let intercept = json!({
        "session_id": session, "tool": "charge_card", "arguments": {"cents": cents},
        "step": step, "tier": "compensable",
        // The form SDKs wrote before compensations were typed: still a local function.
        "compensation": {"tool": "sdk:refund_card", "args": {}}
    });
    let (status, started) = gw.post("/v1/effects", intercept).await;
    assert_eq!(status, 200, "{started}");
    let effect = started["effect_id"].as_str().unwrap().to_owned();
    let (status, _) = gw
        .post(
            &format!("/v1/effects/{effect}/commit"),
            json!({"result": {"charge": format!("ch_{step}")},
                   "lease_token": started["lease_token"]}),
        )
        .await;
    assert_eq!(status, 200);
    effect
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_runs_the_undo_step_by_step_newest_first() {
    let gw = TestGateway::start("").await;
    let first = record_local_call(&gw, "u-1", 0, 100).await;
    let second = record_local_call(&gw, "u-1", 1, 200).await;

    let (status, plan) = gw.post("/v1/sessions/u-1/undo/begin", json!({})).await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["state"], "compensating");
    let steps: Vec<&Value> = plan["steps"].as_array().unwrap().iter().collect();
    assert_eq!(steps[0]["effect_id"], json!(second));
    assert_eq!(steps[1]["effect_id"], json!(first));
    assert_eq!(steps[0]["args"], json!({"cents": 200}));
    assert_eq!(steps[0]["result"], json!({"charge": "ch_1"}));
    assert_eq!(
        steps[0]["compensation"],
        json!({"kind": "local", "function": "refund_card"})
    );
    let claim = plan["claim"].as_str().unwrap();

    let (status, refused) = gw
        .post(
            &format!("/v1/sessions/u-1/undo/steps/{first}"),
            json!({"outcome": "compensated", "result": "refunded", "claim": claim}),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains(&second),
        "{refused}"
    );

    let (status, progress) = gw
        .post(
            &format!("/v1/sessions/u-1/undo/steps/{second}"),
            json!({"outcome": "compensated", "result": "refunded", "claim": claim}),
        )
        .await;
    assert_eq!(status, 200, "{progress}");
    assert_eq!(progress["state"], "compensating");
    assert_eq!(progress["remaining"], json!([first]));
    let (status, progress) = gw
        .post(
            &format!("/v1/sessions/u-1/undo/steps/{first}"),
            json!({"outcome": "already_undone", "claim": claim}),
        )
        .await;
    assert_eq!(status, 200, "{progress}");
    assert_eq!(progress["state"], "compensated");

    let effects = gw.get("/v1/sessions/u-1/effects").await;
    let states: Vec<_> = effects
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["state"].clone())
        .collect();
    assert_eq!(states, [json!("compensated"), json!("compensated")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_local_compensation_leaves_the_session_for_a_person() {
    let gw = TestGateway::start("").await;
    let only = record_local_call(&gw, "u-2", 0, 100).await;
    let (status, _) = gw
        .post(
            &format!("/v1/sessions/u-2/undo/steps/{only}"),
            json!({"outcome": "compensated", "claim": "made-up"}),
        )
        .await;
    assert_eq!(status, 409, "a step is reported only during an undo");
    let (_, plan) = gw.post("/v1/sessions/u-2/undo/begin", json!({})).await;
    let claim = plan["claim"].as_str().unwrap();
    let (status, progress) = gw
        .post(
            &format!("/v1/sessions/u-2/undo/steps/{only}"),
            json!({"outcome": "failed", "error": "card network down", "claim": claim}),
        )
        .await;
    assert_eq!(status, 200, "{progress}");
    assert_eq!(progress["state"], "compensation_failed");
    let sessions = gw.get("/v1/sessions").await;
    assert_eq!(sessions[0]["failed_effect"], json!(only));
    let (status, bad) = gw
        .post(
            &format!("/v1/sessions/u-2/undo/steps/{only}"),
            json!({"outcome": "maybe"}),
        )
        .await;
    assert!(status == 400 || status == 422, "{status} {bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_own_undo_says_where_an_sdk_compensation_runs() {
    let gw = TestGateway::start("").await;
    record_local_call(&gw, "u-3", 0, 100).await;
    let (status, report) = gw.post("/v1/sessions/u-3/undo", json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["state"], "compensation_failed");
    let error = report["steps"][0]["outcome"]["error"].as_str().unwrap();
    assert!(error.contains("session.undo()"), "{error}");
}
