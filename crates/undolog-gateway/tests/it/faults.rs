//! Upstreams that crash, hang or answer garbage: the client gets a clear error, the effect is
//! `failed`, the other upstreams keep serving, and a crashed stdio upstream is restarted.

use std::time::Duration;

use serde_json::json;

use crate::harness::{Bank, Client, TestGateway, fixture, stdio_bank_toml, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_hangs_and_garbage_fail_the_call_and_the_gateway_keeps_serving() {
    let http_bank = Bank::start().await;
    let state = tempfile::tempdir().unwrap();
    let gw = TestGateway::start(&format!(
        r#"
{}
[[upstreams]]
name = "httpbank"
url = "{}"

[[upstreams]]
name = "broken"
command = "python3"
args = [{:?}]

[limits]
# Long enough for a Python upstream to start on a busy 2-core machine (the tests run in parallel),
# short enough that the hung call's timeout stays quick.
upstream_timeout_secs = 6

[tools.crash]
tier = "compensable"
[tools.hang]
tier = "compensable"
[tools.garbage]
tier = "compensable"
[tools.get_balance]
tier = "read_only"
[tools.httpbank__get_balance]
tier = "read_only"
"#,
        stdio_bank_toml("stdiobank", &state.path().join("bank.json")),
        http_bank.url,
        fixture("garbage_server.py").display().to_string(),
    ))
    .await;
    let mut client = Client::connect(
        "mcp2",
        "legacy",
        &gw.mcp_url(),
        &["X-UndoLog-Session-Id: faults"],
    )
    .await;
    let tools = client.list_tools().await;
    assert!(
        tools.contains(&"httpbank__transfer".to_owned()),
        "a colliding name gets its upstream's prefix: {tools:?}"
    );

    let crashed = client.call("crash", json!({})).await;
    assert_eq!(crashed["isError"], true, "{crashed}");
    assert!(
        text(&crashed).contains("stdiobank"),
        "the error names the upstream: {crashed}"
    );

    let restarted = client
        .call("get_balance", json!({"account": "alice"}))
        .await;
    assert_eq!(
        restarted["structuredContent"]["balance"], 100,
        "restarted: {restarted}"
    );

    let hung = client.start_call("hang", json!({"seconds": 30})).await;
    let started = std::time::Instant::now();
    let other = client
        .call("httpbank__get_balance", json!({"account": "bob"}))
        .await;
    assert_eq!(other["structuredContent"]["balance"], 0, "{other}");
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "the other upstream answered meanwhile"
    );
    let hung = client.answer(hung).await;
    assert_eq!(hung["ok"]["isError"], true, "{hung}");
    assert!(
        text(&hung["ok"]).contains("did not answer within"),
        "{hung}"
    );

    let garbage = client.call("garbage", json!({})).await;
    assert_eq!(garbage["isError"], true, "{garbage}");
    assert!(text(&garbage).contains("broken"), "{garbage}");

    let effects = gw.get("/v1/sessions/faults/effects").await;
    let state_of = |tool: &str| {
        effects
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["tool"] == tool)
            .unwrap_or_else(|| panic!("no effect for {tool}: {effects}"))["state"]
            .clone()
    };
    for tool in ["crash", "hang", "garbage"] {
        assert_eq!(state_of(tool), "failed", "{tool}");
    }
    assert_eq!(state_of("get_balance"), "committed");
}
