//! Bad input gets the error the spec names — never a 500 with internals — and leaves nothing in
//! the log.

use serde_json::{Value, json};
use undolog_types::OrgId;

use crate::harness::TestGateway;

const MODERN: &str = "2026-07-28";

/// A stateless 2026-07-28 request, with the headers and `_meta` that revision requires.
async fn modern(
    gw: &TestGateway,
    method: &str,
    params: Value,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut request = gw
        .http
        .post(gw.mcp_url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        request = request.header("mcp-name", name);
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.body(body.to_string()).send().await;
    answer(method, response).await
}

async fn raw(gw: &TestGateway, path: &str, body: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = gw
        .http
        .post(format!("{}{path}", gw.base))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        // A refused request may end its connection (413 before the body is read); a fresh one
        // each time keeps the next request from meeting a connection the gateway has closed.
        .header("connection", "close");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.body(body.to_owned()).send().await;
    answer(path, response).await
}

/// The status and body of an answer; a transport error fails the test with what was asked.
async fn answer(asked: &str, response: reqwest::Result<reqwest::Response>) -> (u16, String) {
    let response = response.unwrap_or_else(|e| panic!("{asked}: no answer: {e:?}"));
    let status = response.status().as_u16();
    let text = response
        .text()
        .await
        .unwrap_or_else(|e| panic!("{asked}: the answer broke off: {e:?}"));
    (status, text)
}

fn jsonrpc_code(body: &str) -> Option<i64> {
    let json = body
        .lines()
        .find_map(|l| l.strip_prefix("data:").map(str::trim))
        .unwrap_or(body);
    serde_json::from_str::<Value>(json).ok()?["error"]["code"].as_i64()
}

fn no_internals(body: &str) {
    for leak in ["sqlx", "panicked", "SELECT", "stack backtrace"] {
        assert!(!body.contains(leak), "the answer leaks {leak}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_unknown_oversize_and_wrong_version_requests_get_the_specs_errors() {
    let gw = TestGateway::start("[limits]\nmax_body_bytes = 65536\n").await;
    // (what, the answer, the HTTP status the spec names, the JSON-RPC code when there is one)
    type Case = (&'static str, (u16, String), u16, Option<i64>);
    let cases: Vec<Case> = vec![
        (
            "malformed JSON-RPC",
            raw(
                &gw,
                "/mcp",
                "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ",
                &[("mcp-protocol-version", MODERN)],
            )
            .await,
            400,
            Some(-32700),
        ),
        (
            "unknown method",
            modern(&gw, "tools/frobnicate", json!({}), &[]).await,
            404, // 2026-07-28 maps method-not-found to HTTP 404
            Some(-32601),
        ),
        (
            "unknown tool",
            modern(
                &gw,
                "tools/call",
                json!({"name": "no_such_tool", "arguments": {}}),
                &[],
            )
            .await,
            200,
            Some(-32602),
        ),
        (
            "oversize body",
            modern(
                &gw,
                "tools/call",
                json!({"name": "transfer", "arguments": {"pad": "x".repeat(70_000)}}),
                &[],
            )
            .await,
            413,
            None,
        ),
        (
            "unsupported protocol version header",
            raw(
                &gw,
                "/mcp",
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
                &[("mcp-protocol-version", "1999-01-01")],
            )
            .await,
            400,
            None,
        ),
    ];
    for (what, (status, body), expected_status, expected_code) in cases {
        assert_eq!(status, expected_status, "{what}: {body}");
        assert_ne!(status, 500, "{what}");
        no_internals(&body);
        if let Some(code) = expected_code {
            assert_eq!(jsonrpc_code(&body), Some(code), "{what}: {body}");
        }
    }
    let org = OrgId::new("default").unwrap();
    assert!(
        gw.gateway
            .engine()
            .unwrap()
            .sessions(&org)
            .await
            .unwrap()
            .is_empty(),
        "nothing recorded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_tool_call_refuses_bad_bodies_and_records_nothing() {
    let gw = TestGateway::start("").await;
    let too_long = "s".repeat(300);
    let session = [("x-undolog-session-id", "s-1")];
    for (what, body, headers, expected) in [
        ("not JSON", "{nope", &session[..], 400),
        ("no name", r#"{"arguments": {}}"#, &session[..], 400),
        (
            "arguments not an object",
            r#"{"name": "transfer", "arguments": [1]}"#,
            &session[..],
            400,
        ),
        (
            "integer a double cannot carry",
            r#"{"name": "transfer", "arguments": {"amount": 12345678901234567890123}}"#,
            &session[..],
            400,
        ),
        (
            "a session header that is no session id",
            r#"{"name": "get_balance", "arguments": {"account": "bob"}}"#,
            &[("x-undolog-session-id", too_long.as_str())][..],
            400,
        ),
        (
            "unknown tool",
            r#"{"name": "nope", "arguments": {}}"#,
            &session[..],
            404,
        ),
    ] {
        let (status, answer) = raw(&gw, "/mcp/tool_call", body, headers).await;
        assert_eq!(status, expected, "{what}: {answer}");
        no_internals(&answer);
        let error: Value =
            serde_json::from_str(&answer).unwrap_or_else(|_| panic!("{what}: {answer}"));
        assert!(
            error["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{what}: {answer}"
        );
    }
    let org = OrgId::new("default").unwrap();
    assert!(
        gw.gateway
            .engine()
            .unwrap()
            .sessions(&org)
            .await
            .unwrap()
            .is_empty(),
        "nothing recorded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_a_key_exists_missing_or_wrong_credentials_are_refused_and_orgs_stay_apart() {
    let gw = TestGateway::start("").await;
    let acme = gw.key("acme", undolog_types::Role::Admin).await;
    let body = r#"{"name": "get_balance", "arguments": {"account": "bob"}}"#;
    let session = ("x-undolog-session-id", "s-1");
    let bearer = format!("Bearer {}", acme.secret);
    for (what, headers, expected) in [
        ("no credentials", vec![session], 401),
        (
            "unknown key",
            vec![session, ("authorization", "Bearer ul_00000000_feed")],
            401,
        ),
        (
            "not a bearer",
            vec![session, ("authorization", "Basic abc")],
            401,
        ),
        (
            "org header disagrees",
            vec![
                session,
                ("authorization", &bearer),
                ("x-undolog-org-id", "other"),
            ],
            403,
        ),
        (
            "a good key",
            vec![
                session,
                ("authorization", &bearer),
                ("x-undolog-org-id", "acme"),
            ],
            200,
        ),
    ] {
        let (status, answer) = raw(&gw, "/mcp/tool_call", body, &headers).await;
        assert_eq!(status, expected, "{what}: {answer}");
        no_internals(&answer);
    }
    let (status, _) = modern(&gw, "tools/list", json!({}), &[]).await;
    assert_eq!(status, 401, "MCP needs the key too");
    let (status, listed) =
        modern(&gw, "tools/list", json!({}), &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{listed}");

    // The call landed in acme's log, and the default org sees nothing of it.
    let engine = gw.gateway.engine().unwrap();
    assert_eq!(
        engine
            .sessions(&OrgId::new("acme").unwrap())
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        engine
            .sessions(&OrgId::new("default").unwrap())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keys_the_gateway_refuses_to_listen_beyond_loopback() {
    let gw = TestGateway::start("").await;
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let refused = undolog_gateway::serve_http(gw.gateway.clone(), listener, async {})
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("no API keys exist"), "{refused}");
    assert!(refused.contains("undolog keys create"), "{refused}");
}

/// A body refused by its `Content-Length` is answered 413 with `Connection: close`, so a client
/// never sends its next request on a connection the gateway is closing; the body is read (up to a
/// bound) before the answer, so the client reads the 413 instead of a reset. Each request goes on
/// the client's pooled connections, as a program's would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_body_is_answered_413_and_the_next_request_on_that_client_is_served() {
    let gw = TestGateway::start("[limits]\nmax_body_bytes = 65536\n").await;
    for size in [70_000, 1 << 20, 4 << 20] {
        for attempt in 0..10 {
            let pad = json!({"name": "transfer", "arguments": {"pad": "x".repeat(size)}});
            let (status, answer) = modern(&gw, "tools/call", pad, &[]).await;
            assert_eq!(status, 413, "{size} bytes, attempt {attempt}: {answer}");
            assert!(answer.contains("limits.max_body_bytes"), "{answer}");
            let (status, answer) = modern(&gw, "tools/list", json!({}), &[]).await;
            assert_eq!(
                status, 200,
                "after {size} bytes, attempt {attempt}: {answer}"
            );
        }
    }
}
