//! The interceptor chain on `tools/call`, through a real MCP client, the Python bank upstream, the
//! built-in interceptors served over stdio by `undolog-builtin-interceptors` (a real interceptor
//! server) and in process, and misbehaving interceptor servers.

use std::{path::PathBuf, sync::OnceLock};

use serde_json::{Value, json};
use undolog_gateway::{ConfigSource, Gateway, GatewayConfig};
use undolog_interceptors::{InterceptorClient, ListParams};
use undolog_store::Effect;
use undolog_types::{EffectState, OrgId, SessionId};

use crate::harness::{
    BANK_TOOLS, Bank, Client, TestGateway, fixture, python, repo, stdio_bank_toml,
};

const SESSION: &str = "run-1";
const SECRET: &str = "ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oP";

/// `undolog-builtin-interceptors`, built once if this run has not built it yet.
fn builtin_server() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("target"));
        let bin = target.join("debug/undolog-builtin-interceptors");
        if !bin.is_file() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args(["build", "-j", "1", "-p", "undolog-interceptors"])
                .args(["--bin", "undolog-builtin-interceptors"])
                .current_dir(repo())
                .status()
                .expect("cargo runs");
            assert!(
                status.success(),
                "cannot build undolog-builtin-interceptors"
            );
        }
        bin
    })
}

fn remote_builtins() -> String {
    format!(
        "[[interceptors]]\ncommand = {:?}\n",
        builtin_server().display().to_string()
    )
}

fn stuck(mode: &str, extra: &str) -> String {
    format!(
        "[[interceptors]]\ncommand = {:?}\nargs = [{:?}, \"--{mode}\"]\ntimeout_ms = 500\n{extra}\n",
        python("mcp2").display().to_string(),
        fixture("stuck_interceptor.py").display().to_string(),
    )
}

async fn gateway(bank: &Bank, interceptors: &str) -> TestGateway {
    TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{interceptors}\n{BANK_TOOLS}",
        bank.url
    ))
    .await
}

async fn client(gw: &TestGateway) -> Client {
    let header = format!("X-UndoLog-Session-Id: {SESSION}");
    Client::connect("mcp2", "legacy", &gw.mcp_url(), &[&header]).await
}

async fn effects(gw: &TestGateway) -> Vec<Effect> {
    gw.gateway
        .engine()
        .unwrap()
        .session_effects(
            &OrgId::new("default").unwrap(),
            &SessionId::new(SESSION).unwrap(),
        )
        .await
        .unwrap()
}

fn transfer(to: &str, amount: Value) -> Value {
    json!({"from_account": "alice", "to_account": to, "amount": amount})
}

/// The chain verdicts the log keeps with an effect, in their own record: never in what the tool
/// answered.
fn verdicts(effect: &Effect) -> &Value {
    if let Some(result) = &effect.result {
        assert!(
            result["_meta"].get("io.undolog/interceptors").is_none(),
            "verdicts stay out of the tool's result: {result}"
        );
    }
    effect.verdicts.as_ref().expect("recorded verdicts")
}

