//! An agent run is one UndoLog session whatever the client does: a stateless 2026-07-28 client,
//! or one that opens an MCP session per call, sends no UndoLog header and still gets its
//! repeated call replayed and its run undone as one session.

use serde_json::{Value, json};
use undolog_types::Role;

use crate::harness::{BANK_TOOLS, Bank, Client, Credential, TestGateway, undolog_meta};

fn transfer(amount: i64) -> Value {
    json!({"from_account": "alice", "to_account": "bob", "amount": amount})
}

async fn bank_gateway(bank: &Bank) -> TestGateway {
    TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{BANK_TOOLS}",
        bank.url
    ))
    .await
}

/// A bank, a gateway in front of it, and an agent's and an admin's keys of one org.
async fn bank_gateway_with_keys() -> (Bank, TestGateway, Credential, Credential) {
    let bank = Bank::start().await;
    let gw = bank_gateway(&bank).await;
    let agent = gw.key("acme", Role::Agent).await;
    let admin = gw.key("acme", Role::Admin).await;
    (bank, gw, agent, admin)
}

/// The runs of `principal`, as the admin API lists them.
async fn runs_of(gw: &TestGateway, admin: &Credential, principal: &str) -> Vec<Value> {
    let (_, sessions) = gw.get_as(Some(admin), "/v1/sessions").await;
    (sessions.as_array().unwrap().iter())
        .filter(|s| s["run_of"] == principal)
        .cloned()
        .collect()
}

/// The one run session of `principal`.
async fn the_run(gw: &TestGateway, admin: &Credential, principal: &str) -> Value {
    let runs = runs_of(gw, admin, principal).await;
    assert_eq!(runs.len(), 1, "one run: {runs:?}");
    runs[0].clone()
}

/// The id of `principal`'s one active run.
async fn the_active_run(gw: &TestGateway, admin: &Credential, principal: &str) -> String {
    let runs = runs_of(gw, admin, principal).await;
    let active: Vec<&str> = (runs.iter())
        .filter(|s| s["state"] == "active")
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(active.len(), 1, "one active run: {runs:?}");
    active[0].to_owned()
}

