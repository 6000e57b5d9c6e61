//! What an upstream sends back during a call — elicitation, sampling, log messages — reaches
//! the client whose call caused it, and no one else: not a client of another org, not another
//! client of the same org, however the calls interleave. What cannot be tied to one call is
//! refused, never guessed.

use serde_json::{Value, json};
use undolog_types::Role;

use crate::harness::{BANK_TOOLS, Bank, Client, TestGateway, stdio_bank_toml};

const CHATTY: &str = "[tools.confirm]\ntier = \"read_only\"\n[tools.note]\ntier = \"read_only\"\n\
                      [tools.ask]\ntier = \"read_only\"\n";

/// One client: its name, and the MCP client speaking for it.
struct Party {
    name: &'static str,
    client: Client,
}

async fn party(gw: &TestGateway, name: &'static str, key: &crate::harness::Credential) -> Party {
    let auth = format!("Authorization: Bearer {}", key.secret);
    let session = format!("X-UndoLog-Session-Id: run-{name}");
    // Each answers after a pause, so that every call is in flight while the others ask.
    let options = [
        "--elicit-reply",
        name,
        "--elicit-delay",
        "1.0",
        "--sampling-reply",
        name,
    ];
    let client = Client::connect_with(
        "mcp2",
        "legacy",
        &gw.mcp_url(),
        &[&auth, &session],
        &options,
    )
    .await;
    Party { name, client }
}

/// Every party calls `tool` with an argument naming itself, all at once; the answers in order.
async fn all_at_once(parties: &mut [Party], tool: &str, arg: &str) -> Vec<Value> {
    let mut ids = Vec::new();
    for p in parties.iter_mut() {
        let args = json!({ arg: format!("for {}: your password?", p.name) });
        ids.push(p.client.start_call(tool, args).await);
    }
    let mut answers = Vec::new();
    for (p, id) in parties.iter_mut().zip(ids) {
        answers.push(p.client.answer(id).await);
    }
    answers
}

/// Everything a party heard, and everything recorded in its org, names only that party.
fn only_its_own(name: &str, others: &[&str], what: &Value) {
    let text = what.to_string();
    assert!(
        text.contains(&format!("for {name}")),
        "{name} heard nothing of its own: {text}"
    );
    for other in others {
        assert!(
            !text.contains(&format!("for {other}")),
            "{name} heard {other}'s: {text}"
        );
        assert!(
            !text.contains(&format!("\"{other} | saw")),
            "{other}'s answer reached {name}: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_orgs_and_two_clients_of_one_org_each_hear_only_their_own() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{BANK_TOOLS}{CHATTY}",
        bank.url
    ))
    .await;
    let acme = gw.key("acme", Role::Agent).await;
    let globex = gw.key("globex", Role::Agent).await;
    let mut parties = vec![
        party(&gw, "A", &acme).await,
        party(&gw, "B", &globex).await,
        // A second client of acme, with the same key: another MCP session.
        party(&gw, "C", &acme).await,
    ];
    let names = ["A", "B", "C"];

    for (tool, arg) in [
        ("confirm", "question"),
        ("ask", "question"),
        ("note", "text"),
    ] {
        let answers = all_at_once(&mut parties, tool, arg).await;
        for (p, answer) in parties.iter().zip(&answers) {
            assert!(answer.get("ok").is_some(), "{tool} of {}: {answer}", p.name);
            let others: Vec<&str> = names.iter().copied().filter(|n| *n != p.name).collect();
            only_its_own(p.name, &others, &answer["ok"]["structuredContent"]);
            if tool != "note" {
                let said = &answer["ok"]["structuredContent"];
                let reply = said["answer"].as_str().unwrap_or_default();
                assert!(
                    reply.starts_with(&format!("{} | saw: for {}", p.name, p.name)),
                    "{tool}: {said}"
                );
            }
        }
    }
    for p in parties.iter_mut() {
        // A log message travels on the client's standalone stream, beside the call's answer:
        // it may arrive a moment after it.
        let mut heard = p.client.heard().await;
        for _ in 0..50 {
            if !heard["logs"].as_array().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            heard = p.client.heard().await;
        }
        let others: Vec<&str> = names.iter().copied().filter(|n| *n != p.name).collect();
        only_its_own(p.name, &others, &heard);
        assert_eq!(
            heard["logs"].as_array().unwrap().len(),
            1,
            "{}: {heard}",
            p.name
        );
        assert_eq!(
            heard["asked"].as_array().unwrap().len(),
            2,
            "{}: {heard}",
            p.name
        );
    }
    // What each org's log recorded is that org's own answers only.
    for (key, own, others) in [(&acme, ["A", "C"], ["B"]), (&globex, ["B", "B"], ["A"])] {
        let (_, effects) = gw
            .get_as(Some(key), &format!("/v1/sessions/run-{}/effects", own[0]))
            .await;
        only_its_own(own[0], &others, &effects);
    }
}