fn entry<'a>(verdict: &'a Value, interceptor: &str) -> &'a Value {
    verdict["results"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["interceptor"] == interceptor))
        .unwrap_or_else(|| panic!("no {interceptor} in {verdict}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_never_reaches_the_upstream_and_is_recorded_as_rejected() {
    let bank = Bank::start().await;
    let chain = format!(
        "{}[[interceptors]]\nbuiltin = \"arguments\"\n",
        remote_builtins()
    );
    let gw = gateway(&bank, &chain).await;
    let mut client = client(&gw).await;

    let answer = client
        .try_call("transfer", transfer("bob", json!("ten")))
        .await;
    assert_eq!(answer["code"], -32602, "{answer}");
    let message = answer["error"].as_str().unwrap();
    assert!(message.contains("blocked by interceptors"), "{message}");
    assert!(message.contains("undolog/argument-validator"), "{message}");

    assert!(
        bank.ledger().await.is_empty(),
        "the upstream ran a denied call"
    );
    let effects = effects(&gw).await;
    assert_eq!(effects.len(), 1);
    let rejected = &effects[0];
    assert_eq!(rejected.state, EffectState::Rejected);
    assert_eq!(rejected.tool, "transfer");
    assert!(
        rejected
            .error
            .as_deref()
            .unwrap()
            .contains("argument-validator")
    );
    assert_eq!(verdicts(rejected)["request"]["status"], "validation_failed");

    // The same call with good arguments runs: a rejection is not replayed.
    let ok = client.call("transfer", transfer("bob", json!(10))).await;
    assert_ne!(ok["isError"], true, "{ok}");
    assert_eq!(bank.ledger().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_redactors_change_is_what_the_upstream_receives_and_what_is_recorded() {
    let bank = Bank::start().await;
    let gw = gateway(&bank, &remote_builtins()).await;
    let mut client = client(&gw).await;

    let to = format!("note {SECRET}");
    let result = client.call("transfer", transfer(&to, json!(5))).await;
    assert_ne!(result["isError"], true, "{result}");

    let ledger = bank.ledger().await;
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["to_account"], "note [redacted:github_pat]");
    let effects = effects(&gw).await;
    let effect = &effects[0];
    assert_eq!(effect.state, EffectState::Committed);
    assert_eq!(
        effect.args.as_map()["to_account"],
        "note [redacted:github_pat]"
    );
    let request = &verdicts(effect)["request"];
    assert_eq!(request["status"], "success");
    assert_eq!(entry(request, "undolog/secret-redactor")["applied"], true);
    assert!(
        !format!("{effect:?}").contains(SECRET),
        "the log kept the secret"
    );

    // The identical call (same secret) is signed after redaction too: replayed, not rerun.
    let again = client.call("transfer", transfer(&to, json!(5))).await;
    assert_eq!(again["_meta"]["io.undolog/replayed"], true, "{again}");
    assert_eq!(bank.ledger().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_interceptors_verdict_is_in_the_log_and_blocks_nothing() {
    let bank = Bank::start().await;
    let chain = "[limits]\nupstream_timeout_secs = 1\n\
                 [[interceptors]]\nbuiltin = \"redactor\"\nmode = \"audit\"\n\
                 [tools.fail_always]\ntier = \"read_only\"\n[tools.hang]\ntier = \"read_only\"\n";
    let gw = gateway(&bank, chain).await;
    let mut client = client(&gw).await;

    let to = format!("note {SECRET}");
    let result = client.call("transfer", transfer(&to, json!(5))).await;
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(bank.ledger().await[0]["to_account"], to.as_str());

    let effects = effects(&gw).await;
    let request = &verdicts(&effects[0])["request"];
    assert_eq!(request["status"], "success");
    let redactor = entry(request, "undolog/secret-redactor");
    assert_eq!(redactor["mode"], "audit");
    assert_eq!(redactor["applied"], false);
    assert_eq!(redactor["mutation"]["modified"], true);

    // Failed calls keep the verdicts too: with the tool's error result, or alone when the
    // upstream gave none (here: it did not answer in time).
    client.call("fail_always", json!({})).await;
    client.try_call("hang", json!({"seconds": 5})).await;
    let effects = self::effects(&gw).await;
    for failed in &effects[1..] {
        assert_eq!(failed.state, EffectState::Failed, "{failed:?}");
        assert_eq!(
            verdicts(failed)["request"]["status"],
            "success",
            "{failed:?}"
        );
    }
    assert_eq!(effects.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_lists_the_interceptors_it_runs() {
    let bank = Bank::start().await;
    let chain = format!(
        "{}[[interceptors]]\nbuiltin = \"arguments\"\n",
        remote_builtins()
    );
    let gw = gateway(&bank, &chain).await;
    let mcp = InterceptorClient::connect_http(&gw.mcp_url())
        .await
        .unwrap();
    assert!(mcp.advertises_interceptors());
    let names: Vec<String> = mcp
        .list(&ListParams::default())
        .await
        .unwrap()
        .interceptors
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(
        names,
        [
            "undolog/secret-redactor",
            "undolog/cross-boundary-guard",
            "undolog/argument-validator"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_garbled_or_crashed_interceptor_blocks_the_call_unless_fail_open() {
    let bank = Bank::start().await;
    for (chain, code) in [(stuck("hang", ""), -32000), (stuck("garbage", ""), -32603)] {
        let gw = gateway(&bank, &chain).await;
        let mut client = client(&gw).await;
        let answer = client.try_call("transfer", transfer("bob", json!(1))).await;
        assert_eq!(answer["code"], code, "{chain}: {answer}");
        assert_eq!(effects(&gw).await[0].state, EffectState::Rejected);
    }
    assert!(
        bank.ledger().await.is_empty(),
        "a blocked call ran upstream"
    );

    // A server that crashed is restarted on the next call: one call blocked, not every call.
    let marker = tempfile::tempdir().unwrap();
    let marker = marker.path().join("crashed");
    let chain = format!(
        "[[interceptors]]\ncommand = {:?}\nargs = [{:?}, \"--crash-first\", {:?}]\n",
        python("mcp2").display().to_string(),
        fixture("stuck_interceptor.py").display().to_string(),
        marker.display().to_string(),
    );
    let gw = gateway(&bank, &chain).await;
    let mut agent = client(&gw).await;
    let crashed = agent.try_call("transfer", transfer("bob", json!(1))).await;
    assert_eq!(crashed["code"], -32603, "{crashed}");
    assert!(
        bank.ledger().await.is_empty(),
        "a blocked call ran upstream"
    );
    let restarted = agent.call("transfer", transfer("bob", json!(1))).await;
    assert_ne!(restarted["isError"], true, "{restarted}");
    assert_eq!(bank.ledger().await.len(), 1);

    let gw = gateway(&bank, &stuck("hang", "fail_open = true")).await;
    let mut client = client(&gw).await;
    let ok = client.call("transfer", transfer("bob", json!(1))).await;
    assert_ne!(ok["isError"], true, "{ok}");
    assert_eq!(bank.ledger().await.len(), 2);
    let effects = effects(&gw).await;
    let request = &verdicts(&effects[0])["request"];
    assert_eq!(
        entry(request, "stuck/validator")["skipped"],
        true,
        "{request}"
    );
}

/// Start-up with this `[[interceptors]]` configuration, expected to fail; the message.
async fn startup_error(bank: &Bank, interceptors: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("undolog.toml");
    let toml = format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{interceptors}",
        bank.url
    );
    std::fs::write(&file, toml).unwrap();
    let source = ConfigSource {
        file: Some(file),
        listen: Some("127.0.0.1:0".into()),
        store: Some(format!("sqlite://{}", dir.path().join("u.db").display())),
        engine: None,
    };
    let config = match GatewayConfig::load(&source) {
        Ok(config) => config,
        Err(e) => return e.to_string(),
    };
    match Gateway::build(config).await {
        Ok(_) => panic!("started with {interceptors}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_interceptor_configuration_stops_start_up_naming_the_key() {
    let bank = Bank::start().await;
    let server = builtin_server().display().to_string();
    let cases = [
        (
            "[[interceptors]]\nbuiltin = \"guard\"\nconfig = { toolServers = 5 }\n".to_owned(),
            "`interceptors[0].config`",
        ),
        (
            format!("[[interceptors]]\ncommand = {server:?}\nnames = [\"nope\"]\n"),
            "`interceptors[0].names`",
        ),
        (
            "[[interceptors]]\nbuiltin = \"policy\"\nconfig = { deny = [\"sometimes\"] }\n"
                .to_owned(),
            "`interceptors[0].config`",
        ),
        (stuck("bad-descriptor", ""), "`interceptors[0].command`"),
        (
            stuck("bad-schema", ""),
            "`interceptors[0]`: interceptor `stuck/validator` has an invalid configSchema",
        ),
        (
            "[[interceptors]]\nbuiltin = \"firewall\"\n".to_owned(),
            "`interceptors[0].builtin`",
        ),
        (
            "[[interceptors]]\ncommand = \"/nonexistent/interceptor\"\n".to_owned(),
            "`interceptors[0].command`",
        ),
        (
            "[[interceptors]]\nbuiltin = \"redactor\"\nurl = \"http://127.0.0.1:1/mcp\"\n"
                .to_owned(),
            "`interceptors[0]`",
        ),
        (
            "[[interceptors]]\nbuiltin = \"redactor\"\nmode = \"loud\"\n".to_owned(),
            "`interceptors[0].mode`",
        ),
        (
            "[[interceptors]]\nbuiltin = \"redactor\"\n[[interceptors]]\nbuiltin = \"redactor\"\n"
                .to_owned(),
            "`interceptors[1]`",
        ),
    ];
    for (toml, key) in cases {
        let message = startup_error(&bank, &toml).await;
        assert!(message.contains(key), "{toml}\n→ {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_read_from_one_upstream_cannot_be_sent_to_another() {
    let (source, sink) = (Bank::start().await, Bank::start().await);
    let gw = crate::harness::guarded(
        &source,
        &sink,
        "[tools.sink__transfer]\ntier = \"compensable\"",
    )
    .await;
    let mut client = client(&gw).await;

    // Nothing read yet: sending the credential anywhere is allowed.
    let first = client
        .call("sink__transfer", transfer("before", json!(1)))
        .await;
    assert_ne!(first["isError"], true, "{first}");
    // The source answers with the credential (the response phase sees it)...
    let read = client
        .call("source__with_meta", json!({"note": SECRET}))
        .await;
    assert!(read["structuredContent"]["note"] == SECRET, "{read}");
    // ...so it may not go to the sink, but may go back to the source.
    let leak = client
        .try_call("sink__transfer", transfer(SECRET, json!(1)))
        .await;
    assert_eq!(leak["code"], -32602, "{leak}");
    assert!(
        leak["error"].as_str().unwrap().contains("cross-boundary"),
        "{leak}"
    );
    let back = client
        .call("source__with_meta", json!({"note": SECRET}))
        .await;
    assert_ne!(back["isError"], true, "{back}");

    let sent: Vec<Value> = sink.ledger().await;
    assert_eq!(
        sent.len(),
        1,
        "only the transfer before the read ran: {sent:?}"
    );
    let states: Vec<EffectState> = effects(&gw).await.iter().map(|e| e.state).collect();
    assert_eq!(
        states,
        [
            EffectState::Committed,
            EffectState::Committed,
            EffectState::Rejected,
            EffectState::Committed
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_rest_surface_a_blocked_call_is_403_and_the_admin_api_shows_it_rejected() {
    // The demo bank in process, the argument validator in process.
    let gw = TestGateway::start("[[interceptors]]\nbuiltin = \"arguments\"\n").await;
    let response = gw
        .http
        .post(format!("{}/mcp/tool_call", gw.base))
        .header("x-undolog-session-id", SESSION)
        .json(&json!({"name": "transfer", "arguments": transfer("bob", json!("ten"))}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("argument-validator"),
        "{body}"
    );
    let listed = gw.get(&format!("/v1/sessions/{SESSION}/effects")).await;
    let states: Vec<&str> = listed
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|e| e["state"].as_str())
        .collect();
    assert_eq!(states, ["rejected"], "{listed}");
}

fn spend_limit(config: &str) -> String {
    format!(
        "[[interceptors]]\ncommand = {:?}\nargs = [{:?}]\nconfig = {config}\n",
        python("mcp2").display().to_string(),
        repo()
            .join("examples/interceptors/spend_limit.py")
            .display()
            .to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_example_interceptor_server_enforces_its_limit_and_its_config_schema() {
    let bank = Bank::start().await;
    let gw = gateway(&bank, &spend_limit("{ maxAmount = 100 }")).await;
    let mut client = client(&gw).await;

    let refused = client
        .try_call("transfer", transfer("bob", json!(500)))
        .await;
    assert_eq!(refused["code"], -32602, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("above the limit of 100"),
        "{refused}"
    );
    let close = client.call("transfer", transfer("bob", json!(90))).await;
    assert_ne!(close["isError"], true, "{close}");
    let ledger = bank.ledger().await;
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["amount"], 90);
    let effects = effects(&gw).await;
    assert_eq!(effects[0].state, EffectState::Rejected);
    let request = &verdicts(&effects[1])["request"];
    assert_eq!(request["validationSummary"]["warnings"], 1, "{request}");

    // Its configSchema is checked before the gateway serves anything.
    let message = startup_error(&bank, &spend_limit("{ maxAmount = \"lots\" }")).await;
    assert!(message.contains("`interceptors[0].config`"), "{message}");
    assert!(message.contains("example/spend-limit"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_request_from_an_upstream_goes_through_the_chain_to_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = stdio_bank_toml("bank", &dir.path().join("bank.json"));
    let gw = TestGateway::start(&format!(
        "{upstream}[tools.ask]\ntier = \"read_only\"\n\
         [[interceptors]]\nbuiltin = \"redactor\"\nevents = [\"sampling/createMessage\"]\n"
    ))
    .await;
    let mut cmd = tokio::process::Command::new(python("mcp2"));
    cmd.arg(fixture("client.py"))
        .args(["--url", &gw.mcp_url(), "--mode", "legacy"])
        .args(["--sampling-reply", "fine"])
        .args(["--header", &format!("X-UndoLog-Session-Id: {SESSION}")]);
    let mut client = Client::start(cmd).await;
    let result = client
        .call(
            "ask",
            json!({"question": format!("is {SECRET} still valid?")}),
        )
        .await;
    assert_eq!(
        result["structuredContent"]["answer"], "fine | saw: is [redacted:github_pat] still valid?",
        "{result}"
    );
    // Only the sampling request was redacted: the tool call itself is not hooked.
    let effects = effects(&gw).await;
    let question = &effects[0].args.as_map()["question"];
    assert!(question.as_str().unwrap().contains(SECRET), "{question}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_built_in_refuses_by_tier_or_approval_and_notes_the_classification() {
    let bank = Bank::start().await;
    let chain = "[[interceptors]]\nbuiltin = \"policy\"\n\
                 config = { deny = [\"irreversible\"], warn = [\"compensable\"] }\n";
    let gw = gateway(&bank, chain).await;
    let mut agent = client(&gw).await;
    let email = json!({"to": "ceo@example.com", "subject": "hi"});
    let refused = agent.try_call("send_email", email.clone()).await;
    assert_eq!(refused["code"], -32602, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("`send_email` is irreversible"),
        "{refused}"
    );
    agent.call("transfer", transfer("bob", json!(3))).await;
    agent.call("get_balance", json!({"account": "bob"})).await;
    let effects = effects(&gw).await;
    let states: Vec<EffectState> = effects.iter().map(|e| e.state).collect();
    assert_eq!(
        states,
        [
            EffectState::Rejected,
            EffectState::Committed,
            EffectState::Committed
        ]
    );
    let noted = |e: &Effect| entry(&verdicts(e)["request"], "undolog/policy").clone();
    assert_eq!(noted(&effects[1])["validation"]["severity"], "warn");
    assert_eq!(
        noted(&effects[1])["validation"]["info"]["tier"],
        "compensable"
    );
    assert_eq!(
        noted(&effects[2])["validation"]["info"]["tier"],
        "read_only"
    );

    // approval = "deny": what would wait for a person is refused at once, and nobody is asked.
    let chain = "[[interceptors]]\nbuiltin = \"policy\"\nconfig = { approval = \"deny\" }\n";
    let gw = gateway(&bank, chain).await;
    let mut agent = client(&gw).await;
    let refused = agent.try_call("send_email", email).await;
    assert_eq!(refused["code"], -32602, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("needs a person's approval"),
        "{refused}"
    );
    let pending = gw.get("/v1/approvals?status=pending").await;
    assert_eq!(pending, json!([]));
    assert!(
        bank.ledger()
            .await
            .iter()
            .all(|op| op["op"] != "send_email")
    );
}
