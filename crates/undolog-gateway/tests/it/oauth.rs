//! The gateway as an OAuth 2.1 resource server: what a client without a token is told, which
//! tokens are refused and how, key rotation, and that a client's token never reaches an upstream.
//! Tokens come from the in-process [`TestIssuer`] (real keys, real HTTP); the flows with a real
//! identity provider are in `oauth_provider`.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{
    harness::{Credential, TestGateway},
    issuer::{INTROSPECTION_SECRET, SigningKey, TestIssuer, now},
};

fn bearer(token: &str) -> Credential {
    Credential {
        id: "test".into(),
        secret: token.to_owned(),
        actor: "test".into(),
    }
}

/// The status and `WWW-Authenticate` of `GET /v1/whoami` and of an MCP `tools/list` with `token`.
async fn answers(gw: &TestGateway, token: Option<&str>) -> [(u16, String); 2] {
    let mut whoami = gw.http.get(format!("{}/v1/whoami", gw.base));
    let mut mcp = gw
        .http
        .post(gw.mcp_url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}}}})
            .to_string(),
        );
    if let Some(token) = token {
        whoami = whoami.bearer_auth(token);
        mcp = mcp.bearer_auth(token);
    }
    let mut out = Vec::new();
    for request in [whoami, mcp] {
        let response = request.send().await.unwrap();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        out.push((response.status().as_u16(), challenge));
    }
    out.try_into().unwrap()
}

/// `base` with each of `changes` set, or removed where it is null.
fn edited(mut base: Value, changes: Value) -> Value {
    for (k, v) in changes.as_object().unwrap() {
        match v {
            Value::Null => drop(base.as_object_mut().unwrap().remove(k)),
            v => base[k] = v.clone(),
        }
    }
    base
}

