//! Who may do what. An agent's key calls tools and reads its org; deciding approvals takes an
//! approver, and never for a call the same key made (four eyes); undoing and resolving in-doubt
//! effects take an admin. Every decision names who took it. Each test runs with API keys and
//! with access tokens whose scopes grant the same roles, and expects the same.

use std::time::Duration;

use serde_json::{Value, json};
use undolog_types::Role;

use crate::harness::{BANK_TOOLS, Bank, Client, Kind, TestGateway};

const EMAIL: &str = "send_email";

fn email(to: &str) -> Value {
    json!({"to": to, "subject": "hi"})
}

/// A held call's approval id, from the REST answer (202).
fn approval_of(answer: &Value) -> String {
    answer["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no approval id in {answer}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_key_may_call_and_read_but_not_decide_undo_or_resolve() {
    for kind in Kind::BOTH {
        an_agent_may_call_and_read_but_not_decide_undo_or_resolve(kind).await;
    }
}

async fn an_agent_may_call_and_read_but_not_decide_undo_or_resolve(kind: Kind) {
    let gw = TestGateway::start_for(kind, "").await;
    let agent = gw.key("acme", Role::Agent).await;
    let (status, _) = gw
        .rest_call(
            Some(&agent),
            "s-1",
            "transfer",
            json!({"from_account": "alice", "to_account": "bob", "amount": 1}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, held) = gw
        .rest_call(Some(&agent), "s-1", EMAIL, email("bob@example.com"))
        .await;
    assert_eq!(status, 202, "{held}");
    let approval = approval_of(&held);
    let effect = held["effect_id"].as_str().unwrap().to_owned();

    // Reading its own org is allowed.
    for path in [
        "/v1/sessions",
        "/v1/approvals?status=pending",
        "/v1/effects/in_doubt",
        "/v1/whoami",
    ] {
        let (status, body) = gw.get_as(Some(&agent), path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
    }
    let cases: &[(&str, String, Value)] = &[
        (
            "approve",
            format!("/v1/approvals/{approval}/approve"),
            json!({}),
        ),
        (
            "deny",
            format!("/v1/approvals/{approval}/deny"),
            json!({"reason": "no"}),
        ),
        ("undo", "/v1/sessions/s-1/undo".into(), json!({})),
        (
            "undo, step by step",
            "/v1/sessions/s-1/undo/begin".into(),
            json!({}),
        ),
        (
            "resolve",
            format!("/v1/effects/{effect}/resolve"),
            json!({"outcome": "failed", "error": "x"}),
        ),
    ];
    for (what, path, body) in cases {
        let (status, answer) = gw.post_as(Some(&agent), path, body.clone()).await;
        assert_eq!(status, 403, "{kind:?} {what}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(
            error.contains("agent") && error.contains("--role"),
            "{kind:?} {what}: {error}"
        );
    }
    // Nothing changed: the call still waits, the session is still active.
    let (_, pending) = gw
        .get_as(Some(&agent), "/v1/approvals?status=pending")
        .await;
    assert_eq!(pending.as_array().unwrap().len(), 1);
    let (_, sessions) = gw.get_as(Some(&agent), "/v1/sessions").await;
    assert_eq!(sessions[0]["state"], "active");
}

/// The hole as it was found: the agent's own key approved its held `send_email` over MCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_is_approved_by_another_approver_never_by_the_key_that_made_it() {
    for kind in Kind::BOTH {
        a_held_call_is_approved_by_another_approver_never_by_its_maker(kind).await;
    }
}

async fn a_held_call_is_approved_by_another_approver_never_by_its_maker(kind: Kind) {
    let bank = Bank::start().await;
    let gw = TestGateway::start_for(
        kind,
        &format!(
            "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{BANK_TOOLS}",
            bank.url
        ),
    )
    .await;
    // An approver's key making calls is the hard case: the role would allow deciding.
    let maker = gw.key("acme", Role::Approver).await;
    let checker = gw.key("acme", Role::Approver).await;
    let auth = format!("Authorization: Bearer {}", maker.secret);
    let mut client = Client::connect("mcp2", "legacy", &gw.mcp_url(), &[&auth]).await;
    let held = client.start_call(EMAIL, email("ceo@example.com")).await;
    let approval = gw_pending(&gw, &maker).await;
    assert_eq!(approval["requested_by"], maker.actor, "{kind:?}");

    for decision in ["approve", "deny"] {
        let path = format!(
            "/v1/approvals/{}/{decision}",
            approval["id"].as_str().unwrap()
        );
        let (status, answer) = gw
            .post_as(Some(&maker), &path, json!({"reason": "mine"}))
            .await;
        assert_eq!(status, 403, "{decision}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains("four eyes"),
            "{answer}"
        );
    }
    assert!(bank.ledger().await.is_empty(), "nothing was sent");

    let path = format!("/v1/approvals/{}/approve", approval["id"].as_str().unwrap());
    let (status, decided) = gw
        .post_as(Some(&checker), &path, json!({"reason": "fine"}))
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["state"], "approved");
    assert_eq!(decided["decided_by"], checker.actor, "{kind:?}");
    let result = client.answer(held).await;
    assert_eq!(result["ok"]["isError"], false, "{result}");
    let sent = bank.ledger().await;
    assert_eq!(sent.len(), 1, "sent once: {sent:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_person_setup_may_allow_self_approval_and_open_mode_always_does() {
    for kind in Kind::BOTH {
        let gw = TestGateway::start_for(kind, "[approvals]\nallow_self_approval = true\n").await;
        let only = gw.key("acme", Role::Approver).await;
        let (_, held) = gw
            .rest_call(Some(&only), "s-1", EMAIL, email("me@example.com"))
            .await;
        let path = format!("/v1/approvals/{}/approve", approval_of(&held));
        let (status, decided) = gw.post_as(Some(&only), &path, json!({})).await;
        assert_eq!(status, 200, "{kind:?}: {decided}");
        assert_eq!(decided["decided_by"], only.actor);
    }

    // Open mode: the one local operator makes the call and decides it (the README's first try).
    let open = TestGateway::start("").await;
    let (_, held) = open
        .rest_call(None, "s-1", EMAIL, email("me@example.com"))
        .await;
    let path = format!("/v1/approvals/{}/approve", approval_of(&held));
    let (status, decided) = open.post_as(None, &path, json!({})).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["decided_by"], "local operator");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_and_resolve_take_an_admin_and_a_revoked_key_stops_working() {
    for kind in Kind::BOTH {
        undo_and_resolve_take_an_admin(kind).await;
    }
}

async fn undo_and_resolve_take_an_admin(kind: Kind) {
    let gw = TestGateway::start_for(kind, "").await;
    let agent = gw.key("acme", Role::Agent).await;
    let approver = gw.key("acme", Role::Approver).await;
    let admin = gw.key("acme", Role::Admin).await;
    gw.rest_call(
        Some(&agent),
        "s-1",
        "transfer",
        json!({"from_account": "alice", "to_account": "bob", "amount": 3}),
    )
    .await;
    let (status, _) = gw
        .post_as(Some(&approver), "/v1/sessions/s-1/undo", json!({}))
        .await;
    assert_eq!(status, 403, "an approver does not undo");
    let (status, report) = gw
        .post_as(Some(&admin), "/v1/sessions/s-1/undo", json!({}))
        .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["state"], "compensated");
    if kind == Kind::Token {
        // A token is good until it expires (no introspection): nothing to revoke here.
        return;
    }

    // Revoked in the store: a key not seen before is refused at once.
    let fresh = gw.key("acme", Role::Admin).await;
    gw.gateway
        .store()
        .unwrap()
        .revoke_api_key(&fresh.id, undolog_types::Timestamp::now())
        .await
        .unwrap();
    let (status, answer) = gw.get_as(Some(&fresh), "/v1/sessions").await;
    assert_eq!(status, 401, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("revoked"),
        "{answer}"
    );
}

/// The first pending approval `key` can see.
async fn gw_pending(gw: &TestGateway, key: &crate::harness::Credential) -> Value {
    for _ in 0..200 {
        let (_, pending) = gw.get_as(Some(key), "/v1/approvals?status=pending").await;
        if let Some(first) = pending.as_array().and_then(|a| a.first()) {
            return first.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no approval was requested within 10 s");
}
