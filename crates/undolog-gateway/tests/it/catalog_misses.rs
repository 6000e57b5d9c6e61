//! A call to a name the catalog does not hold lists the upstreams again, so a tool added upstream
//! is found by its first call. Any agent can send such names, and many at once: misses that
//! arrive together share one listing instead of each asking every upstream for everything.
//! The upstream is rmcp's own server, in this process over real Streamable HTTP, counting its
//! listings.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

use crate::harness::{TestGateway, serve_mcp};

/// A tool server whose tools are `offered` (each answers `ran <name>`), and that takes
/// `LISTING` to list them, counting each listing in `listings`.
#[derive(Clone, Default)]
struct Slow {
    offered: Arc<Mutex<Vec<String>>>,
    listings: Arc<AtomicUsize>,
}

/// Long enough that a burst of calls all miss while the first listing runs.
const LISTING: Duration = Duration::from_millis(300);

impl ServerHandler for Slow {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.listings.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(LISTING).await;
        let schema = Arc::new(json!({"type": "object"}).as_object().cloned().unwrap());
        let names = self.offered.lock().unwrap().clone();
        let tools = names
            .into_iter()
            .map(|name| Tool::new(name, "a tool", schema.clone()))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = format!("ran {}", request.name);
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

async fn call(gw: &TestGateway, tool: &str) -> Value {
    gw.tools_call(json!({"name": tool, "arguments": {}})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_unknown_names_that_arrive_together_share_one_listing_of_the_upstreams() {
    let upstream = Slow::default();
    upstream.offered.lock().unwrap().push("echo".into());
    let url = serve_mcp(upstream.clone()).await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"slow\"\nurl = {url:?}\n\n[tools.fresh]\ntier = \"read_only\"\n"
    ))
    .await;

    // A tool added upstream after the gateway listed is found by its first call.
    upstream.offered.lock().unwrap().push("fresh".into());
    let before = upstream.listings.load(Ordering::SeqCst);
    let fresh = call(&gw, "fresh").await;
    assert_eq!(
        fresh["result"]["content"][0]["text"], "ran fresh",
        "{fresh}"
    );
    let one_listing = upstream.listings.load(Ordering::SeqCst) - before;
    assert!(one_listing >= 1, "the miss listed the upstream again");

    // Sixteen calls to names nobody offers, at once: each is refused as unknown, and they
    // share the listing that began after the first of them (and at most one more, for those
    // that missed after it began), not one each.
    let before = upstream.listings.load(Ordering::SeqCst);
    let names: Vec<String> = (0..16).map(|n| format!("no_such_tool_{n}")).collect();
    let answers = futures::future::join_all(names.iter().map(|name| call(&gw, name))).await;
    for answer in &answers {
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
    }
    let listings = upstream.listings.load(Ordering::SeqCst) - before;
    assert!(
        listings <= 2 * one_listing,
        "16 misses at once listed the upstream {listings} times ({one_listing} per listing)"
    );
}
