//! The smaller holes, each as it was found: another key reaching into an MCP session, a reused
//! request id leaving a request unanswered, connections held open by slow headers or bodies, an
//! oversized body waited for, and a body framed two ways.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use undolog_types::Role;

use crate::harness::{Bank, TestGateway};

const LEGACY: &str = "2025-11-25";

/// A raw `/mcp` POST with `key` (and the session, when given); status, session header, body.
async fn mcp_post(
    gw: &TestGateway,
    key: &str,
    session: Option<&str>,
    message: &Value,
) -> (u16, Option<String>, String) {
    let mut request = gw
        .http
        .post(gw.mcp_url())
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", LEGACY)
        .json(message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, session, response.text().await.unwrap())
}

/// Opens a 2025-11-25 session with `key`; its id.
async fn open_session(gw: &TestGateway, key: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "hardening-test", "version": "1"}}});
    let (status, session, body) = mcp_post(gw, key, None, &initialize).await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = mcp_post(gw, key, Some(&session), &initialized).await;
    assert!(status < 300, "initialized: {status}");
    session
}

fn tools_list(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_belongs_to_the_principal_that_opened_it() {
    let gw = TestGateway::start("").await;
    let a = gw.key("acme", Role::Agent).await;
    let b = gw.key("globex", Role::Admin).await;
    let a_again = gw.key("acme", Role::Agent).await;
    let session = open_session(&gw, &a.secret).await;

    for (who, key) in [
        ("another org's key", &b),
        ("another key of the same org", &a_again),
    ] {
        let (status, _, body) = mcp_post(&gw, &key.secret, Some(&session), &tools_list(2)).await;
        assert_eq!(status, 404, "{who} used the session: {body}");
        let ended = gw
            .http
            .delete(gw.mcp_url())
            .bearer_auth(&key.secret)
            .header("mcp-session-id", &session)
            .send()
            .await
            .unwrap();
        assert_eq!(ended.status().as_u16(), 404, "{who} ended the session");
    }
    let (status, _, body) = mcp_post(&gw, &a.secret, Some(&session), &tools_list(3)).await;
    assert_eq!(status, 200, "the opener's session lives on: {body}");
    assert!(body.contains("transfer"), "{body}");
}

/// The session belongs to who the credentials prove, not to their text: a client that renews
/// its access token (the same subject, a new token) keeps its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_token_of_the_same_subject_keeps_its_mcp_session() {
    let gw = TestGateway::with_tokens("").await;
    let issuer = gw.issuer.as_ref().expect("an issuer");
    let token = |iat_offset: i64| {
        let mut claims = issuer.claims(&gw.mcp_url(), "renewing", "acme", "undolog:agent");
        claims["iat"] = json!(claims["iat"].as_i64().unwrap() - iat_offset);
        issuer.es256.sign(&claims)
    };
    let (first, renewed) = (token(10), token(0));
    assert_ne!(first, renewed);
    let session = open_session(&gw, &first).await;
    let (status, _, body) = mcp_post(&gw, &renewed, Some(&session), &tools_list(2)).await;
    assert_eq!(status, 200, "the renewed token lost the session: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_still_in_flight_is_refused_not_left_unanswered() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n[tools.hang]\ntier = \"read_only\"\n",
        bank.url
    ))
    .await;
    let key = gw.key("acme", Role::Agent).await;
    let session = open_session(&gw, &key.secret).await;
    let slow = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "hang", "arguments": {"seconds": 1.5}}});
    let first = {
        let (http, url, secret, session) = (
            gw.http.clone(),
            gw.mcp_url(),
            key.secret.clone(),
            session.clone(),
        );
        tokio::spawn(async move {
            let response = http
                .post(url)
                .bearer_auth(secret)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", LEGACY)
                .header("mcp-session-id", session)
                .json(&slow)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let started = Instant::now();
    let (status, _, body) = mcp_post(&gw, &key.secret, Some(&session), &tools_list(7)).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "answered at once"
    );
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert_eq!(error["id"], 7, "{error}");
    let (status, body) = first.await.unwrap();
    assert_eq!(status, 200);
    assert!(
        body.contains("slept"),
        "the first request got its own answer: {body}"
    );
    // Once answered, the id may be used again.
    let (status, _, body) = mcp_post(&gw, &key.secret, Some(&session), &tools_list(7)).await;
    assert_eq!(status, 200, "{body}");
}

/// Sends `head` (and `body`) on a raw connection and reads until the gateway has sent a whole
/// answer head or closed; what it said and how long it took.
async fn raw(gw: &TestGateway, head: &str, body: &[u8], wait: Duration) -> (String, Duration) {
    let address = gw.base.trim_start_matches("http://");
    let mut tcp = TcpStream::connect(address).await.unwrap();
    let started = Instant::now();
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = tcp.read(&mut buf).await {
            answer.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&answer);
            if let Some(end) = text.find("\r\n\r\n") {
                // The head, and a JSON body when its length is given and it has come.
                let length = text[..end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if answer.len() >= end + 4 + length {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(wait, read).await;
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_bad_framing_is_refused_at_once() {
    let gw = TestGateway::start(
        "[limits]\nheader_timeout_secs = 1\nbody_timeout_secs = 1\nmax_body_bytes = 1000\n",
    )
    .await;
    let host = gw.base.trim_start_matches("http://").to_owned();

    // Headers that never end: the connection is closed after the header timeout.
    let (answer, took) = raw(
        &gw,
        &format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nX-Slow: 1\r\n"),
        b"",
        Duration::from_secs(10),
    )
    .await;
    assert!(took < Duration::from_secs(4), "held {took:?}: {answer:?}");
    // A body that never arrives: 408 after the body timeout.
    let head = format!(
        "POST /mcp/tool_call HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         X-UndoLog-Session-Id: s\r\nContent-Length: 100\r\n\r\n"
    );
    let (answer, took) = raw(&gw, &head, b"{\"name\":", Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(took < Duration::from_secs(4), "held {took:?}");
    // Too long by its Content-Length: 413 before a byte of the body is sent.
    let head = format!(
        "POST /mcp/tool_call HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: 5000000\r\n\r\n"
    );
    let (answer, took) = raw(&gw, &head, b"", Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        took < Duration::from_millis(900),
        "answered at once, took {took:?}"
    );
    // Two framings, either order: refused, and nothing of it reaches a route.
    for framing in [
        "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
    ] {
        let head = format!(
            "POST /mcp/tool_call HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             X-UndoLog-Session-Id: smuggled\r\n{framing}\r\n"
        );
        let body = b"40\r\n{\"name\":\"transfer\",\"arguments\":{\"from_account\":\"a\"}}      \r\n0\r\n\r\n";
        let (answer, _) = raw(&gw, &head, body, Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{framing}: {answer}");
        assert!(
            answer.contains("Content-Length and Transfer-Encoding"),
            "{answer}"
        );
    }
    let sessions = gw.get("/v1/sessions").await;
    assert_eq!(sessions, json!([]), "no call was recorded");
}