/// Each `(what, token, status, challenge)`: both routes answer `token` with that status and a
/// challenge that contains that text (and, when refused, where the metadata is).
async fn answered_as_listed(gw: &TestGateway, cases: &[(&str, String, u16, &str)]) {
    for (what, token, status, challenge) in cases {
        for (got, header) in answers(gw, Some(token)).await {
            assert_eq!(got, *status, "{what}: {header}");
            assert!(header.contains(challenge), "{what}: {header}");
            if *status != 200 {
                assert!(header.contains("resource_metadata="), "{what}: {header}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_token_is_told_where_the_metadata_is_and_it_names_the_issuer() {
    let gw = TestGateway::with_tokens("").await;
    let issuer = gw.issuer.as_ref().unwrap();
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", gw.base);
    for (status, challenge) in answers(&gw, None).await {
        assert_eq!(status, 401);
        assert!(
            challenge.starts_with("Bearer ")
                && challenge.contains(&format!("resource_metadata=\"{metadata_url}\""))
                && challenge.contains("scope=\"undolog:agent\""),
            "{challenge}"
        );
    }
    // The path-suffixed form (RFC 9728 §3.1) and the root form give the same document.
    for url in [
        metadata_url.clone(),
        format!("{}/.well-known/oauth-protected-resource", gw.base),
    ] {
        let document: Value = gw
            .http
            .get(&url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(document["resource"], gw.mcp_url(), "{url}");
        assert_eq!(
            document["authorization_servers"],
            json!([issuer.url]),
            "{url}"
        );
        assert_eq!(
            document["scopes_supported"],
            json!(["undolog:agent", "undolog:approve", "undolog:admin"])
        );
    }
    // Without [oauth] there is no such document, and no token is taken.
    let plain = TestGateway::start("").await;
    let (status, _) = plain
        .get_as(None, "/.well-known/oauth-protected-resource")
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_token_is_refused_with_the_status_and_challenge_the_spec_gives() {
    let gw = TestGateway::with_tokens("").await;
    let issuer = gw.issuer.as_ref().unwrap();
    let resource = gw.mcp_url();
    let good = || issuer.claims(&resource, "alice", "acme", "undolog:agent");
    let with = |changes: Value| issuer.es256.sign(&edited(good(), changes));
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let unsigned = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&good())
    );
    // The RSA key's public modulus as an HMAC secret: the classic algorithm confusion.
    let confused = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &good(),
        &jsonwebtoken::EncodingKey::from_secret(issuer.rs256.jwk["n"].as_str().unwrap().as_bytes())
            .unwrap(),
    )
    .unwrap();
    let impostor = SigningKey::es256("ec-1"); // the issuer's key id, another key
    let stranger = SigningKey::es256("ec-unknown");
    const INVALID: &str = "error=\"invalid_token\"";
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("good, ES256", issuer.es256.sign(&good()), 200, ""),
        ("good, RS256", issuer.rs256.sign(&good()), 200, ""),
        (
            "for another resource",
            with(json!({"aud": "http://127.0.0.1:1/mcp"})),
            401,
            INVALID,
        ),
        ("expired", with(json!({"exp": now() - 120})), 401, INVALID),
        (
            "not valid yet",
            with(json!({"nbf": now() + 600})),
            401,
            INVALID,
        ),
        (
            "another issuer",
            with(json!({"iss": "http://127.0.0.1:1"})),
            401,
            INVALID,
        ),
        (
            "without an audience",
            with(json!({"aud": null})),
            401,
            INVALID,
        ),
        (
            "without a subject",
            with(json!({"sub": null})),
            401,
            INVALID,
        ),
        ("alg none", unsigned, 401, INVALID),
        ("HS256 keyed with the public key", confused, 401, INVALID),
        (
            "signed by another key under the issuer's kid",
            impostor.sign(&good()),
            401,
            INVALID,
        ),
        (
            "signed by a key the issuer does not publish",
            stranger.sign(&good()),
            401,
            INVALID,
        ),
        ("naming no org", with(json!({"org": null})), 401, INVALID),
        ("not a JWT", "not-a-jwt".into(), 401, INVALID),
        (
            "without any role's scope",
            with(json!({"scope": "openid profile"})),
            403,
            "error=\"insufficient_scope\", scope=\"undolog:agent\"",
        ),
    ];
    answered_as_listed(&gw, &cases).await;
    // What the good token proves, and the message a bad one gets.
    let (_, me) = gw
        .get_as(Some(&bearer(&issuer.rs256.sign(&good()))), "/v1/whoami")
        .await;
    assert_eq!(
        (&me["org"], &me["role"], &me["principal"]),
        (&json!("acme"), &json!("agent"), &json!("oauth:alice"))
    );
    let (_, refused) = gw
        .get_as(
            Some(&bearer(&with(json!({"aud": "http://127.0.0.1:1/mcp"})))),
            "/v1/whoami",
        )
        .await;
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("another resource") && message.contains(&resource),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_that_needs_more_than_the_tokens_role_names_the_missing_scope() {
    let gw = TestGateway::with_tokens("").await;
    let agent = gw.key("acme", undolog_types::Role::Agent).await;
    let response = gw
        .http
        .post(format!("{}/v1/sessions/s-1/undo", gw.base))
        .bearer_auth(&agent.secret)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let challenge = response.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"undolog:admin\""),
        "{challenge}"
    );
    // An API key's missing role is not a scope: no challenge.
    let key_agent = {
        let plain = undolog_gateway::create_key(
            &**gw.gateway.store().unwrap(),
            undolog_types::OrgId::new("acme").unwrap(),
            undolog_types::Role::Agent,
            None,
        )
        .await
        .unwrap();
        plain.secret
    };
    let response = gw
        .http
        .post(format!("{}/v1/sessions/s-1/undo", gw.base))
        .bearer_auth(&key_agent)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    assert!(response.headers().get("www-authenticate").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_fetched_when_a_token_names_it_and_made_up_kids_cannot_flood_the_issuer() {
    let gw = TestGateway::with_tokens("").await;
    let issuer: &TestIssuer = gw.issuer.as_ref().unwrap();
    let claims = issuer.claims(&gw.mcp_url(), "alice", "acme", "undolog:agent");
    let first = issuer.es256.sign(&claims);
    assert_eq!(answers(&gw, Some(&first)).await[0].0, 200);
    let fetched = issuer.fetches();

    let next = SigningKey::es256("ec-2");
    issuer.publish(&[&next]);
    let rotated = next.sign(&claims);
    assert_eq!(
        answers(&gw, Some(&rotated)).await[0].0,
        200,
        "the new key is fetched"
    );
    assert_eq!(issuer.fetches(), fetched + 1);

    // Twenty tokens under made-up key ids, at once: at most one more fetch in the window.
    let forged: Vec<String> = (0..20)
        .map(|i| SigningKey::es256(&format!("forged-{i}")).sign(&claims))
        .collect();
    let refused = futures::future::join_all(forged.iter().map(|t| answers(&gw, Some(t)))).await;
    assert!(refused.iter().all(|a| a[0].0 == 401));
    assert!(
        issuer.fetches() <= fetched + 2,
        "{} fetches",
        issuer.fetches() - fetched
    );
}

/// A TCP relay in front of an upstream that keeps every byte sent to it.
async fn recording_relay(upstream: std::net::SocketAddr) -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let keep = keep.clone();
            tokio::spawn(async move {
                let mut server = tokio::net::TcpStream::connect(upstream).await.unwrap();
                let (mut from_client, mut to_client) = client.split();
                let (mut from_server, mut to_server) = server.split();
                let up = async {
                    let mut buf = [0u8; 8192];
                    loop {
                        let n = from_client.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        keep.lock().unwrap().extend_from_slice(&buf[..n]);
                        if to_server.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                };
                let down = tokio::io::copy(&mut from_server, &mut to_client);
                let _ = tokio::join!(up, down);
            });
        }
    });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_token_never_reaches_an_upstream() {
    let bank_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bank_addr = bank_listener.local_addr().unwrap();
    tokio::spawn(undolog_gateway::DemoBank::default().serve_http(bank_listener));
    let (url, seen) = recording_relay(bank_addr).await;
    let gw = TestGateway::with_tokens(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{url}\"\n[tools.get_balance]\ntier = \"read_only\"\n"
    ))
    .await;
    let agent = gw.key("acme", undolog_types::Role::Agent).await;
    let (status, answer) = gw
        .rpc(
            Some(&agent),
            "tools/call",
            json!({"name": "get_balance", "arguments": {"account": "alice"}}),
            json!({}),
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let sent = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    assert!(
        sent.contains("get_balance"),
        "the call went through the relay"
    );
    assert!(!sent.contains(&agent.secret), "the token was sent upstream");
    assert!(
        !sent.to_ascii_lowercase().contains("authorization:"),
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opaque_token_is_checked_by_introspection_as_a_jwt_is_by_its_signature() {
    let issuer = TestIssuer::start().await;
    let gateway_with = |secret: &'static str| {
        let section = issuer.config_with_introspection("@GATEWAY@/mcp", secret);
        async move { TestGateway::start_on(&section, None).await }
    };
    let gw = gateway_with(INTROSPECTION_SECRET).await;
    let resource = gw.mcp_url();
    let active = json!({
        "active": true, "iss": issuer.url, "aud": resource, "sub": "olga", "org": "acme",
        "scope": "undolog:approve", "exp": now() + 300, "token_type": "Bearer",
    });
    let answer = |changes: Value| issuer.opaque(edited(active.clone(), changes));
    const INVALID: &str = "error=\"invalid_token\"";
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("active", answer(json!({})), 200, ""),
        (
            "active, audience as a list",
            answer(json!({"aud": ["x", resource]})),
            200,
            "",
        ),
        ("not active", answer(json!({"active": false})), 401, INVALID),
        (
            "unknown to the issuer",
            "opaque-and-unknown".into(),
            401,
            INVALID,
        ),
        (
            "for another resource",
            answer(json!({"aud": "http://127.0.0.1:1/mcp"})),
            401,
            INVALID,
        ),
        (
            "without an audience",
            answer(json!({"aud": null})),
            401,
            INVALID,
        ),
        (
            "another issuer",
            answer(json!({"iss": "http://127.0.0.1:1"})),
            401,
            INVALID,
        ),
        ("expired", answer(json!({"exp": now() - 120})), 401, INVALID),
        (
            "without a subject",
            answer(json!({"sub": null})),
            401,
            INVALID,
        ),
        (
            "without any role's scope",
            answer(json!({"scope": "openid"})),
            403,
            "error=\"insufficient_scope\"",
        ),
    ];
    answered_as_listed(&gw, &cases).await;
    let (_, me) = gw.get_as(Some(&bearer(&cases[0].1)), "/v1/whoami").await;
    assert_eq!(
        (&me["principal"], &me["role"]),
        (&json!("oauth:olga"), &json!("approver"))
    );

    // The gateway's own client refused at the endpoint: the token is not taken, and the message
    // says where to look.
    let misconfigured = gateway_with("not the secret").await;
    let token = issuer.opaque(json!({"active": true, "aud": misconfigured.mcp_url(), "sub": "olga", "org": "acme", "scope": "undolog:agent"}));
    let (status, refused) = misconfigured
        .get_as(Some(&bearer(&token)), "/v1/whoami")
        .await;
    assert_eq!(status, 401);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("introspection_client_id"),
        "{refused}"
    );

    // Without introspection an opaque token is refused and the message names the setting.
    let plain = TestGateway::with_tokens("").await;
    let (status, refused) = plain
        .get_as(Some(&bearer("opaque-token")), "/v1/whoami")
        .await;
    assert_eq!(status, 401);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("introspection_client_id"),
        "{refused}"
    );
}
