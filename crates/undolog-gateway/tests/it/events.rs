//! `GET /events` streams typed events of the caller's org only.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use crate::harness::TestGateway;

pub(crate) async fn next_events(response: reqwest::Response, wanted: usize) -> Vec<String> {
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let mut names = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while names.len() < wanted {
        let Ok(Some(chunk)) = tokio::time::timeout_at(deadline, stream.next()).await else {
            break;
        };
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        names = text
            .lines()
            .filter_map(|l| l.strip_prefix("event:").map(|n| n.trim().to_owned()))
            .collect();
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_live_and_only_for_the_callers_org() {
    let gw = TestGateway::start("").await;
    let acme = gw.key("acme", undolog_types::Role::Admin).await;
    let globex = gw.key("globex", undolog_types::Role::Admin).await;
    let subscribe = |secret: String| {
        let request = gw
            .http
            .get(format!("{}/events", gw.base))
            .bearer_auth(secret)
            .send();
        async move { request.await.unwrap() }
    };
    let acme_events = subscribe(acme.secret.clone()).await;
    let globex_events = subscribe(globex.secret.clone()).await;
    assert_eq!(acme_events.status(), 200);

    let response = gw
        .http
        .post(format!("{}/mcp/tool_call", gw.base))
        .bearer_auth(&acme.secret)
        .header("x-undolog-session-id", "s-1")
        .json(&json!({"name": "transfer", "arguments": {"from_account": "alice", "to_account": "bob", "amount": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let seen = next_events(acme_events, 2).await;
    assert_eq!(seen, ["effect_intercepted", "effect_committed"], "{seen:?}");
    let leaked = tokio::time::timeout(Duration::from_millis(500), next_events(globex_events, 1))
        .await
        .unwrap_or_default();
    assert!(leaked.is_empty(), "globex saw acme's events: {leaked:?}");
}
