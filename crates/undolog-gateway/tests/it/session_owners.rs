//! A session belongs to the credential that opened it. Another agent key of the same org can
//! neither join it (by the `X-UndoLog-Session-Id` header or `_meta["io.undolog/session"]`), nor
//! replay from it, nor read it; approvers and admins read the whole org. (Another key once named
//! the first key's run, got its result replayed with the same effect, and added its calls to it.)

use serde_json::{Value, json};
use undolog_types::Role;

use crate::harness::{Bank, TestGateway};

fn transfer() -> Value {
    json!({"from_account": "alice", "to_account": "bob", "amount": 7})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_agent_key_neither_joins_nor_replays_from_nor_reads_a_run_it_did_not_open() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n[tools.transfer]\ntier = \"compensable\"\n",
        bank.url
    ))
    .await;
    let owner = gw.key("acme", Role::Agent).await;
    let colleague = gw.key("acme", Role::Agent).await;
    let approver = gw.key("acme", Role::Approver).await;

    // The owner's call names no session: it opens the owner's run.
    let call = || {
        (gw.http.post(format!("{}/mcp/tool_call", gw.base)))
            .json(&json!({"name": "transfer", "arguments": transfer()}))
    };
    let answered = call().bearer_auth(&owner.secret).send().await.unwrap();
    let first: Value = answered.json().await.unwrap();
    let effect = first["effect_id"].as_str().unwrap().to_owned();
    let (_, effects) = gw.get_as(Some(&approver), "/v1/sessions").await;
    let run = effects[0]["id"].as_str().unwrap().to_owned();
    assert!(run.starts_with("run-"), "{effects}");
    assert_eq!(effects[0]["opened_by"], json!(owner.actor), "{effects}");

    // The colleague names it, as a header and in _meta: refused, nothing replayed or added.
    let by_header = call()
        .bearer_auth(&colleague.secret)
        .header("x-undolog-session-id", &run)
        .send()
        .await
        .unwrap();
    let status = by_header.status().as_u16();
    let answer: Value = by_header.json().await.unwrap();
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (403, Some("rejected")),
        "{answer}"
    );
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("another credential"),
        "{answer}"
    );
    assert_ne!(answer["effect_id"], json!(effect), "not replayed: {answer}");
    let meta = json!({"name": "transfer", "arguments": transfer(),
                      "_meta": {"io.undolog/session": run}});
    let limit = std::time::Duration::from_secs(20);
    let (_, by_meta) = gw
        .rpc(Some(&colleague), "tools/call", meta, json!({}), limit)
        .await;
    assert!(
        !by_meta.to_string().contains(&effect),
        "not replayed over MCP: {by_meta}"
    );
    assert!(
        by_meta.to_string().contains("another credential"),
        "{by_meta}"
    );
    let transfers = (bank.ledger().await.into_iter())
        .filter(|op| op["op"] == "transfer")
        .count();
    assert_eq!(transfers, 1, "the transfer ran once, for its owner");

    // Reading: the colleague finds nothing of the run; the owner and an approver find it all.
    let paths = [
        format!("/v1/sessions/{run}"),
        format!("/v1/sessions/{run}/effects"),
        format!("/v1/sessions/{run}/export"),
        format!("/v1/effects/{effect}"),
    ];
    for path in &paths {
        let (status, body) = gw.get_as(Some(&colleague), path).await;
        assert_eq!(status, 404, "the colleague reads {path}: {body}");
        for reader in [&owner, &approver] {
            let (status, body) = gw.get_as(Some(reader), path).await;
            assert_eq!(status, 200, "{} reads {path}: {body}", reader.actor);
        }
    }
    let (_, listed) = gw.get_as(Some(&colleague), "/v1/sessions").await;
    assert!(!listed.to_string().contains(&run), "{listed}");
    let (_, effects) = gw
        .get_as(Some(&owner), &format!("/v1/sessions/{run}/effects"))
        .await;
    assert_eq!(
        effects.as_array().unwrap().len(),
        1,
        "nothing added: {effects}"
    );
}

/// Two agents that name the same session: the first to call opens it, and the other is told to
/// name one of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_session_is_its_openers_and_another_key_is_told_to_name_its_own() {
    let gw = TestGateway::start("").await;
    let first = gw.key("acme", Role::Agent).await;
    let second = gw.key("acme", Role::Agent).await;
    let balance = json!({"account": "alice"});
    let (status, _) = gw
        .rest_call(Some(&first), "shared-name", "get_balance", balance.clone())
        .await;
    assert_eq!(status, 200);
    let (status, refused) = gw
        .rest_call(Some(&second), "shared-name", "get_balance", balance.clone())
        .await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("name a session of your own"),
        "{refused}"
    );
    let (status, _) = gw
        .rest_call(Some(&second), "second-name", "get_balance", balance)
        .await;
    assert_eq!(status, 200);
}

/// An agent hears and lists only its own sessions' calls: another agent's held call is not in
/// its approvals, and its calls' events do not reach its `/events`; an approver sees both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_agents_approvals_and_events_are_not_an_agents_to_read() {
    let gw = TestGateway::start("").await;
    let owner = gw.key("acme", Role::Agent).await;
    let colleague = gw.key("acme", Role::Agent).await;
    let approver = gw.key("acme", Role::Approver).await;
    let subscribe = |secret: String| {
        let request = (gw.http.get(format!("{}/events", gw.base)))
            .bearer_auth(secret)
            .send();
        async move { request.await.unwrap() }
    };
    let colleague_hears = subscribe(colleague.secret.clone()).await;
    let owner_hears = subscribe(owner.secret.clone()).await;

    let email = json!({"to": "cfo@example.com", "subject": "numbers"});
    let (status, held) = gw
        .rest_call(Some(&owner), "owners-1", "send_email", email)
        .await;
    assert_eq!(status, 202, "{held}");

    let pending = "/v1/approvals?status=pending";
    let (_, listed) = gw.get_as(Some(&colleague), pending).await;
    assert_eq!(
        listed,
        json!([]),
        "the colleague lists the owner's approval"
    );
    for reader in [&owner, &approver] {
        let (_, listed) = gw.get_as(Some(reader), pending).await;
        assert_eq!(
            listed.as_array().unwrap().len(),
            1,
            "{}: {listed}",
            reader.actor
        );
    }
    let heard = crate::events::next_events(owner_hears, 1).await;
    assert_eq!(heard, ["effect_intercepted"], "the owner hears its call");
    let leaked = tokio::time::timeout(
        std::time::Duration::from_millis(500),
        crate::events::next_events(colleague_hears, 1),
    )
    .await
    .unwrap_or_default();
    assert!(
        leaked.is_empty(),
        "the colleague heard the owner's call: {leaked:?}"
    );
}
