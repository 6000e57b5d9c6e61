//! Upstreams that crash, hang, answer garbage or lose an answer: the client gets a clear error,
//! the effect is in doubt (the tool may have run: it is never run again on a guess), the other
//! upstreams keep serving, and a crashed stdio upstream is restarted.

use std::time::Duration;

use serde_json::json;

use crate::harness::{Bank, Client, TestGateway, fixture, stdio_bank_toml, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_hangs_and_garbage_leave_the_call_in_doubt_and_the_gateway_keeps_serving() {
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
    // Each was sent and got no definite answer: it may have run.
    let doubtful = gw.get("/v1/effects/in_doubt").await;
    for tool in ["crash", "hang", "garbage"] {
        assert_eq!(state_of(tool), "pending", "{tool}");
        assert!(
            doubtful
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["tool"] == tool),
            "{tool} is listed in doubt: {doubtful}"
        );
    }
    assert_eq!(state_of("get_balance"), "committed");
}

/// The dropping fixture upstream (`dropping_server.py`): its `drop` tool runs, writes one line
/// to `ledger`, and loses its answer.
pub(crate) struct Dropping {
    pub(crate) url: String,
    _child: tokio::process::Child,
}

impl Dropping {
    pub(crate) async fn start(ledger: &std::path::Path) -> Dropping {
        let mut child = crate::harness::spawn(
            tokio::process::Command::new("python3")
                .arg(fixture("dropping_server.py"))
                .arg("--ledger")
                .arg(ledger),
        );
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
            child.stdout.take().unwrap(),
        ));
        let ready = crate::harness::first_line(&mut lines).await;
        Dropping {
            url: ready["url"].as_str().unwrap().to_owned(),
            _child: child,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_lost_after_the_call_was_sent_leaves_the_effect_in_doubt_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.jsonl");
    let upstream = Dropping::start(&ledger).await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"dropping\"\nurl = {:?}\n\n[limits]\nupstream_timeout_secs = 4\n\n\
         [tools.drop]\ntier = \"compensable\"\n",
        upstream.url
    ))
    .await;
    let ran = || {
        std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .lines()
            .count()
    };

    let started = std::time::Instant::now();
    let (status, lost) = gw.rest_call(None, "lost", "drop", json!({"n": 1})).await;
    let answered_in = started.elapsed();
    assert_eq!(status, 502, "{lost}");
    assert!(
        answered_in < Duration::from_secs(6),
        "within the upstream timeout: {answered_in:?}"
    );
    assert_eq!(lost["outcome"], "in_doubt", "{lost}");
    assert_eq!(lost["in_doubt"], true, "{lost}");
    let effect = lost["effect_id"]
        .as_str()
        .expect("names its effect")
        .to_owned();
    assert!(
        lost["error"]
            .as_str()
            .unwrap_or_default()
            .contains("dropping"),
        "names the upstream: {lost}"
    );
    assert_eq!(ran(), 1, "the tool did run");

    let doubtful = gw.get("/v1/effects/in_doubt").await;
    let ids: Vec<&str> = doubtful
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(
        ids,
        [effect.as_str()],
        "listed at once, not after a lease: {doubtful}"
    );

    // A retry is not run on a guess: the answer says in doubt, and names the effect.
    let (status, retried) = gw.rest_call(None, "lost", "drop", json!({"n": 1})).await;
    assert_eq!(status, 409, "{retried}");
    assert_eq!(retried["in_doubt"], true, "{retried}");
    assert_eq!(retried["effect_id"], effect, "{retried}");
    assert_eq!(ran(), 1, "not run twice");

    // Over MCP, the same: a tool error that says so, with the effect.
    let (_, over_mcp) = gw
        .rpc(
            None,
            "tools/call",
            json!({"name": "drop", "arguments": {"n": 2}}),
            json!({}),
            Duration::from_secs(10),
        )
        .await;
    let result = &over_mcp["result"];
    assert_eq!(result["isError"], true, "{over_mcp}");
    assert_eq!(result["_meta"]["io.undolog/in_doubt"], true, "{over_mcp}");
    assert_eq!(result["structuredContent"]["in_doubt"], true, "{over_mcp}");
    assert!(
        result["_meta"]["io.undolog/effect_id"].is_string(),
        "{over_mcp}"
    );
    assert_eq!(ran(), 2);
}
