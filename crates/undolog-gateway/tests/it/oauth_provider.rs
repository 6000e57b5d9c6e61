//! OAuth with a real identity provider (the npm `oidc-provider`, tests/fixtures/
//! oidc_provider.mjs): the official Python SDK runs its own OAuth flow against `/mcp`, and people
//! sign in to the dashboard with authorization code + PKCE. Whatever they do is recorded under
//! the token's subject.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    harness::{Client, TestGateway},
    identity_provider::IdentityProvider,
};

/// A gateway with `[oauth]` for a fresh provider that knows its dashboard.
async fn gateway_and_provider() -> (TestGateway, IdentityProvider) {
    gateway_and_provider_with(&[], "").await
}

/// The same with the provider's `flags` and more of the gateway's `[oauth]`.
async fn gateway_and_provider_with(flags: &[&str], oauth: &str) -> (TestGateway, IdentityProvider) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let resource = format!("{base}/mcp");
    let provider =
        IdentityProvider::start(&resource, &format!("{base}/v1/auth/callback"), flags).await;
    let toml = format!(
        "[oauth]\nissuer = \"{}\"\nresource = \"{resource}\"\ndashboard_client_id = \"undolog-dashboard\"\n{oauth}",
        provider.issuer
    );
    let gw = TestGateway::start_on_listener(listener, &toml, None).await;
    (gw, provider)
}

/// A browser signed in to the dashboard as `person`: its cookie jar, and the CSRF token the
/// dashboard's page would read.
async fn sign_in(gw: &TestGateway, person: &str) -> (reqwest::Client, String) {
    let (browser, callback) = signed_in_at_the_provider(gw, person).await;
    let response = browser.get(callback.clone()).send().await.unwrap();
    let page = response.text().await.unwrap();
    assert!(page.contains("Signed in"), "{callback}: {page}");
    let (_, me) = get(&browser, &format!("{}/v1/whoami", gw.base)).await;
    (browser, me["csrf"].as_str().unwrap().to_owned())
}

/// A browser that began the dashboard's sign-in and signed in on the provider's page as
/// `person`, and the callback URL the provider sent it back to (not followed yet).
async fn signed_in_at_the_provider(
    gw: &TestGateway,
    person: &str,
) -> (reqwest::Client, reqwest::Url) {
    let browser = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut response = browser
        .get(format!("{}/v1/auth/login", gw.base))
        .send()
        .await
        .unwrap();
    for _ in 0..10 {
        if let Some(location) = response.headers().get("location") {
            let next = response.url().join(location.to_str().unwrap()).unwrap();
            if next.path() == "/v1/auth/callback" {
                return (browser, next);
            }
            response = browser.get(next).send().await.unwrap();
            continue;
        }
        let url = response.url().clone();
        let page = response.text().await.unwrap();
        let action = page
            .split("<form method=post action=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("{url}: no login form in {page}"));
        response = browser
            .post(url.join(action).unwrap())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("username={person}"))
            .send()
            .await
            .unwrap();
    }
    panic!("the sign-in of {person} did not come back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_ends_only_in_the_browser_that_began_it() {
    let (gw, _provider) = gateway_and_provider().await;
    // Alice signs in as herself and sends carol the link back to the gateway: carol's browser
    // would be signed in as alice, and carol would act in the dashboard under alice's name.
    let (alice, callback) = signed_in_at_the_provider(&gw, "alice").await;
    let carol = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .unwrap();
    let response = carol.get(callback.clone()).send().await.unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.headers().get("set-cookie").is_none());
    let (status, _) = get(&carol, &format!("{}/v1/whoami", gw.base)).await;
    assert_eq!(status, 401);
    // The browser that began it still finishes it.
    let response = alice.get(callback).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let (status, me) = get(&alice, &format!("{}/v1/whoami", gw.base)).await;
    assert_eq!((status, &me["principal"]), (200, &json!("oauth:alice")));
}

/// The official Python SDK (2026-07-28) against `/mcp`, running its own OAuth flow as `person`.
async fn sdk_signed_in_as(gw: &TestGateway, person: &str) -> Client {
    let login = ["--oauth-login", person];
    Client::connect_with("mcp2", "modern", &gw.mcp_url(), &[], &login).await
}

