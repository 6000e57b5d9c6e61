//! Stateless 2026-07-28 calls that want only their answer skip the MCP server and client
//! machinery (`http::stateless`, `upstream::direct`): they must answer exactly what the full path
//! answers, reach the upstream as the full path would send them, and leave every request they do
//! not fully understand to the MCP server.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{BANK_TOOLS, Bank, TestGateway, last_message};

const MODERN: &str = "2026-07-28";

/// A `tools/call` as a stateless client sends it, with `extra_meta` in its `_meta`.
fn call_body(tool: &str, arguments: Value, extra_meta: Value) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"x-test": {}}},
    });
    for (k, v) in extra_meta.as_object().cloned().unwrap_or_default() {
        meta[k] = v;
    }
    json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments, "_meta": meta}})
}

type Headers = Vec<(&'static str, String)>;

/// The standard headers of a stateless `tools/call` of `tool`.
fn headers(tool: &str) -> Headers {
    vec![
        ("accept", "application/json, text/event-stream".into()),
        ("content-type", "application/json".into()),
        ("mcp-protocol-version", MODERN.into()),
        ("mcp-method", "tools/call".into()),
        ("mcp-name", tool.into()),
    ]
}

/// Posts `body` with `headers`: the status, the content type, and the JSON-RPC message (a JSON
/// body, or an event stream's last message).
async fn post(gw: &TestGateway, headers: &[(&str, String)], body: &Value) -> (u16, String, Value) {
    let mut request = reqwest::Client::new()
        .post(gw.mcp_url())
        .timeout(Duration::from_secs(20));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status().as_u16();
    let kind = (response.headers().get("content-type"))
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    let message = serde_json::from_str(last_message(&text)).unwrap_or(Value::Null);
    (status, kind, message)
}

/// The `tools/call` requests the bank has heard, as `bank_server.py --log-requests` wrote them.
fn heard_calls(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["body"]["method"] == "tools/call")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_wants_only_its_answer_is_answered_in_json_and_posted_upstream_as_the_client_speaks()
 {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let bank = Bank::start_with(&["--log-requests".as_ref(), log.as_os_str()]).await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{BANK_TOOLS}",
        bank.url
    ))
    .await;
    let transfer = json!({"from_account": "alice", "to_account": "bob", "amount": 7});
    let plain = call_body("transfer", transfer.clone(), json!({}));
    let (status, kind, first) = post(&gw, &headers("transfer"), &plain).await;
    assert_eq!(
        (status, kind.as_str()),
        (200, "application/json"),
        "{first}"
    );
    assert_eq!(first["id"], 9);
    assert_eq!(first["result"]["isError"], false, "{first}");

    // Upstream it went out in the client's revision, with the gateway's name and the client's
    // capabilities, and with no progress token: nobody would hear the progress.
    let heard = heard_calls(&log);
    assert_eq!(heard.len(), 1, "{heard:?}");
    let (headers_sent, meta) = (&heard[0]["headers"], &heard[0]["body"]["params"]["_meta"]);
    assert_eq!(headers_sent["mcp-protocol-version"], MODERN);
    assert_eq!(headers_sent["mcp-method"], "tools/call");
    assert_eq!(headers_sent["mcp-name"], "transfer");
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], MODERN);
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "undolog-gateway"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"extensions": {"x-test": {}}})
    );
    assert_eq!(meta.get("progressToken"), None, "{meta}");

    // The same call again is replayed, and answered as the first was.
    let (status, _, again) = post(&gw, &headers("transfer"), &plain).await;
    assert_eq!(status, 200);
    assert_eq!(
        again["result"]["_meta"]["io.undolog/replayed"], true,
        "{again}"
    );
    assert_eq!(
        again["result"]["_meta"]["io.undolog/effect_id"],
        first["result"]["_meta"]["io.undolog/effect_id"]
    );
    assert_eq!(
        heard_calls(&log).len(),
        1,
        "a replay never reaches the upstream"
    );

    // A call that follows its progress takes the full path: an event stream, and upstream a
    // progress token of the gateway's own.
    let progress = json!({"progressToken": "p-1"});
    let followed = call_body("get_balance", json!({"account": "bob"}), progress);
    let (status, kind, answer) = post(&gw, &headers("get_balance"), &followed).await;
    assert_eq!(
        (status, kind.as_str()),
        (200, "text/event-stream"),
        "{answer}"
    );
    assert_eq!(answer["result"]["structuredContent"]["balance"], 7);
    let heard = heard_calls(&log);
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(
        heard[1]["body"]["params"]["_meta"]["progressToken"].is_string()
            || heard[1]["body"]["params"]["_meta"]["progressToken"].is_number()
    );
}

/// Each request this path does not take, and what the MCP server answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_it_does_not_fully_understand_get_the_mcp_servers_own_answers() {
    let gw = TestGateway::start("").await;
    let balance = |meta: Value| call_body("get_balance", json!({"account": "alice"}), meta);
    let with = |name: &'static str, value: &str| {
        let mut h = headers("get_balance");
        h.retain(|(n, _)| *n != name);
        h.push((name, value.to_owned()));
        h
    };
    let mut no_capabilities = balance(json!({}));
    let meta = &mut no_capabilities["params"]["_meta"];
    meta.as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    // (what, headers, body, HTTP status, JSON-RPC error code or none)
    let cases: Vec<(&str, Headers, Value, u16, Option<i64>)> = vec![
        (
            "Mcp-Name names another tool",
            with("mcp-name", "transfer"),
            balance(json!({})),
            400,
            Some(-32020),
        ),
        (
            "the header's revision is not the _meta's",
            with("mcp-protocol-version", "2025-11-25"),
            balance(json!({})),
            400,
            Some(-32020),
        ),
        (
            "_meta without the client's capabilities",
            headers("get_balance"),
            no_capabilities,
            400,
            Some(-32602),
        ),
        (
            "an answer in JSON only is accepted",
            with("accept", "application/json"),
            balance(json!({})),
            406,
            None,
        ),
        (
            "a tool nobody offers",
            with("mcp-name", "nope"),
            call_body("nope", json!({}), json!({})),
            200,
            Some(-32602),
        ),
        (
            "a log level asked for (the full path answers, in an event stream)",
            headers("get_balance"),
            balance(json!({"io.modelcontextprotocol/logLevel": "debug"})),
            200,
            None,
        ),
    ];
    for (what, headers, body, status, code) in cases {
        let (got, kind, answer) = post(&gw, &headers, &body).await;
        assert_eq!(got, status, "{what}: {answer}");
        assert_eq!(answer["error"]["code"].as_i64(), code, "{what}: {answer}");
        if status == 200 && code.is_none() {
            assert_eq!(kind, "text/event-stream", "{what}");
        }
    }
}
