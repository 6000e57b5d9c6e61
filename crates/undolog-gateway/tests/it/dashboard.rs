//! The dashboard's files come from the binary with no credentials; its data does not. A browser's
//! `EventSource` may send the key as `?access_token=` on `GET /events`, and nowhere else.

use std::time::Duration;

use serde_json::json;

use crate::{events::next_events, harness::TestGateway};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_assets_are_served_without_a_key_but_no_data_is() {
    let gw = TestGateway::start("").await;
    let open = gw.get("/v1/auth").await;
    assert_eq!(
        open,
        json!({"api_key_required": false, "sign_in": null, "signed_in": false})
    );
    gw.key("acme", undolog_types::Role::Admin).await;
    // Open mode ends within a second of the first key (the gateway rechecks once a second).
    tokio::time::sleep(Duration::from_millis(1100)).await;

    for (path, content_type, contains) in [
        ("/", "text/html", "<script src=\"/assets/app.js\""),
        ("/assets/app.js", "text/javascript", "new EventSource("),
        ("/assets/app.css", "text/css", ":focus-visible"),
    ] {
        let response = gw
            .http
            .get(format!("{}{path}", gw.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers().clone();
        assert!(
            headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with(content_type),
            "{path}: {headers:?}"
        );
        assert!(headers.contains_key("content-security-policy"), "{path}");
        let body = response.text().await.unwrap();
        assert!(body.contains(contains), "{path} lacks {contains:?}");
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path} must fetch nothing from elsewhere"
        );
    }
    assert_eq!(
        gw.get("/v1/auth").await,
        json!({"api_key_required": true, "sign_in": null, "signed_in": false}),
        "the page learns it must ask for a key"
    );
    let sessions = gw
        .http
        .get(format!("{}/v1/sessions", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(sessions.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_take_the_key_in_the_query_and_still_show_one_org_only() {
    let gw = TestGateway::start("").await;
    let acme = gw.key("acme", undolog_types::Role::Admin).await;
    let globex = gw.key("globex", undolog_types::Role::Admin).await;
    let get = |path: String| {
        let request = gw.http.get(format!("{}{path}", gw.base)).send();
        async move { request.await.unwrap() }
    };

    let acme_events = get(format!("/events?access_token={}", acme.secret)).await;
    assert_eq!(acme_events.status(), 200);
    let globex_events = get(format!("/events?x=1&access_token={}", globex.secret)).await;
    assert_eq!(globex_events.status(), 200);
    assert_eq!(
        get("/events?access_token=ul_nope".into()).await.status(),
        401
    );
    assert_eq!(
        get(format!("/v1/sessions?access_token={}", acme.secret))
            .await
            .status(),
        401,
        "only /events takes a key in the URL"
    );
    let me: serde_json::Value = gw
        .http
        .get(format!("{}/v1/whoami", gw.base))
        .bearer_auth(&acme.secret)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        me,
        json!({"org": "acme", "key_id": acme.id, "role": "admin",
               "principal": format!("api-key:{}", acme.id)})
    );

    let response = gw
        .http
        .post(format!("{}/mcp/tool_call", gw.base))
        .bearer_auth(&acme.secret)
        .header("x-undolog-session-id", "s-1")
        .json(&json!({"name": "transfer", "arguments": {"from_account": "alice", "to_account": "bob", "amount": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = next_events(acme_events, 2).await;
    assert_eq!(seen, ["effect_intercepted", "effect_committed"]);
    let leaked = tokio::time::timeout(Duration::from_millis(500), next_events(globex_events, 1))
        .await
        .unwrap_or_default();
    assert!(leaked.is_empty(), "globex saw acme's events: {leaked:?}");
}
