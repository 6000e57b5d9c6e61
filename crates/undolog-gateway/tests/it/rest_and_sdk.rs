//! The seed's REST tool call (defer: 202, then the retried call runs) and the SDK's effect API
//! (intercept, run the tool in the caller's process, commit or fail).

use serde_json::{Value, json};

use crate::harness::TestGateway;

async fn rest(gw: &TestGateway, session: &str, name: &str, arguments: Value) -> (u16, Value) {
    let response = gw
        .http
        .post(format!("{}/mcp/tool_call", gw.base))
        .header("x-undolog-session-id", session)
        .json(&json!({"name": name, "arguments": arguments}))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_answers_executed_replayed_and_202_awaiting_approval_then_runs_once_approved() {
    let gw = TestGateway::start("").await;
    let transfer = json!({"from_account": "alice", "to_account": "bob", "amount": 7});
    let (status, first) = rest(&gw, "r-1", "transfer", transfer.clone()).await;
    assert_eq!(
        (status, first["outcome"].as_str()),
        (200, Some("executed")),
        "{first}"
    );
    assert_eq!(first["result"]["moved"], 7);
    let (status, second) = rest(&gw, "r-1", "transfer", transfer).await;
    assert_eq!(
        (status, second["outcome"].as_str()),
        (200, Some("replayed")),
        "{second}"
    );
    assert_eq!(first["effect_id"], second["effect_id"]);

    let email = json!({"to": "a@example.com", "subject": "hi"});
    let (status, held) = rest(&gw, "r-1", "send_email", email.clone()).await;
    assert_eq!(
        (status, held["outcome"].as_str()),
        (202, Some("awaiting_approval")),
        "{held}"
    );
    let approval = held["approval_id"].as_str().unwrap();
    let (status, _) = gw
        .post(
            &format!("/v1/approvals/{approval}/approve"),
            json!({"reason": "fine"}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, sent) = rest(&gw, "r-1", "send_email", email.clone()).await;
    assert_eq!(
        (status, sent["outcome"].as_str()),
        (200, Some("executed")),
        "{sent}"
    );
    let (status, again) = rest(&gw, "r-1", "send_email", email).await;
    assert_eq!(
        (status, again["outcome"].as_str()),
        (200, Some("replayed")),
        "{again}"
    );

    let (status, balance) = rest(&gw, "r-1", "get_balance", json!({"account": "bob"})).await;
    assert_eq!(
        (status, &balance["result"]["balance"]),
        (200, &json!(7)),
        "{balance}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_effect_api_records_a_local_tool_and_replays_it() {
    let gw = TestGateway::start("").await;
    let intercept = json!({
        "session_id": "sdk-1", "tool": "charge_card", "arguments": {"cents": 500},
        "step": 0, "tier": "compensable",
        "compensation": {"kind": "local", "function": "refund"}
    });
    let (status, first) = gw.post("/v1/effects", intercept.clone()).await;
    assert_eq!(
        (status, first["outcome"].as_str()),
        (200, Some("execute")),
        "{first}"
    );
    let effect = first["effect_id"].as_str().unwrap();
    let (status, _) = gw
        .post(
            &format!("/v1/effects/{effect}/commit"),
            json!({"result": {"charge": "ch_1"}, "lease_token": first["lease_token"]}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, again) = gw.post("/v1/effects", intercept).await;
    assert_eq!(
        (status, again["outcome"].as_str()),
        (200, Some("replay")),
        "{again}"
    );
    assert_eq!(again["result"], json!({"charge": "ch_1"}));
    let (status, twice) = gw
        .post(
            &format!("/v1/effects/{effect}/commit"),
            json!({"result": {}, "lease_token": first["lease_token"]}),
        )
        .await;
    assert_eq!(status, 409, "an outcome is recorded once: {twice}");

    let failing = json!({"session_id": "sdk-1", "tool": "charge_card", "arguments": {"cents": 1},
                         "step": 1, "tier": "compensable"});
    let (_, started) = gw.post("/v1/effects", failing.clone()).await;
    let effect = started["effect_id"].as_str().unwrap();
    let (status, _) = gw
        .post(
            &format!("/v1/effects/{effect}/fail"),
            json!({"error": "card declined", "lease_token": started["lease_token"]}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, replayed) = gw.post("/v1/effects", failing).await;
    assert_eq!(status, 409, "{replayed}");
    assert!(
        replayed["error"]
            .as_str()
            .unwrap()
            .contains("card declined"),
        "{replayed}"
    );
    assert_eq!(replayed["code"], "call_failed", "{replayed}");
    assert_eq!(
        replayed["effect_id"], effect,
        "names the failed effect: {replayed}"
    );

    let effects = gw.get("/v1/sessions/sdk-1/effects").await;
    let states: Vec<_> = effects
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["state"].clone())
        .collect();
    assert_eq!(states, [json!("committed"), json!("failed")]);
}
