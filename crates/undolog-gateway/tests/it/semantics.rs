//! Replay, approvals and undo through real clients and a real upstream.

use serde_json::json;

use crate::harness::{BANK_TOOLS, Bank, Client, TestGateway, text, undolog_meta};

async fn gateway(bank: &Bank, extra: &str) -> TestGateway {
    TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{extra}\n{BANK_TOOLS}",
        bank.url
    ))
    .await
}

fn transfers(ledger: &[serde_json::Value]) -> Vec<(String, String, i64)> {
    ledger
        .iter()
        .filter(|op| op["op"] == "transfer")
        .map(|op| {
            (
                op["from_account"].as_str().unwrap().to_owned(),
                op["to_account"].as_str().unwrap().to_owned(),
                op["amount"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_transfer_twice_moves_money_once_and_the_second_answer_says_replayed() {
    let bank = Bank::start().await;
    let gw = gateway(&bank, "").await;
    let args = json!({"from_account": "alice", "to_account": "bob", "amount": 10});
    // A modern (stateless) client names its session; a legacy one gets its MCP session.
    let mut modern = Client::connect(
        "mcp2",
        "modern",
        &gw.mcp_url(),
        &["X-UndoLog-Session-Id: run-1"],
    )
    .await;
    let mut legacy = Client::connect("mcp1", "legacy", &gw.mcp_url(), &[]).await;
    for client in [&mut modern, &mut legacy] {
        let first = client.call("transfer", args.clone()).await;
        let second = client.call("transfer", args.clone()).await;
        let (first_id, first_replayed) = undolog_meta(&first);
        let (second_id, second_replayed) = undolog_meta(&second);
        assert!(!first_replayed && second_replayed, "{first}\n{second}");
        assert_eq!(first_id, second_id);
        assert_eq!(first["structuredContent"], second["structuredContent"]);
    }
    // Two sessions, one transfer each upstream.
    assert_eq!(transfers(&bank.ledger().await).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_email_is_held_until_approved_and_a_denial_reaches_the_client_with_its_reason() {
    let bank = Bank::start().await;
    let gw = gateway(&bank, "[approvals]\nmode = \"hold\"\nhold_secs = 60\n").await;
    let mut client = Client::connect("mcp2", "legacy", &gw.mcp_url(), &[]).await;

    let held = client
        .start_call(
            "send_email",
            json!({"to": "boss@example.com", "subject": "approve me"}),
        )
        .await;
    let approval = gw.pending_approval().await;
    assert!(
        bank.ledger().await.is_empty(),
        "nothing runs before the decision"
    );
    let id = approval["id"].as_str().unwrap();
    let (status, _) = gw
        .post(&format!("/v1/approvals/{id}/approve"), json!({}))
        .await;
    assert_eq!(status, 200);
    let sent = client.answer(held).await;
    assert_ne!(sent["ok"]["isError"], true, "{sent}");
    assert_eq!(sent["ok"]["structuredContent"]["sent"], true, "{sent}");

    let held = client
        .start_call(
            "send_email",
            json!({"to": "all@example.com", "subject": "spam"}),
        )
        .await;
    let approval = gw.pending_approval().await;
    let id = approval["id"].as_str().unwrap();
    let (status, _) = gw
        .post(
            &format!("/v1/approvals/{id}/deny"),
            json!({"reason": "not to everyone"}),
        )
        .await;
    assert_eq!(status, 200);
    let denied = client.answer(held).await;
    assert_eq!(denied["ok"]["isError"], true, "{denied}");
    assert!(text(&denied["ok"]).contains("not to everyone"), "{denied}");

    let emails: Vec<_> = bank
        .ledger()
        .await
        .into_iter()
        .filter(|op| op["op"] == "send_email")
        .collect();
    assert_eq!(
        emails.len(),
        1,
        "only the approved mail went out: {emails:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undoing_three_transfers_runs_three_reverse_transfers_newest_first() {
    let bank = Bank::start().await;
    let gw = gateway(&bank, "").await;
    let mut client = Client::connect(
        "mcp2",
        "modern",
        &gw.mcp_url(),
        &["X-UndoLog-Session-Id: undo-me"],
    )
    .await;
    for amount in [1, 2, 3] {
        let done = client
            .call(
                "transfer",
                json!({"from_account": "alice", "to_account": "bob", "amount": amount}),
            )
            .await;
        assert_ne!(done["isError"], true, "{done}");
    }
    let (status, report) = gw.post("/v1/sessions/undo-me/undo", json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["state"], "compensated", "{report}");

    let forward_then_back = transfers(&bank.ledger().await);
    let expected: Vec<(String, String, i64)> = [1, 2, 3]
        .iter()
        .map(|a| ("alice".to_owned(), "bob".to_owned(), *a))
        .chain(
            [3, 2, 1]
                .iter()
                .map(|a| ("bob".to_owned(), "alice".to_owned(), *a)),
        )
        .collect();
    assert_eq!(forward_then_back, expected);
    let sessions = gw.get("/v1/sessions").await;
    let session = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "undo-me")
        .unwrap();
    assert_eq!(session["state"], "compensated");
    let effects = gw.get("/v1/sessions/undo-me/effects").await;
    assert!(
        effects
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["state"] == "compensated"),
        "{effects}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_failure_is_the_tools_own_error_result_and_says_replayed() {
    let upstream = crate::conformance::Upstream::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"conformance\"\nurl = {:?}\n\n[tools.test_error_with_details]\n\
         tier = \"compensable\"\n",
        upstream.url
    ))
    .await;
    let mut client = Client::connect(
        "mcp2",
        "modern",
        &gw.mcp_url(),
        &["X-UndoLog-Session-Id: fails"],
    )
    .await;
    let first = client.call("test_error_with_details", json!({})).await;
    let second = client.call("test_error_with_details", json!({})).await;
    assert_eq!(first["isError"], true, "{first}");
    assert_eq!(second["isError"], true, "{second}");
    let (first_id, first_replayed) = undolog_meta(&first);
    let (second_id, second_replayed) = undolog_meta(&second);
    assert!(!first_replayed && second_replayed, "{first}\n{second}");
    assert_eq!(first_id, second_id);
    assert_eq!(
        second["structuredContent"],
        json!({"code": "E42", "retryable": false}),
        "the tool's own result, not a summary of it: {second}"
    );
    let blocks = |r: &serde_json::Value| r["content"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        blocks(&second)[..2],
        blocks(&first)[..],
        "its blocks as they were, then the replay note"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_call_runs_every_time_and_is_recorded_once_finished() {
    let bank = Bank::start().await;
    let gw = gateway(&bank, "").await;
    let balance = json!({"account": "alice"});
    for _ in 0..2 {
        let (status, body) = gw
            .rest_call(None, "reads", "get_balance", balance.clone())
            .await;
        assert_eq!(
            (status, body["outcome"].as_str()),
            (200, Some("executed")),
            "{body}"
        );
    }
    let effects = gw.get("/v1/sessions/reads/effects").await;
    let effects = effects.as_array().unwrap();
    assert_eq!(effects.len(), 2, "each read is recorded: {effects:?}");
    for effect in effects {
        assert_eq!(effect["state"], "committed", "{effect}");
        assert_eq!(effect["tier"], "read_only", "{effect}");
        assert!(effect["lease"].is_null(), "never pending: {effect}");
        assert_eq!(
            effect["result"]["structuredContent"]["balance"], 100,
            "{effect}"
        );
        assert!(
            effect["created_at"].as_i64() <= effect["completed_at"].as_i64(),
            "{effect}"
        );
    }
    assert_eq!(effects[0]["seq"], 0);
    assert_eq!(effects[1]["seq"], 1);
}
