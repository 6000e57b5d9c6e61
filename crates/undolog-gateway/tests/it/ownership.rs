//! A call is settled by its owner alone. While the gateway runs a call upstream, nobody can
//! commit or fail it through the SDK API: not the caller's own key, nor a colleague's, nor an
//! admin's, with no lease token or with one made up; another org finds no such effect. The
//! call ends as the upstream answered, and its record is the upstream's answer.

use std::time::Duration;

use serde_json::json;
use undolog_types::Role;

use crate::harness::{Bank, TestGateway};

/// A well-formed lease token that no Execute answer gave.
fn made_up_token() -> String {
    format!("lt_{}", "5".repeat(64))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_but_the_gateway_settles_a_call_the_gateway_is_running() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n[tools.hang]\ntier = \"compensable\"\n",
        bank.url
    ))
    .await;
    let caller = gw.key("acme", Role::Agent).await;
    let colleague = gw.key("acme", Role::Agent).await;
    let admin = gw.key("acme", Role::Admin).await;
    let stranger = gw.key("other", Role::Admin).await;

    let running = {
        let (gw, caller) = (&gw, &caller);
        async move {
            gw.rest_call(Some(caller), "own-1", "hang", json!({"seconds": 3}))
                .await
        }
    };
    let attacks = async {
        let effect = pending_effect(&gw, &admin, "own-1").await;
        let result = json!({"forged": true});
        let cases = [
            (
                "the caller, no token",
                &caller,
                "fail",
                None,
                400,
                "bad_request",
            ),
            (
                "the caller, a made-up token",
                &caller,
                "fail",
                Some(made_up_token()),
                403,
                "not_owner",
            ),
            (
                "a colleague, no token",
                &colleague,
                "commit",
                None,
                400,
                "bad_request",
            ),
            (
                "a colleague, a made-up token",
                &colleague,
                "fail",
                Some(made_up_token()),
                403,
                "not_owner",
            ),
            (
                "a colleague's forged result",
                &colleague,
                "commit",
                Some(made_up_token()),
                403,
                "not_owner",
            ),
            (
                "an admin, a made-up token",
                &admin,
                "commit",
                Some(made_up_token()),
                403,
                "not_owner",
            ),
            (
                "another org",
                &stranger,
                "fail",
                Some(made_up_token()),
                404,
                "unknown_effect",
            ),
        ];
        for (who, key, act, token, status, code) in cases {
            let mut body = match act {
                "commit" => json!({"result": result}),
                _ => json!({"error": "it did not run"}),
            };
            if let Some(token) = token {
                body["lease_token"] = json!(token);
            }
            let path = format!("/v1/effects/{effect}/{act}");
            let (seen, answer) = gw.post_as(Some(key), &path, body).await;
            assert_eq!(
                (seen, answer["code"].as_str()),
                (status, Some(code)),
                "{who}: {answer}"
            );
            if code == "bad_request" {
                let error = answer["error"].as_str().unwrap_or_default();
                assert!(
                    error.contains("lease_token"),
                    "{who} is told what to send: {error}"
                );
            }
        }
        effect
    };
    let ((status, answer), effect) = tokio::join!(running, attacks);

    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("executed")),
        "{answer}"
    );
    let (_, record) = gw
        .get_as(Some(&admin), &format!("/v1/effects/{effect}"))
        .await;
    assert_eq!(record["state"], "committed", "{record}");
    assert_eq!(
        record["result"]["structuredContent"]["slept"],
        json!(3.0),
        "{record}"
    );
}

/// The id of the pending effect in `session`, as soon as it is listed.
async fn pending_effect(
    gw: &TestGateway,
    key: &crate::harness::Credential,
    session: &str,
) -> String {
    let path = format!("/v1/sessions/{session}/effects");
    for _ in 0..200 {
        let (_, effects) = gw.get_as(Some(key), &path).await;
        let pending = (effects.as_array().into_iter().flatten())
            .find(|e| e["state"] == "pending")
            .and_then(|e| e["id"].as_str());
        if let Some(id) = pending {
            return id.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no pending effect in {session}");
}
