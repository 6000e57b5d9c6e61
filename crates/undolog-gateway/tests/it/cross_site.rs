//! A web page in the operator's browser must not drive the gateway: not through DNS rebinding
//! (a foreign `Host`), not from another site (a foreign `Origin`), and not with a simple form
//! POST (no `application/json`), on every route of the open-mode default.

use serde_json::{Value, json};

use crate::harness::TestGateway;

/// (method, path, body) of every kind of route a page would aim at.
fn routes(approval: &str) -> Vec<(&'static str, String, Option<Value>)> {
    vec![
        ("GET", "/v1/approvals?status=pending".into(), None),
        ("GET", "/v1/sessions".into(), None),
        ("GET", "/events".into(), None),
        ("GET", "/".into(), None),
        (
            "POST",
            format!("/v1/approvals/{approval}/approve"),
            Some(json!({})),
        ),
        ("POST", "/v1/sessions/s-1/undo".into(), Some(json!({}))),
        (
            "POST",
            "/mcp/tool_call".into(),
            Some(json!({"name": "get_balance", "arguments": {"account": "alice"}})),
        ),
        (
            "POST",
            "/v1/effects".into(),
            Some(json!({"session_id": "s-2", "tool": "t", "tier": "read_only"})),
        ),
        (
            "POST",
            "/mcp".into(),
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})),
        ),
    ]
}

async fn send(
    gw: &TestGateway,
    method: &str,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> u16 {
    let url = format!("{}{path}", gw.base);
    let mut request = match method {
        "GET" => gw.http.get(url),
        _ => gw.http.post(url),
    };
    request = request
        .header("x-undolog-session-id", "s-1")
        .header("accept", "application/json, text/event-stream");
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    response.status().as_u16()
}

async fn held_approval(gw: &TestGateway) -> String {
    let (status, held) = gw
        .rest_call(
            None,
            "s-1",
            "send_email",
            json!({"to": "a@example.com", "subject": "x"}),
        )
        .await;
    assert_eq!(status, 202, "{held}");
    held["approval_id"].as_str().unwrap().to_owned()
}

async fn still_pending(gw: &TestGateway) -> usize {
    gw.get("/v1/approvals?status=pending")
        .await
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebinding_or_cross_site_page_is_refused_on_every_route() {
    let gw = TestGateway::start("").await;
    let approval = held_approval(&gw).await;
    let attacks: &[(&str, Vec<(&str, &str)>)] = &[
        (
            "DNS rebinding: the page's own Host",
            vec![("host", "evil.example:8080")],
        ),
        (
            "a foreign page's Origin",
            vec![("origin", "https://evil.example")],
        ),
        (
            "both, as a rebinding page sends",
            vec![("host", "evil.example"), ("origin", "http://evil.example")],
        ),
        (
            "a cross-site fetch",
            vec![
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-mode", "no-cors"),
            ],
        ),
    ];
    for (method, path, body) in routes(&approval) {
        for (attack, headers) in attacks {
            let status = send(&gw, method, &path, body.as_ref(), headers).await;
            assert_eq!(status, 403, "{attack}: {method} {path}");
        }
    }
    assert_eq!(still_pending(&gw).await, 1, "nothing was approved");
    let sessions = gw.get("/v1/sessions").await;
    assert_eq!(
        sessions.as_array().unwrap().len(),
        1,
        "no tool ran, no SDK effect: {sessions}"
    );
    assert_eq!(sessions[0]["state"], "active", "nothing was undone");
}

/// A plain HTML form can POST `text/plain`, urlencoded or multipart bodies to any site without
/// asking first; none of them may change anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simple_form_post_changes_nothing() {
    let gw = TestGateway::start("").await;
    let approval = held_approval(&gw).await;
    let forms = [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ];
    for (method, path, body) in routes(&approval) {
        if method != "POST" {
            continue;
        }
        for form in forms {
            let response = gw
                .http
                .post(format!("{}{path}", gw.base))
                .header("content-type", form)
                .header("x-undolog-session-id", "s-1")
                .body(body.as_ref().map(Value::to_string).unwrap_or_default())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 415, "{form}: POST {path}");
            let answer: Value = response.json().await.unwrap();
            assert_eq!(answer["code"], "json_required", "{answer}");
        }
    }
    assert_eq!(still_pending(&gw).await, 1, "nothing was approved");
    assert_eq!(gw.get("/v1/sessions").await[0]["state"], "active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_machines_pages_and_programs_still_get_in() {
    let gw = TestGateway::start("").await;
    let approval = held_approval(&gw).await;
    let port = gw.base.rsplit(':').next().unwrap().to_owned();
    let local = format!("http://localhost:{port}");
    let same_machine: &[(&str, Vec<(&str, &str)>)] = &[
        ("a program (no Origin)", vec![]),
        (
            "the dashboard (same origin)",
            vec![("origin", &local), ("sec-fetch-site", "same-origin")],
        ),
        (
            "another local page",
            vec![("origin", "http://127.0.0.1:3000")],
        ),
    ];
    for (who, headers) in same_machine {
        for (method, path, body) in routes(&approval) {
            // Approval is decided below; /mcp and /events are served as http_guards and events test.
            if path.contains("/approve")
                || path.contains("/undo")
                || path == "/events"
                || path == "/mcp"
            {
                continue;
            }
            let status = send(&gw, method, &path, body.as_ref(), headers).await;
            assert!(status < 400, "{who}: {method} {path} answered {status}");
        }
    }
    let path = format!("/v1/approvals/{approval}/approve");
    let status = send(&gw, "POST", &path, Some(&json!({})), &[("origin", &local)]).await;
    assert_eq!(status, 200, "the dashboard approves");
}
