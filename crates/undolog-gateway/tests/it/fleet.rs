//! What the dashboard's fleet views read: the tool catalog with each tier's reason, and an org's
//! last hour of calls.

use serde_json::{Value, json};
use undolog_types::Role;

use crate::harness::{Bank, TestGateway};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_says_each_tools_tier_and_why_its_upstream_and_its_compensation() {
    let bank = Bank::start().await;
    let toml = format!(
        r#"
[[upstreams]]
name = "bank"
url = "{}"
trust_annotations = true
[tools.transfer]
tier = "compensable"
compensation = {{ tool = "transfer", args = {{ from_account = "{{{{args.to_account}}}}", to_account = "{{{{args.from_account}}}}", amount = "{{{{args.amount}}}}" }} }}
"#,
        bank.url
    );
    let gw = TestGateway::start(&toml).await;
    let agent = gw.key("acme", Role::Agent).await;
    let (status, tools) = gw.get_as(Some(&agent), "/v1/tools").await;
    assert_eq!(status, 200, "{tools}");
    let tool = |name: &str| -> Value {
        (tools.as_array().unwrap().iter())
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {tools}"))
            .clone()
    };
    // (tool, tier, where it comes from, words of the reason)
    for (name, tier, source, why) in [
        (
            "transfer",
            "compensable",
            "configuration",
            "the configuration says compensable",
        ),
        (
            "get_balance",
            "read_only",
            "read_only_hint",
            "marks it read-only",
        ),
        (
            "send_email",
            "irreversible",
            "default",
            "the default tier, irreversible",
        ),
    ] {
        let t = tool(name);
        assert_eq!(
            (&t["tier"], &t["tier_source"]),
            (&json!(tier), &json!(source)),
            "{t}"
        );
        assert!(t["why"].as_str().unwrap().contains(why), "{t}");
        assert_eq!(t["upstream"], "bank");
    }
    let compensation = &tool("transfer")["compensation"];
    assert_eq!(compensation["tool"], "transfer", "{compensation}");
    assert_eq!(compensation["args"]["to_account"], "{{args.from_account}}");
    assert_eq!(tool("send_email")["compensation"], Value::Null);
    let (status, _) = gw.get_as(None, "/v1/tools").await;
    assert_eq!(status, 401, "the catalog is for the gateway's callers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_counts_an_orgs_calls_by_outcome_and_the_approvals_waiting() {
    let gw = TestGateway::start("").await;
    let acme = gw.key("acme", Role::Agent).await;
    let globex = gw.key("globex", Role::Agent).await;
    let transfer = json!({"from_account": "alice", "to_account": "bob", "amount": 2});
    let email = json!({"to": "bob@example.com", "subject": "hi"});
    for (key, tool, args, status) in [
        (&acme, "transfer", &transfer, 200),
        (&acme, "transfer", &transfer, 200), // a replay
        (&acme, "send_email", &email, 202),
        (&globex, "get_balance", &json!({"account": "alice"}), 200),
    ] {
        let (got, body) = gw.rest_call(Some(key), "s-1", tool, args.clone()).await;
        assert_eq!(got, status, "{body}");
    }
    let (status, overview) = gw.get_as(Some(&acme), "/v1/overview").await;
    assert_eq!(status, 200, "{overview}");
    assert_eq!(overview["calls"], 3, "{overview}");
    assert_eq!(overview["approvals_waiting"], 1);
    let minutes = overview["minutes"].as_array().unwrap();
    let sum = |kind: &str| {
        minutes
            .iter()
            .map(|m| m[kind].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(
        (sum("executed"), sum("replayed"), sum("held")),
        (1, 1, 1),
        "{overview}"
    );
    assert_eq!(overview["replay_ratio"], json!(1.0 / 3.0));
    assert!(overview["p50_ms"].as_f64().unwrap() > 0.0, "{overview}");
    assert!(overview["p99_ms"].as_f64() >= overview["p50_ms"].as_f64());
    let (_, theirs) = gw.get_as(Some(&globex), "/v1/overview").await;
    assert_eq!(
        (&theirs["calls"], &theirs["approvals_waiting"]),
        (&json!(1), &json!(0)),
        "orgs apart"
    );
}
