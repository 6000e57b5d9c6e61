//! Secrets stay out of the log: what is stored is what was sent (after the redactor), a call the
//! guard stopped is stored with the token replaced, and tokens are found wherever they hide.

use serde_json::{Value, json};

use crate::harness::{BANK_TOOLS, Bank, Client, TestGateway, guarded};

const SECRET: &str = "ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oP";

async fn logged(gw: &TestGateway, session: &str) -> Value {
    gw.get(&format!("/v1/sessions/{session}/effects")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_guard_stopped_is_recorded_without_the_token() {
    let (source, sink) = (Bank::start().await, Bank::start().await);
    let gw = guarded(
        &source,
        &sink,
        "[tools.sink__transfer]\ntier = \"compensable\"",
    )
    .await;
    let mut client = Client::connect(
        "mcp2",
        "legacy",
        &gw.mcp_url(),
        &["X-UndoLog-Session-Id: s-1"],
    )
    .await;
    client
        .call("source__with_meta", json!({"note": SECRET}))
        .await;
    let blocked = client
        .try_call(
            "sink__transfer",
            json!({"from_account": "alice", "to_account": SECRET, "amount": 1}),
        )
        .await;
    assert!(
        blocked["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cross-boundary"),
        "{blocked}"
    );

    let effects = logged(&gw, "s-1").await;
    let rejected = effects
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["state"] == "rejected")
        .unwrap_or_else(|| panic!("{effects}"));
    assert_eq!(
        rejected["args"]["to_account"], "[redacted:github_pat]",
        "{rejected}"
    );
    assert!(!rejected.to_string().contains(SECRET), "{rejected}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redactor_finds_tokens_as_keys_and_inside_longer_strings() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{BANK_TOOLS}[tools.with_meta]\ntier = \"read_only\"\n\
         [[interceptors]]\nbuiltin = \"redactor\"\n",
        bank.url
    ))
    .await;
    let hidden = [
        format!("x{SECRET}"),
        format!("{SECRET}_"),
        format!("token={SECRET};"),
    ];
    for (i, note) in hidden.iter().enumerate() {
        let (status, answer) = gw
            .rest_call(
                None,
                "r-1",
                "transfer",
                json!({"from_account": "alice", "to_account": note, "amount": i + 1}),
            )
            .await;
        assert_eq!(status, 200, "{answer}");
    }
    // The arguments are an object; a token may be one of its keys (whatever the tool makes of it,
    // the call is recorded).
    gw.rest_call(
        None,
        "r-1",
        "with_meta",
        json!({"note": "n", SECRET: "as a key"}),
    )
    .await;

    let effects = logged(&gw, "r-1").await;
    assert!(!effects.to_string().contains(SECRET), "{effects}");
    let sent = bank.ledger().await;
    assert!(
        !serde_json::to_string(&sent).unwrap().contains(SECRET),
        "what was sent is redacted too: {sent:?}"
    );
    assert_eq!(sent.len(), hidden.len(), "{sent:?}");
}