/// A stdio upstream has one stream for everything: a message it sends while calls of two
/// clients are in flight cannot be tied to either, and is refused rather than guessed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_stdio_a_message_that_cannot_be_attributed_reaches_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let gw = TestGateway::start(&format!(
        "{}{BANK_TOOLS}{CHATTY}",
        stdio_bank_toml("bank", &dir.path().join("bank.json"))
    ))
    .await;
    let acme = gw.key("acme", Role::Agent).await;
    let globex = gw.key("globex", Role::Agent).await;
    let mut parties = vec![party(&gw, "A", &acme).await, party(&gw, "B", &globex).await];

    // Alone, a client's elicitation is its own.
    let id = parties[0]
        .client
        .start_call("confirm", json!({"question": "for A: alone?"}))
        .await;
    let alone = parties[0].client.answer(id).await;
    assert_eq!(
        alone["ok"]["structuredContent"]["answer"], "A | saw: for A: alone?",
        "{alone}"
    );

    // Together, whatever arrives while both are in flight reaches neither of the wrong party.
    let answers = all_at_once(&mut parties, "confirm", "question").await;
    for (p, answer) in parties.iter_mut().zip(&answers) {
        let other = if p.name == "A" { "B" } else { "A" };
        let text = answer.to_string();
        assert!(
            !text.contains(&format!("for {other}")),
            "{}: {text}",
            p.name
        );
        let heard = p.client.heard().await.to_string();
        assert!(
            !heard.contains(&format!("for {other}")),
            "{} heard {other}'s: {heard}",
            p.name
        );
    }
}

/// A 2025-11-25 client that never opens the standalone GET stream still hears an upstream's
/// elicitation during its call: it comes on the call's own stream, and the answer is posted back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_rides_the_calls_own_stream() {
    use futures::StreamExt;

    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{BANK_TOOLS}{CHATTY}",
        bank.url
    ))
    .await;
    let post = |session: Option<&str>, body: Value| {
        let mut request = gw
            .http
            .post(gw.mcp_url())
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "no-get-stream", "version": "1"}}});
    let opened = post(None, initialize).await.unwrap();
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    drop(opened);
    post(
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .unwrap();

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "confirm", "arguments": {"question": "on the wire?"}}});
    let mut stream = post(Some(&session), call).await.unwrap().bytes_stream();
    let mut seen = String::new();
    let mut answered = false;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let Ok(Some(chunk)) = tokio::time::timeout_at(deadline, stream.next()).await else {
            panic!("the call's stream ended or stalled: {seen}");
        };
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        let messages: Vec<Value> = seen
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect();
        if !answered
            && let Some(asked) = messages
                .iter()
                .find(|m| m["method"] == "elicitation/create")
        {
            assert_eq!(asked["params"]["message"], "on the wire?", "{asked}");
            let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
                                "result": {"action": "accept", "content": {"answer": "yes"}}});
            let posted = post(Some(&session), answer).await.unwrap();
            assert!(posted.status().is_success(), "{}", posted.status());
            answered = true;
        }
        if let Some(result) = messages.iter().find(|m| m["id"] == 2) {
            assert!(answered, "the result came without the question: {seen}");
            assert_eq!(
                result["result"]["structuredContent"]["answer"], "yes",
                "{result}"
            );
            break;
        }
    }
}

/// A REST call has no client to ask: what its upstream sends during it (a log line, an
/// elicitation, a sampling request, a roots request) is refused or dropped, never handed to the
/// MCP client of another org whose call is in flight on the same upstream, and that client's
/// answers and roots never reach the REST call's result. Over stdio every such message is
/// untied; over HTTP the roots request comes on no call's stream.
async fn a_rest_calls_upstream_messages_reach_no_other_client(upstream: &str) {
    let gw = TestGateway::start(&format!(
        "{upstream}{BANK_TOOLS}{CHATTY}[tools.roots]\ntier = \"read_only\"\n"
    ))
    .await;
    let acme = gw.key("acme", Role::Agent).await;
    let globex = gw.key("globex", Role::Agent).await;
    let auth = format!("Authorization: Bearer {}", globex.secret);
    // B answers its own elicitation only after a while: its call stays in flight meanwhile.
    let options = [
        "--elicit-reply",
        "B",
        "--elicit-delay",
        "3.0",
        "--sampling-reply",
        "B",
        "--roots",
        "file:///home/B/private",
    ];
    let mut b = Client::connect_with("mcp2", "legacy", &gw.mcp_url(), &[&auth], &options).await;
    let waiting = b
        .start_call("confirm", json!({"question": "for B: still there?"}))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;

    for (tool, args) in [
        ("note", json!({"text": "for A: a log line"})),
        ("confirm", json!({"question": "for A: your password?"})),
        ("ask", json!({"question": "for A: a sampling request"})),
        ("roots", json!({})),
    ] {
        let (status, answer) = gw.rest_call(Some(&acme), "rest-a", tool, args).await;
        let text = answer.to_string();
        assert!(
            !text.contains("B | saw") && !text.contains("file:///home/B"),
            "{tool}: B's answers reached A's REST call ({status}): {text}"
        );
    }

    let answered = b.answer(waiting).await;
    assert_eq!(
        answered["ok"]["structuredContent"]["answer"], "B | saw: for B: still there?",
        "{answered}"
    );
    let heard = b.heard().await;
    assert!(
        !heard.to_string().contains("for A"),
        "B heard A's call: {heard}"
    );
    assert_eq!(
        heard["roots_asked"],
        json!([]),
        "B was asked for roots: {heard}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rest_call_on_a_stdio_upstream_reaches_no_other_client() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = stdio_bank_toml("bank", &dir.path().join("bank.json"));
    a_rest_calls_upstream_messages_reach_no_other_client(&upstream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rest_call_on_an_http_upstream_reaches_no_other_client() {
    let bank = Bank::start().await;
    let upstream = format!("[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n", bank.url);
    a_rest_calls_upstream_messages_reach_no_other_client(&upstream).await;
}
