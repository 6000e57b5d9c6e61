//! The 2026-07-28 caching hints on the gateway's merged lists (`ttlMs`, `cacheScope`): what the
//! upstreams say, merged as the strictest of them, never a default that hides it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{conformance::Upstream, harness::TestGateway};

async fn list(gw: &TestGateway, method: &str) -> Value {
    let (status, answer) = gw
        .rpc(None, method, json!({}), json!({}), Duration::from_secs(30))
        .await;
    assert_eq!(status, 200, "{method}: {answer}");
    answer["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_carry_the_strictest_hint_of_the_upstreams_they_merge() {
    let upstream = Upstream::start().await;
    let fixture = format!(
        "[[upstreams]]\nname = \"conformance\"\nurl = {:?}\n",
        upstream.url
    );
    // The fixture says 300 s, public, for each list; the demo bank (in process, 2025-11-25) says
    // nothing, so a list that merges it may not be cached at all.
    let with_bank = format!("{fixture}\n[[upstreams]]\nname = \"demo\"\nbuiltin = \"demo\"\n");
    for (upstreams, scope, cached) in [
        (fixture.as_str(), "public", true),
        (&with_bank, "private", false),
    ] {
        let gw = TestGateway::start(&format!("default_tier = \"read_only\"\n\n{upstreams}")).await;
        for method in [
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
        ] {
            let listed = list(&gw, method).await;
            let ttl = listed["ttlMs"]
                .as_u64()
                .unwrap_or_else(|| panic!("{method}: {listed}"));
            assert_eq!(listed["cacheScope"], scope, "{method} ({scope}): {listed}");
            if cached {
                assert!(
                    ttl > 0 && ttl <= 300_000,
                    "{method}: the fixture's 300 s at most: {listed}"
                );
            } else {
                assert_eq!(ttl, 0, "{method}: {listed}");
            }
        }
    }
}
