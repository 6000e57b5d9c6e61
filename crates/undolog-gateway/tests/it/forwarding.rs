//! What is not a recorded result still reaches the client: upstream progress during a call, and
//! (defer mode) an answer that says the call awaits approval instead of holding it.

use serde_json::json;

use crate::harness::{BANK_TOOLS, Bank, Client, TestGateway, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_progress_reaches_the_client_that_asked_for_it() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n[tools.hang]\ntier = \"read_only\"\n",
        bank.url
    ))
    .await;
    for (venv, mode) in [("mcp2", "legacy"), ("mcp1", "legacy")] {
        let mut client = Client::connect(venv, mode, &gw.mcp_url(), &[]).await;
        let id = client
            .send(json!({"op": "call_tool", "name": "hang", "arguments": {"seconds": 2}, "progress": true}))
            .await;
        let answer = client.answer(id).await;
        assert_eq!(
            answer["ok"]["structuredContent"]["slept"], 2.0,
            "{venv}: {answer}"
        );
        let progress = answer["progress"]
            .as_array()
            .expect("progress was collected");
        assert!(
            !progress.is_empty(),
            "{venv}: no progress relayed: {answer}"
        );
        assert_eq!(
            progress.last().unwrap()["progress"],
            2.0,
            "{venv}: {answer}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_defer_mode_the_call_answers_at_once_and_the_retry_after_approval_runs() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n[approvals]\nmode = \"defer\"\n{BANK_TOOLS}",
        bank.url
    ))
    .await;
    let mut client = Client::connect(
        "mcp2",
        "modern",
        &gw.mcp_url(),
        &["X-UndoLog-Session-Id: defer-1"],
    )
    .await;
    let email = json!({"to": "a@example.com", "subject": "later"});
    let waiting = client.call("send_email", email.clone()).await;
    assert_eq!(waiting["isError"], true, "{waiting}");
    assert_eq!(
        waiting["structuredContent"]["status"], "awaiting_approval",
        "{waiting}"
    );
    let approval = waiting["_meta"]["io.undolog/approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text(&waiting).contains(&approval));
    assert!(bank.ledger().await.is_empty());

    let (status, _) = gw
        .post(&format!("/v1/approvals/{approval}/approve"), json!({}))
        .await;
    assert_eq!(status, 200);
    let sent = client.call("send_email", email).await;
    assert_eq!(sent["structuredContent"]["sent"], true, "{sent}");
    assert_eq!(bank.ledger().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_client_in_the_order_the_upstream_sent_it() {
    const COUNT: u64 = 300;
    let upstream = crate::conformance::Upstream::start().await;
    let gw = TestGateway::start(&format!(
        "default_tier = \"read_only\"\n\n[[upstreams]]\nname = \"conformance\"\nurl = {:?}\n",
        upstream.url
    ))
    .await;
    // Directly first: the fixture and the client keep the order themselves.
    let gateway = gw.mcp_url();
    for (way, url, mode) in [
        ("directly", &upstream.url, "legacy"),
        ("through the gateway", &gateway, "legacy"),
        ("directly", &upstream.url, "modern"),
        ("through the gateway", &gateway, "modern"),
    ] {
        let mut client = Client::connect("mcp2", mode, url, &[]).await;
        let id = client
            .send(json!({"op": "call_tool", "name": "test_progress_burst",
                         "arguments": {"count": COUNT}, "progress": true}))
            .await;
        let answer = client.answer(id).await;
        assert_ne!(answer["ok"]["isError"], true, "{way}, {mode}: {answer}");
        let seen: Vec<u64> = answer["progress"]
            .as_array()
            .expect("progress was collected")
            .iter()
            .filter_map(|p| p["progress"].as_f64())
            .map(|p| p as u64)
            .collect();
        assert_eq!(
            seen,
            (1..=COUNT).collect::<Vec<_>>(),
            "{way}, {mode}: every progress notification, in the upstream's order"
        );
    }
}