fn reversals(ledger: &[Value], amount: i64) -> usize {
    ledger
        .iter()
        .filter(|op| op["from_account"] == "bob" && op["amount"] == amount)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_client_without_a_session_header_is_replayed_and_undone_as_one_run() {
    let (bank, gw, agent, admin) = bank_gateway_with_keys().await;
    let auth = format!("Authorization: Bearer {}", agent.secret);
    // The official Python client at 2026-07-28: stateless, no session, no UndoLog header.
    let mut client = Client::connect("mcp2", "modern", &gw.mcp_url(), &[&auth]).await;
    assert_eq!(client.protocol, "2026-07-28");
    let first = client.call("transfer", transfer(7)).await;
    let second = client.call("transfer", transfer(7)).await;
    assert!(
        !undolog_meta(&first).1 && undolog_meta(&second).1,
        "{first}\n{second}"
    );
    let note = second["content"].to_string();
    assert!(
        note.contains("replayed") && note.contains("io.undolog/idempotency_key"),
        "{note}"
    );
    assert_eq!(bank.ledger().await.len(), 1, "the bank ran it once");

    // A deliberate repeat asks for a fresh run in _meta.
    let id = client
        .send(
            json!({"op": "call_tool", "name": "transfer", "arguments": transfer(7),
                     "meta": {"io.undolog/idempotency_key": "again-1"}}),
        )
        .await;
    let fresh = client.answer(id).await["ok"].clone();
    assert!(!undolog_meta(&fresh).1, "{fresh}");
    assert_eq!(bank.ledger().await.len(), 2, "the bank ran it again");

    let run = the_run(&gw, &admin, &format!("api-key:{}", agent.id)).await;
    let id = run["id"].as_str().unwrap();
    let (status, report) = gw
        .post_as(Some(&admin), &format!("/v1/sessions/{id}/undo"), json!({}))
        .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["state"], "compensated", "{report}");
    assert_eq!(
        reversals(&bank.ledger().await, 7),
        2,
        "both transfers undone, as one run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_opening_a_session_per_call_is_replayed_and_undone_as_one_run() {
    let (bank, gw, agent, admin) = bank_gateway_with_keys().await;
    let auth = format!("Authorization: Bearer {}", agent.secret);
    let mut langchain = crate::frameworks::Agent::langchain(&gw.mcp_url(), &[&auth], false).await;
    let first = langchain.call("transfer", transfer(9)).await;
    let second = langchain.call("transfer", transfer(9)).await;
    assert!(
        !undolog_meta(&first).1 && undolog_meta(&second).1,
        "{first}\n{second}"
    );
    assert_eq!(bank.ledger().await.len(), 1);

    let run = the_run(&gw, &admin, &format!("api-key:{}", agent.id)).await;
    let id = run["id"].as_str().unwrap();
    let (status, report) = gw
        .post_as(Some(&admin), &format!("/v1/sessions/{id}/undo"), json!({}))
        .await;
    assert_eq!(
        (status, report["state"].as_str()),
        (200, Some("compensated")),
        "{report}"
    );
    assert_eq!(reversals(&bank.ledger().await, 9), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_session_wins_over_the_run_header_first_then_meta() {
    let bank = Bank::start().await;
    let gw = bank_gateway(&bank).await;
    let auth_key = gw.key("acme", Role::Agent).await;
    let admin = gw.key("acme", Role::Admin).await;
    let auth = format!("Authorization: Bearer {}", auth_key.secret);
    let header = "X-UndoLog-Session-Id: by-header";
    let mut client = Client::connect("mcp2", "modern", &gw.mcp_url(), &[&auth, header]).await;
    let id = client
        .send(
            json!({"op": "call_tool", "name": "transfer", "arguments": transfer(3),
                     "meta": {"io.undolog/session": "by-meta"}}),
        )
        .await;
    client.answer(id).await;
    let mut plain = Client::connect("mcp2", "modern", &gw.mcp_url(), &[&auth]).await;
    let id = plain
        .send(
            json!({"op": "call_tool", "name": "transfer", "arguments": transfer(4),
                     "meta": {"io.undolog/session": "by-meta"}}),
        )
        .await;
    plain.answer(id).await;
    plain.call("transfer", transfer(5)).await;

    let (_, sessions) = gw.get_as(Some(&admin), "/v1/sessions").await;
    let ids: Vec<&str> = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{sessions}");
    assert_eq!(ids[0], "by-header");
    assert_eq!(ids[1], "by-meta");
    assert!(ids[2].starts_with("run-"), "{ids:?}");
    let sent = bank.ledger().await;
    assert_eq!(sent.len(), 3, "{sent:?}");
}

/// A stateless `tools/call` of `tool` by `key`, in no named session; its result, which must be
/// one (not an error) and not a tool's error.
async fn call_in_run(gw: &TestGateway, key: &Credential, tool: &str, arguments: Value) -> Value {
    let params = json!({"name": tool, "arguments": arguments});
    let limit = std::time::Duration::from_secs(20);
    let (status, answer) = gw
        .rpc(Some(key), "tools/call", params, json!({}), limit)
        .await;
    assert_eq!(status, 200, "{answer}");
    let result = answer["result"].clone();
    assert!(
        result["content"].is_array() && result["isError"] != true,
        "{tool}: {answer}"
    );
    result
}

/// Undoes `principal`'s one active run through the admin API; its id.
async fn undo_the_active_run(gw: &TestGateway, admin: &Credential, principal: &str) -> String {
    let active = the_active_run(gw, admin, principal).await;
    let path = format!("/v1/sessions/{active}/undo");
    let (status, report) = gw.post_as(Some(admin), &path, json!({})).await;
    assert_eq!(
        (status, report["state"].as_str()),
        (200, Some("compensated")),
        "{report}"
    );
    active
}

/// A gateway may remember its principals' runs (one in front of the engine does, to spare the
/// engine a question per call): a run undone the moment before is not one a call can join, so
/// the call right after the undo, compensable or read-only, starts the principal's next run
/// instead of being refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_right_after_a_run_is_undone_starts_the_next_run() {
    let (bank, gw, agent, admin) = bank_gateway_with_keys().await;
    let principal = format!("api-key:{}", agent.id);
    for amount in [1, 2] {
        call_in_run(&gw, &agent, "transfer", transfer(amount)).await;
    }
    let first = undo_the_active_run(&gw, &admin, &principal).await;

    // A call that names the undone run keeps its client's choice: refused, and not run.
    let params = json!({"name": "transfer", "arguments": transfer(9),
                        "_meta": {"io.undolog/session": first}});
    let limit = std::time::Duration::from_secs(20);
    let (_, named) = gw
        .rpc(Some(&agent), "tools/call", params, json!({}), limit)
        .await;
    assert_eq!(named["result"]["isError"], true, "{named}");
    assert!(
        named.to_string().contains("takes no more calls"),
        "says why and what to do: {named}"
    );

    // A compensable call: its intercept finds the run closed.
    let again = call_in_run(&gw, &agent, "transfer", transfer(3)).await;
    assert!(!undolog_meta(&again).1, "not a replay: {again}");
    let second = undo_the_active_run(&gw, &admin, &principal).await;
    assert_ne!(second, first);

    // A read-only call: it runs first, and its record finds the run closed.
    call_in_run(&gw, &agent, "get_balance", json!({"account": "alice"})).await;
    let third = the_active_run(&gw, &admin, &principal).await;
    let (_, effects) = gw
        .get_as(Some(&admin), &format!("/v1/sessions/{third}/effects"))
        .await;
    let tools: Vec<&str> = (effects.as_array().unwrap().iter())
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["get_balance"],
        "the read is kept in the next run: {effects}"
    );

    let ledger = bank.ledger().await;
    let sent: Vec<i64> = (ledger.iter())
        .filter(|op| op["from_account"] == "alice")
        .map(|op| op["amount"].as_i64().unwrap())
        .collect();
    assert_eq!(sent, [1, 2, 3], "each transfer ran once: {ledger:?}");
}
