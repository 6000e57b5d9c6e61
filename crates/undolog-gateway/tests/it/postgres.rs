//! The gateway on PostgreSQL: orgs apart through every API, and events that cross gateways.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use undolog_store::scratch::{ScratchDatabase, on_server};

use crate::harness::TestGateway;

/// A database of its own on the machine's PostgreSQL, dropped at the end.
pub(crate) fn fresh_database() -> ScratchDatabase {
    ScratchDatabase::new("undolog_test_gwit")
}

async fn send(gw: &TestGateway, method: &str, path: &str, key: &str, body: Value) -> (u16, Value) {
    let request = match method {
        "GET" => gw.http.get(format!("{}{path}", gw.base)),
        _ => gw.http.post(format!("{}{path}", gw.base)).json(&body),
    };
    let request = if key.is_empty() {
        request
    } else {
        request.bearer_auth(key)
    };
    let response = request
        .header("x-undolog-session-id", "a-1")
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_org_cannot_see_approve_or_undo_anothers_effects_through_any_api() {
    let db = fresh_database();
    let gw = TestGateway::start_on("", Some(db.url())).await;
    let a = gw.key("org-a", undolog_types::Role::Admin).await.secret;
    let b = gw.key("org-b", undolog_types::Role::Admin).await.secret;

    let transfer = json!({"name": "transfer", "arguments": {"from_account": "alice", "to_account": "bob", "amount": 1}});
    let (status, done) = send(&gw, "POST", "/mcp/tool_call", &a, transfer).await;
    assert_eq!(status, 200, "{done}");
    let effect = done["effect_id"].as_str().unwrap().to_owned();
    let email = json!({"name": "send_email", "arguments": {"to": "x@example.com", "subject": "s"}});
    let (status, held) = send(&gw, "POST", "/mcp/tool_call", &a, email).await;
    assert_eq!(status, 202, "{held}");
    let approval = held["approval_id"].as_str().unwrap().to_owned();

    // Org B, with its own valid key, finds none of it.
    let none = Value::Null;
    let reason = json!({"reason": "not mine"});
    let result = json!({"result": {}, "lease_token": format!("lt_{}", "0".repeat(64))});
    for (method, path, body, expected) in [
        ("GET", "/v1/sessions".to_owned(), &none, 200),
        ("GET", "/v1/sessions/a-1/effects".to_owned(), &none, 404),
        ("GET", "/v1/sessions/a-1/export".to_owned(), &none, 404),
        ("GET", format!("/v1/effects/{effect}"), &none, 404),
        ("GET", "/v1/approvals".to_owned(), &none, 200),
        ("GET", format!("/v1/approvals/{approval}"), &none, 404),
        (
            "POST",
            format!("/v1/approvals/{approval}/approve"),
            &reason,
            404,
        ),
        (
            "POST",
            format!("/v1/approvals/{approval}/deny"),
            &reason,
            404,
        ),
        ("POST", "/v1/sessions/a-1/undo".to_owned(), &none, 404),
        ("POST", format!("/v1/effects/{effect}/commit"), &result, 404),
        ("GET", "/v1/effects/in_doubt".to_owned(), &none, 200),
    ] {
        let (status, answer) = send(&gw, method, &path, &b, body.clone()).await;
        assert_eq!(status, expected, "{method} {path}: {answer}");
        if status == 200 {
            assert_eq!(answer, json!([]), "{method} {path} leaked: {answer}");
        }
    }
    // Org A still has it all, untouched.
    let (_, approvals) = send(&gw, "GET", "/v1/approvals?status=pending", &a, Value::Null).await;
    assert_eq!(approvals.as_array().unwrap().len(), 1, "{approvals}");
    let (_, effects) = send(&gw, "GET", "/v1/sessions/a-1/effects", &a, Value::Null).await;
    assert_eq!(effects.as_array().unwrap().len(), 2, "{effects}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_a_call_at_one_gateway_reach_subscribers_of_another() {
    let db = fresh_database();
    let a = TestGateway::start_on("", Some(db.url())).await;
    let b = TestGateway::start_on("", Some(db.url())).await;
    let events = a
        .http
        .get(format!("{}/events", a.base))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    // The listener connects in the background; give it a moment before the call.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, done) = send(
        &b,
        "POST",
        "/mcp/tool_call",
        "",
        json!({"name": "transfer", "arguments": {"from_account": "alice", "to_account": "bob", "amount": 2}}),
    )
    .await;
    assert_eq!(status, 200, "{done}");

    let mut stream = events.bytes_stream();
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains("effect_committed") {
        let Ok(Some(chunk)) = tokio::time::timeout_at(deadline, stream.next()).await else {
            panic!("gateway A never heard of B's call: {seen}");
        };
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(seen.contains(done["effect_id"].as_str().unwrap()), "{seen}");
}

/// The database goes away while a tool runs upstream: the client is told the tool ran but its
/// outcome is not recorded, and the pending effect survives to be resolved — nothing is lost or
/// silently marked done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_lost_mid_call_leaves_the_effect_pending_and_says_so() {
    let db = fresh_database();
    let bank = crate::harness::Bank::start().await;
    let gw = TestGateway::start_on(
        &format!(
            "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n[tools.hang]\ntier = \"compensable\"\n",
            bank.url
        ),
        Some(db.url()),
    )
    .await;
    let mut client = crate::harness::Client::connect(
        "mcp2",
        "legacy",
        &gw.mcp_url(),
        &["X-UndoLog-Session-Id: lost"],
    )
    .await;
    let call = client.start_call("hang", json!({"seconds": 2})).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    on_server(&format!(
        "ALTER DATABASE {} ALLOW_CONNECTIONS false",
        db.name()
    ));
    on_server(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}'",
        db.name()
    ));
    let answer = client.answer(call).await;
    on_server(&format!(
        "ALTER DATABASE {} ALLOW_CONNECTIONS true",
        db.name()
    ));
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(error.contains("could not be recorded"), "{answer}");

    let effects = gw.get("/v1/sessions/lost/effects").await;
    let effect = &effects.as_array().unwrap()[0];
    assert_eq!(effect["tool"], "hang");
    assert_eq!(effect["state"], "pending", "kept for an operator: {effect}");
    assert!(
        error.contains(effect["id"].as_str().unwrap()),
        "the client is told which: {answer}"
    );
}
