//! A 2025-11-25 client subscribed to a resource through the gateway is told when the upstream
//! says it changed.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{conformance::Upstream, harness::TestGateway};

const LEGACY: &str = "2025-11-25";
const URI: &str = "test://watched-resource";

/// One JSON-RPC message to `/mcp` in session `session` (none: `initialize`); the response.
async fn post(gw: &TestGateway, session: Option<&str>, body: Value) -> reqwest::Response {
    let mut request = gw
        .http
        .post(gw.mcp_url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", LEGACY);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.body(body.to_string()).send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_hears_of_the_upstreams_resource_update() {
    let upstream = Upstream::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"conformance\"\nurl = {:?}\n",
        upstream.url
    ))
    .await;

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "subscriber", "version": "1"}}});
    let response = post(&gw, None, init).await;
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("a session")
        .to_str()
        .unwrap()
        .to_owned();
    let body = response.text().await.unwrap();
    assert!(
        body.contains("\"subscribe\":true"),
        "resources.subscribe is advertised: {body}"
    );
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(&gw, Some(&session), initialized).await;

    // The standalone stream, where notifications that answer no request arrive.
    let mut stream = gw
        .http
        .get(gw.mcp_url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);

    let subscribe = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
        "params": {"uri": URI}});
    let answer = post(&gw, Some(&session), subscribe)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        answer.contains("\"result\"") && !answer.contains("\"error\""),
        "{answer}"
    );

    let mut seen = String::new();
    let heard = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("notifications/resources/updated") {
                return;
            }
        }
    })
    .await;
    assert!(
        heard.is_ok(),
        "no resource update within 15 s; the stream had: {seen}"
    );
    assert!(seen.contains(URI), "the update names the resource: {seen}");
}
