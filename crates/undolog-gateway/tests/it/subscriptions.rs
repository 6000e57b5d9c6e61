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

/// A 2026-07-28 client of the gateway (rmcp's, the official Rust SDK), stateless.
async fn modern_client(
    gw: &TestGateway,
) -> rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig> {
    use rmcp::{
        model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion},
        service::{ClientLifecycleMode, ClientServiceExt},
        transport::StreamableHttpClientTransport,
    };
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("undolog-listen-test", "1"),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    config
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(gw.mcp_url()),
            lifecycle,
        )
        .await
        .expect("rmcp connects")
}

/// The next notification on `subscription`, within 10 s.
async fn next(subscription: &mut rmcp::service::Subscription) -> rmcp::model::ServerNotification {
    tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("a notification within 10 s")
        .expect("a well-formed listen stream")
        .expect("the stream is still open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_hears_of_upstream_list_changes_and_the_resources_it_names_only() {
    use rmcp::model::{CallToolRequestParams, ServerNotification, SubscriptionFilter};
    let upstream = Upstream::start().await;
    let gw = TestGateway::start(&format!(
        "default_tier = \"read_only\"\n\n[[upstreams]]\nname = \"conformance\"\nurl = {:?}\n",
        upstream.url
    ))
    .await;
    let client = modern_client(&gw).await;
    let tools_and_resource = SubscriptionFilter::builder()
        .tools_list_changed()
        .resource_subscription(URI)
        .build();
    let mut listening = client
        .peer()
        .listen(tools_and_resource)
        .await
        .expect("listen");
    let prompts_only = SubscriptionFilter::builder().prompts_list_changed().build();
    let mut narrow = client.peer().listen(prompts_only).await.expect("listen");
    assert_eq!(
        listening.acknowledged().resource_subscriptions.as_deref(),
        Some(&[URI.to_owned()][..]),
        "the gateway takes the whole filter"
    );

    // The upstream updates the watched resource after a subscription: the gateway subscribed.
    let ServerNotification::ResourceUpdatedNotification(updated) = next(&mut listening).await
    else {
        panic!("a resource update first");
    };
    assert_eq!(updated.params.uri, URI);

    // A tool list change upstream (made by a call through the gateway) reaches the stream.
    client
        .call_tool(CallToolRequestParams::new("test_trigger_tool_change"))
        .await
        .expect("the hook runs");
    assert!(
        matches!(
            next(&mut listening).await,
            ServerNotification::ToolListChangedNotification(_)
        ),
        "tools/list_changed on the stream that asked for it"
    );
    // The prompts-only stream heard nothing of it; a prompt change it does hear.
    client
        .call_tool(CallToolRequestParams::new("test_trigger_prompt_change"))
        .await
        .expect("the hook runs");
    assert!(
        matches!(
            next(&mut narrow).await,
            ServerNotification::PromptListChangedNotification(_)
        ),
        "the first thing a prompts-only stream hears is a prompt change"
    );
    client.cancel().await.ok();
}

/// A 2025-11-25 client (rmcp's) that counts the tool-list changes it hears.
#[derive(Clone, Default)]
struct ListWatcher {
    changes: std::sync::Arc<tokio::sync::Notify>,
}

impl rmcp::ClientHandler for ListWatcher {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.changes.notify_one();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_hears_of_upstream_list_changes_on_its_own_stream() {
    use rmcp::{
        ServiceExt, model::CallToolRequestParams, transport::StreamableHttpClientTransport,
    };
    let upstream = Upstream::start().await;
    let gw = TestGateway::start(&format!(
        "default_tier = \"read_only\"\n\n[[upstreams]]\nname = \"conformance\"\nurl = {:?}\n",
        upstream.url
    ))
    .await;
    let watcher = ListWatcher::default();
    let client = watcher
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(gw.mcp_url()))
        .await
        .expect("a 2025-11-25 session");
    client
        .call_tool(CallToolRequestParams::new("test_trigger_tool_change"))
        .await
        .expect("the hook runs");
    tokio::time::timeout(Duration::from_secs(10), watcher.changes.notified())
        .await
        .expect("notifications/tools/list_changed within 10 s");
    client.cancel().await.ok();
}
