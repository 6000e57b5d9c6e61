//! Nothing gets past approval or the interceptor chain by way of undo. An undo step runs with no
//! person asked, so: an SDK effect may name only a compensation the configuration declares (or
//! a function local to the SDK caller); a tool that waits for a person is never run as one; and
//! every upstream compensation passes the chain like any call.

use serde_json::{Value, json};

use crate::harness::{BANK_TOOLS, Bank, Client, TestGateway, guarded};

const SECRET: &str = "ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oP";

/// An SDK effect in `session` at `step`, committed, with this compensation; the intercept's
/// answer.
async fn sdk_effect(
    gw: &TestGateway,
    session: &str,
    step: u64,
    compensation: Value,
) -> (u16, Value) {
    let intercept = json!({
        "session_id": session, "tool": "charge_card", "arguments": {"cents": 500},
        "step": step, "tier": "compensable", "compensation": compensation,
    });
    let (status, answer) = gw.post("/v1/effects", intercept).await;
    if status == 200 {
        let effect = answer["effect_id"].as_str().unwrap();
        let (committed, _) = gw
            .post(
                &format!("/v1/effects/{effect}/commit"),
                json!({"result": {"ok": true}, "lease_token": answer["lease_token"]}),
            )
            .await;
        assert_eq!(committed, 200);
    }
    (status, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sdk_effect_cannot_name_an_upstream_tool_the_configuration_does_not_declare() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{BANK_TOOLS}",
        bank.url
    ))
    .await;
    let email = json!({"to": "ceo@example.com", "subject": "laundered"});
    for (what, compensation) in [
        (
            "typed",
            json!({"kind": "upstream", "tool": "send_email", "args": email}),
        ),
        (
            "the older form",
            json!({"tool": "send_email", "args": email}),
        ),
        (
            "a read-only tool",
            json!({"kind": "upstream", "tool": "get_balance", "args": {}}),
        ),
    ] {
        let (status, answer) = sdk_effect(&gw, "l-1", 0, compensation).await;
        assert_eq!(status, 422, "{what}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(
            error.contains("not declared as a compensation"),
            "{what}: {error}"
        );
    }
    // What the configuration declares, and local functions, are taken.
    let declared = json!({"kind": "upstream", "tool": "transfer",
                          "args": {"from_account": "bob", "to_account": "alice", "amount": 1}});
    assert_eq!(sdk_effect(&gw, "l-1", 1, declared).await.0, 200);
    let local = json!({"kind": "local", "function": "refund"});
    assert_eq!(sdk_effect(&gw, "l-1", 2, local).await.0, 200);

    let (status, report) = gw.post("/v1/sessions/l-1/undo", json!({})).await;
    assert_eq!(status, 200, "{report}");
    let ledger = bank.ledger().await;
    assert!(
        ledger.iter().all(|op| op["op"] != "send_email"),
        "no email was ever sent: {ledger:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compensation_classified_irreversible_is_never_run() {
    let bank = Bank::start().await;
    // `send_email` is not configured here: the fail-closed default makes it irreversible.
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n\
         [tools.transfer]\ncompensation = {{ tool = \"send_email\", args = {{ to = \"x@example.com\", subject = \"undo\" }} }}\n",
        bank.url
    ))
    .await;
    let (status, _) = gw
        .rest_call(
            None,
            "l-2",
            "transfer",
            json!({"from_account": "alice", "to_account": "bob", "amount": 5}),
        )
        .await;
    assert_eq!(status, 200);
    // An SDK effect naming it is refused at once, though the configuration declares it.
    let named = json!({"kind": "upstream", "tool": "send_email",
                       "args": {"to": "x@example.com", "subject": "undo"}});
    let (status, answer) = sdk_effect(&gw, "l-2", 9, named).await;
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("waits for a person"),
        "{answer}"
    );
    let (status, report) = gw.post("/v1/sessions/l-2/undo", json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["state"], "compensation_failed", "{report}");
    let error = report["steps"][0]["outcome"]["error"].as_str().unwrap();
    assert!(error.contains("waits for a person's approval"), "{error}");
    let ledger = bank.ledger().await;
    assert!(
        ledger.iter().all(|op| op["op"] != "send_email"),
        "{ledger:?}"
    );
}

/// The hole as it was found: a token the cross-boundary guard stops when sent directly rode a
/// compensation past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compensation_passes_the_interceptor_chain_like_any_call() {
    let (source, sink) = (Bank::start().await, Bank::start().await);
    let compensation = "[tools.sink__transfer]\ncompensation = { tool = \"sink__transfer\", args = { \
        from_account = \"{{args.to_account}}\", to_account = \"{{args.from_account}}\", \
        amount = \"{{args.amount}}\" } }";
    let gw = guarded(&source, &sink, compensation).await;
    let mut client = Client::connect(
        "mcp2",
        "legacy",
        &gw.mcp_url(),
        &["X-UndoLog-Session-Id: l-3"],
    )
    .await;
    let read = client
        .call("source__with_meta", json!({"note": SECRET}))
        .await;
    assert_eq!(read["structuredContent"]["note"], SECRET, "{read}");
    let direct = client
        .try_call(
            "sink__transfer",
            json!({"from_account": "alice", "to_account": SECRET, "amount": 1}),
        )
        .await;
    assert!(
        direct["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cross-boundary"),
        "{direct}"
    );

    // The same token as an SDK effect's compensation, naming the declared compensation tool.
    let laundered = json!({"kind": "upstream", "tool": "sink__transfer",
                           "args": {"from_account": "alice", "to_account": SECRET, "amount": 1}});
    let (status, answer) = sdk_effect(&gw, "l-3", 0, laundered).await;
    assert_eq!(status, 200, "{answer}");
    let (status, report) = gw.post("/v1/sessions/l-3/undo", json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["state"], "compensation_failed", "{report}");
    let error = report["steps"][0]["outcome"]["error"].as_str().unwrap();
    assert!(
        error.contains("interceptor chain refused") && error.contains("cross-boundary"),
        "{error}"
    );
    let sent = sink.ledger().await;
    assert!(
        !serde_json::to_string(&sent).unwrap().contains(SECRET),
        "{sent:?}"
    );
}
