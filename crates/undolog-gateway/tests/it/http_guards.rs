//! What `/mcp` refuses before any MCP handling: a foreign `Host` or `Origin` on a loopback-bound
//! gateway (DNS rebinding), and 2026-07-28 routing headers that disagree with the body.

use serde_json::{Value, json};

use crate::harness::TestGateway;

const MODERN: &str = "2026-07-28";

/// Extra headers, as (name, value).
type Headers<'a> = Vec<(&'a str, &'a str)>;
/// (what, extra headers, expected HTTP status).
type Case<'a> = (&'a str, Headers<'a>, u16);

/// A stateless 2026-07-28 `tools/list` or `tools/call` with these headers (the routing headers
/// that agree with the body unless `headers` replaces them); the HTTP status.
async fn post(gw: &TestGateway, method: &str, name: Option<&str>, headers: &[(&str, &str)]) -> u16 {
    let mut params = json!({
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    });
    if let Some(name) = name {
        params["name"] = Value::from(name);
        params["arguments"] = json!({"account": "alice"});
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut all: Vec<(&str, &str)> = vec![
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", method),
    ];
    if let Some(name) = name {
        all.push(("mcp-name", name));
    }
    for (k, v) in headers {
        all.retain(|(have, _)| !have.eq_ignore_ascii_case(k));
        all.push((k, v));
    }
    let mut request = gw.http.post(gw.mcp_url());
    for (k, v) in all {
        request = request.header(k, v);
    }
    request
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_loopback_a_foreign_host_or_origin_is_refused() {
    let gw = TestGateway::start("").await;
    let port = gw.base.rsplit(':').next().unwrap().to_owned();
    let local_host = format!("localhost:{port}");
    let cases: &[Case] = &[
        ("no Origin, loopback Host", vec![], 200),
        ("Host localhost", vec![("host", &local_host)], 200),
        (
            "a local page's Origin",
            vec![("origin", "http://localhost:3000")],
            200,
        ),
        ("foreign Host", vec![("host", "evil.example")], 403),
        (
            "foreign Host with port",
            vec![("host", "evil.example:80")],
            403,
        ),
        (
            "foreign Origin",
            vec![("origin", "http://evil.example")],
            403,
        ),
        (
            "both foreign, as a rebinding page sends",
            vec![("host", "evil.example"), ("origin", "http://evil.example")],
            403,
        ),
    ];
    for (what, headers, want) in cases {
        let got = post(&gw, "tools/list", None, headers).await;
        assert_eq!(got, *want, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_hosts_and_origins_replace_the_loopback_defaults() {
    let gw = TestGateway::start(
        "[http]\nallowed_hosts = [\"gateway.test\"]\nallowed_origins = [\"https://app.test\"]\n",
    )
    .await;
    let cases: &[Case] = &[
        ("the configured Host", vec![("host", "gateway.test")], 200),
        (
            "the configured Origin",
            vec![("host", "gateway.test"), ("origin", "https://app.test")],
            200,
        ),
        ("a Host not listed", vec![("host", "other.test")], 403),
        (
            "an Origin not listed",
            vec![
                ("host", "gateway.test"),
                ("origin", "http://localhost:3000"),
            ],
            403,
        ),
    ];
    for (what, headers, want) in cases {
        let got = post(&gw, "tools/list", None, headers).await;
        assert_eq!(got, *want, "{what}");
    }

    let open =
        TestGateway::start("[http]\nallowed_hosts = [\"*\"]\nallowed_origins = [\"*\"]\n").await;
    let headers = [
        ("host", "anything.test"),
        ("origin", "https://anywhere.test"),
    ];
    assert_eq!(
        post(&open, "tools/list", None, &headers).await,
        200,
        "[\"*\"] accepts any"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_headers_that_disagree_with_the_body_are_refused() {
    let gw = TestGateway::start("[tools.get_balance]\ntier = \"read_only\"\n").await;
    let cases: &[(&str, &str, Option<&str>, Headers, u16)] = &[
        ("agreeing tools/list", "tools/list", None, vec![], 200),
        (
            "agreeing tools/call",
            "tools/call",
            Some("get_balance"),
            vec![],
            200,
        ),
        (
            "Mcp-Method names another method",
            "tools/call",
            Some("get_balance"),
            vec![("mcp-method", "tools/list")],
            400,
        ),
        (
            "Mcp-Name names another tool",
            "tools/call",
            Some("get_balance"),
            vec![("mcp-name", "transfer")],
            400,
        ),
        (
            "Mcp-Method on a body of another method",
            "tools/list",
            None,
            vec![("mcp-method", "prompts/list")],
            400,
        ),
    ];
    for (what, method, name, headers, want) in cases {
        let got = post(&gw, method, *name, headers).await;
        assert_eq!(got, *want, "{what}");
    }
    let effects = gw.get("/v1/sessions").await;
    let calls = effects.as_array().map_or(0, Vec::len);
    assert!(
        calls <= 1,
        "only the agreeing call may be recorded: {effects}"
    );
}