async fn get(browser: &reqwest::Client, url: &str) -> (u16, Value) {
    let response = browser.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_signs_in_on_its_own_and_a_signed_in_approver_decides_its_held_call() {
    let (gw, _provider) = gateway_and_provider().await;

    // The official SDK: 401, metadata, registration, PKCE, the person's sign-in, the token.
    let mut alice = sdk_signed_in_as(&gw, "alice").await;
    let tools = alice.list_tools().await;
    assert!(tools.iter().any(|t| t == "send_email"), "{tools:?}");
    let held = alice
        .start_call(
            "send_email",
            json!({"to": "ceo@example.com", "subject": "hi"}),
        )
        .await;

    // Carol signs in to the dashboard and sees the held call, made by alice's token.
    let (carol, csrf) = sign_in(&gw, "carol").await;
    let (status, me) = get(&carol, &format!("{}/v1/whoami", gw.base)).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(
        (&me["principal"], &me["role"], &me["org"]),
        (&json!("oauth:carol"), &json!("approver"), &json!("acme"))
    );
    let mut approval = Value::Null;
    for _ in 0..100 {
        let (_, pending) = get(&carol, &format!("{}/v1/approvals?status=pending", gw.base)).await;
        if let Some(first) = pending.as_array().and_then(|a| a.first()) {
            approval = first.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(approval["requested_by"], "oauth:alice", "{approval}");
    let approve = format!(
        "{}/v1/approvals/{}/approve",
        gw.base,
        approval["id"].as_str().unwrap()
    );

    // Alice, signed in to the dashboard, may not decide (an agent), nor may a page without the
    // CSRF token act with carol's cookie.
    let (alice_browser, alice_csrf) = sign_in(&gw, "alice").await;
    let refused = alice_browser
        .post(&approve)
        .header("x-undolog-csrf", &alice_csrf)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let forged = carol.post(&approve).json(&json!({})).send().await.unwrap();
    assert_eq!(forged.status(), 403);

    let decided = carol
        .post(&approve)
        .header("x-undolog-csrf", &csrf)
        .json(&json!({"reason": "fine"}))
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200);
    let decided: Value = decided.json().await.unwrap();
    assert_eq!(decided["decided_by"], "oauth:carol", "{decided}");
    let result = alice.answer(held).await;
    assert_eq!(result["ok"]["isError"], false, "{result}");

    // Signed out, the cookie is good for nothing.
    let out = carol
        .post(format!("{}/v1/auth/logout", gw.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    let (status, _) = get(&carol, &format!("{}/v1/whoami", gw.base)).await;
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_without_any_roles_scope_gets_no_tools() {
    let (gw, _provider) = gateway_and_provider().await;
    let mut dave = sdk_signed_in_as(&gw, "dave").await;
    let id = dave.send(json!({"op": "list_tools"})).await;
    let answer = dave.answer(id).await;
    // The SDK reports the 403 (insufficient_scope, its header checked in `oauth`) as an error.
    assert!(
        answer["error"].is_string() && answer.get("ok").is_none(),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_opaque_tokens_the_gateway_asks_the_provider_by_introspection() {
    let introspection = "introspection_client_id = \"undolog-gateway\"\nintrospection_client_secret = \"introspection secret\"\n";
    let (gw, _provider) = gateway_and_provider_with(&["--opaque"], introspection).await;
    let mut alice = sdk_signed_in_as(&gw, "alice").await;
    let tools = alice.list_tools().await;
    assert!(tools.iter().any(|t| t == "transfer"), "{tools:?}");
    let balance = alice.call("get_balance", json!({"account": "alice"})).await;
    assert_eq!(balance["isError"], false, "{balance}");
    // The carol of the dashboard is an opaque token too.
    let (carol, _) = sign_in(&gw, "carol").await;
    let (_, me) = get(&carol, &format!("{}/v1/whoami", gw.base)).await;
    assert_eq!(me["principal"], "oauth:carol", "{me}");
}
