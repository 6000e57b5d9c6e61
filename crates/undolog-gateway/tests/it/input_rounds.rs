//! A 2026-07-28 tool call that the upstream answers with `input_required`: the client gets the
//! upstream's request, that round is recorded as an `input_required` effect (never committed, so
//! never compensated) that keeps the request, and the retry carrying the answers is its own
//! recorded call. An upstream's JSON-RPC error reaches the client unchanged.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{conformance::Upstream, harness::TestGateway};

const SESSION: &str = "rounds";

/// A stateless 2026-07-28 `tools/call` with these client capabilities, in the test's session;
/// the HTTP status and the JSON-RPC response.
async fn call(gw: &TestGateway, mut params: Value, capabilities: Value) -> (u16, Value) {
    params["_meta"] = json!({ "io.undolog/session": SESSION });
    gw.rpc(
        None,
        "tools/call",
        params,
        capabilities,
        Duration::from_secs(60),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_required_round_reaches_the_client_and_the_answered_retry_is_its_own_effect() {
    let upstream = Upstream::start().await;
    // Compensable: identical calls replay, which an input_required round must not.
    let gw = TestGateway::start(&format!(
        "default_tier = \"read_only\"\n\n[[upstreams]]\nname = \"conformance\"\nurl = {:?}\n\n\
         [tools.test_input_required_result_elicitation]\ntier = \"compensable\"\n\
         compensation = {{ tool = \"test_simple_text\", args = {{}} }}\n",
        upstream.url
    ))
    .await;
    let ask = json!({"name": "test_input_required_result_elicitation", "arguments": {}});
    let elicitation = json!({"elicitation": {}});

    let (status, first) = call(&gw, ask.clone(), elicitation.clone()).await;
    assert_eq!(status, 200, "{first}");
    let asked = &first["result"];
    assert_eq!(asked["resultType"], "input_required", "{first}");
    assert_eq!(
        asked["inputRequests"]["user_name"]["method"], "elicitation/create",
        "the upstream's request, unchanged: {first}"
    );
    let round_effect = asked["_meta"]["io.undolog/effect_id"].clone();
    assert!(round_effect.is_string(), "names its effect: {first}");

    // Asked again, identically: asked again upstream, not the first round replayed.
    let (_, again) = call(&gw, ask.clone(), elicitation.clone()).await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_ne!(
        again["result"]["_meta"]["io.undolog/effect_id"], round_effect,
        "a round of its own: {again}"
    );

    let mut answered = ask.clone();
    answered["inputResponses"] =
        json!({"user_name": {"action": "accept", "content": {"name": "Ada"}}});
    let (status, second) = call(&gw, answered, elicitation).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        second["result"]["content"][0]["text"], "Hello, Ada!",
        "{second}"
    );

    // The upstream's own error, code and data, for a capability this client did not declare.
    let (status, refused) = call(
        &gw,
        json!({"name": "test_missing_capability", "arguments": {}}),
        json!({}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}}),
        "{refused}"
    );
    assert_eq!(status, 400, "{refused}");

    let effects = gw.get(&format!("/v1/sessions/{SESSION}/effects")).await;
    let effects = effects.as_array().expect("a list of effects");
    let summary: Vec<(String, String)> = effects
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or_default().to_owned(),
                e["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "test_input_required_result_elicitation".into(),
                "input_required".into()
            ),
            (
                "test_input_required_result_elicitation".into(),
                "input_required".into()
            ),
            (
                "test_input_required_result_elicitation".into(),
                "committed".into()
            ),
            ("test_missing_capability".into(), "failed".into()),
        ],
        "{effects:?}"
    );
    assert_eq!(effects[0]["id"], round_effect);
    assert_eq!(
        effects[0]["result"]["inputRequests"]["user_name"]["method"], "elicitation/create",
        "the round keeps what the upstream asked: {}",
        effects[0]
    );
    assert!(
        effects[0]["error"].is_null(),
        "not a failure: {}",
        effects[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_answers_to_two_different_tools_are_two_rounds() {
    let upstream = Upstream::start().await;
    let gw = TestGateway::start(&format!(
        "default_tier = \"read_only\"\n\n[[upstreams]]\nname = \"conformance\"\nurl = {:?}\n",
        upstream.url
    ))
    .await;
    let elicitation = json!({"elicitation": {}});
    let answer = json!({"user_name": {"action": "accept", "content": {"name": "Ada"}}});
    for (tool, expected) in [
        ("test_input_required_result_elicitation", "Hello, Ada!"),
        ("test_tool_with_task", "Hello, Ada! The work is done."),
    ] {
        let answered = json!({"name": tool, "arguments": {}, "inputResponses": answer});
        let (status, done) = call(&gw, answered, elicitation.clone()).await;
        assert_eq!(status, 200, "{tool}: {done}");
        assert_eq!(
            done["result"]["content"][0]["text"], expected,
            "{tool}: {done}"
        );
    }
}
