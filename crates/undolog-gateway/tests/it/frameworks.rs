//! Agent frameworks' own MCP clients through the gateway, each with the `mcp` it pins: LangGraph's
//! (langchain-mcp-adapters), the OpenAI Agents SDK's, and the TypeScript SDK's through the MCP
//! Inspector's CLI. Each lists the tools, sees a repeated transfer replayed (run once upstream),
//! and gets a held approval's outcome: approved, denied with the reason, or "awaiting approval"
//! when the hold time runs out, never a hang.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::process::Command;

use crate::harness::{
    BANK_TOOLS, Bank, Client, TestGateway, fixture, fixtures, text, undolog_meta,
};

/// How long a held call waits for a person in these tests (`approvals.hold_secs`). Longer than the
/// OpenAI Agents SDK's default 5 s read timeout, so that setting is needed and checked.
const HOLD_SECS: u64 = 7;

/// What a framework handed its user for one call, in a CallToolResult's shape, or its error.
type Answer = Result<Value, String>;

/// One framework client, connected to the gateway.
pub(crate) enum Agent {
    /// A Python framework client speaking tests/fixtures/framework_lines.py's protocol.
    Lines(Box<Client>),
    /// The Inspector's CLI: one process (and one MCP session) per request.
    Inspector(Inspector),
}

enum Pending {
    Lines(u64),
    Inspector(tokio::task::JoinHandle<Answer>),
}

impl Agent {
    /// LangGraph's MultiServerMCPClient: `get_tools()` (a new MCP session per call), or with
    /// `explicit_session` one `client.session()` for all calls.
    pub(crate) async fn langchain(url: &str, headers: &[&str], explicit_session: bool) -> Agent {
        let mut cmd = Command::new(framework_python("langchain"));
        cmd.arg(fixture("langchain_client.py")).args(["--url", url]);
        for header in headers {
            cmd.args(["--header", header]);
        }
        if explicit_session {
            cmd.arg("--session");
        }
        Agent::Lines(Box::new(Client::start(cmd).await))
    }

    /// The OpenAI Agents SDK's MCPServerStreamableHttp; `timeout` is its
    /// `client_session_timeout_seconds` (`None`: the SDK's default).
    async fn openai_agents(url: &str, headers: &[&str], timeout: Option<u64>) -> Agent {
        let mut cmd = Command::new(framework_python("openai-agents"));
        cmd.arg(fixture("openai_agents_client.py"))
            .args(["--url", url]);
        for header in headers {
            cmd.args(["--header", header]);
        }
        if let Some(seconds) = timeout {
            cmd.args(["--session-timeout", &seconds.to_string()]);
        }
        Agent::Lines(Box::new(Client::start(cmd).await))
    }

    /// The protocol revision the client settled on, when it says.
    fn protocol(&self) -> &str {
        match self {
            Agent::Lines(client) => &client.protocol,
            Agent::Inspector(_) => "",
        }
    }

    fn inspector(url: &str, headers: &[&str]) -> Agent {
        Agent::Inspector(Inspector {
            url: url.to_owned(),
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
        })
    }

    async fn list_tools(&mut self) -> Vec<String> {
        match self {
            Agent::Lines(client) => client.list_tools().await,
            Agent::Inspector(inspector) => {
                let listed = inspector
                    .run(&["--method", "tools/list"])
                    .await
                    .unwrap_or_else(|e| panic!("inspector tools/list: {e}"));
                listed["tools"]
                    .as_array()
                    .unwrap_or_else(|| panic!("no tools in {listed}"))
                    .iter()
                    .map(|t| t["name"].as_str().unwrap().to_owned())
                    .collect()
            }
        }
    }

    async fn start_call(&mut self, tool: &str, arguments: Value) -> Pending {
        match self {
            Agent::Lines(client) => Pending::Lines(client.start_call(tool, arguments).await),
            Agent::Inspector(inspector) => {
                let mut args = vec!["--method".to_owned(), "tools/call".to_owned()];
                args.extend(["--tool-name".to_owned(), tool.to_owned()]);
                for (name, value) in arguments.as_object().unwrap() {
                    let value = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    args.extend(["--tool-arg".to_owned(), format!("{name}={value}")]);
                }
                let inspector = inspector.clone();
                Pending::Inspector(tokio::spawn(async move {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    inspector.run(&args).await
                }))
            }
        }
    }

    async fn finish(&mut self, pending: Pending) -> Answer {
        match (self, pending) {
            (Agent::Lines(client), Pending::Lines(id)) => {
                let answer = client.answer(id).await;
                match answer.get("ok") {
                    Some(ok) => Ok(ok.clone()),
                    None => Err(answer["error"].as_str().unwrap_or_default().to_owned()),
                }
            }
            (Agent::Inspector(_), Pending::Inspector(run)) => run.await.unwrap(),
            _ => unreachable!("a call finishes on the agent that started it"),
        }
    }

    pub(crate) async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let pending = self.start_call(tool, arguments).await;
        self.finish(pending)
            .await
            .unwrap_or_else(|e| panic!("{tool} failed in the client: {e}"))
    }
}

#[derive(Clone)]
pub(crate) struct Inspector {
    url: String,
    headers: Vec<String>,
}

impl Inspector {
    /// `mcp-inspector-cli --cli URL --transport http [--header H]... ARGS`: its JSON output, or
    /// its error message when it exits non-zero.
    async fn run(&self, args: &[&str]) -> Answer {
        let package = fixtures().join("inspector/node_modules/@modelcontextprotocol/inspector-cli");
        let mut cmd = Command::new("node");
        cmd.arg(package.join("build/cli.js"))
            .args(["--cli", &self.url, "--transport", "http"]);
        for header in &self.headers {
            cmd.args(["--header", header]);
        }
        // inspector-cli 1.0.3 finds its own package.json relative to the working directory.
        cmd.args(args).current_dir(package.join("build"));
        let out = tokio::time::timeout(Duration::from_secs(90), cmd.kill_on_drop(true).output())
            .await
            .expect("the inspector answers within 90 s")
            .expect("node runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "{}{}",
                stdout,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        // The JSON, then a deprecation notice for the v1 Inspector.
        let json = &stdout[stdout
            .find('{')
            .unwrap_or_else(|| panic!("no JSON in {stdout}"))..];
        let value = serde_json::Deserializer::from_str(json)
            .into_iter::<Value>()
            .next()
            .unwrap_or_else(|| panic!("no JSON in {stdout}"))
            .unwrap_or_else(|e| panic!("{e}: {stdout}"));
        Ok(value)
    }
}

fn framework_python(venv: &str) -> PathBuf {
    let python = fixtures().join(venv).join("bin/python");
    assert!(
        python.exists(),
        "{} is missing: run crates/undolog-gateway/tests/fixtures/setup.sh",
        python.display()
    );
    python
}

async fn gateway(bank: &Bank) -> TestGateway {
    TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n\n[approvals]\nmode = \"hold\"\nhold_secs = {HOLD_SECS}\n{BANK_TOOLS}",
        bank.url
    ))
    .await
}

fn transfer(amount: i64) -> Value {
    json!({"from_account": "alice", "to_account": "bob", "amount": amount})
}

/// How many transfers of `amount` really ran upstream.
async fn transfers_of(bank: &Bank, amount: i64) -> usize {
    bank.ledger()
        .await
        .iter()
        .filter(|op| op["op"] == "transfer" && op["amount"] == amount)
        .count()
}

/// Lists the tools, then calls the same transfer twice: the second answer is the first one,
/// replayed, and the bank moved the money once.
async fn check_replay(who: &str, agent: &mut Agent, bank: &Bank, amount: i64) {
    let tools = agent.list_tools().await;
    for expected in ["get_balance", "transfer", "send_email"] {
        assert!(
            tools.iter().any(|t| t == expected),
            "{who}: {expected} missing from {tools:?}"
        );
    }
    let first = agent.call("transfer", transfer(amount)).await;
    let second = agent.call("transfer", transfer(amount)).await;
    let (first_id, first_replayed) = undolog_meta(&first);
    let (second_id, second_replayed) = undolog_meta(&second);
    assert_ne!(first["isError"], true, "{who}: {first}");
    assert!(first_id.is_some(), "{who}: no effect id on {first}");
    assert!(
        !first_replayed && second_replayed,
        "{who}: the second answer should be marked replayed:\n{first}\n{second}"
    );
    assert_eq!(first_id, second_id, "{who}");
    assert_eq!(
        first["structuredContent"], second["structuredContent"],
        "{who}"
    );
    assert_eq!(
        transfers_of(bank, amount).await,
        1,
        "{who}: the bank moved the money once"
    );
}

/// A held send_email approved while the client waits, one denied, and one nobody decides: the
/// client gets the email's result, a tool error with the reason, and "awaiting approval" once
/// `hold_secs` ran out (how long that took is printed for the record).
async fn check_approvals(
    who: &str,
    session: &str,
    agent: &mut Agent,
    gw: &TestGateway,
    bank: &Bank,
) {
    let email = |to: &str| json!({"to": to, "subject": format!("from {who}")});

    let held = agent
        .start_call("send_email", email("boss@example.com"))
        .await;
    let approval = gw.pending_approval().await;
    assert_eq!(approval["session"], session, "{who}: {approval}");
    // Decided at once: asking the bank first would eat into the hold on a busy machine. The
    // ledger at the end shows that the denied and the undecided calls never ran.
    let id = approval["id"].as_str().unwrap();
    let decided = Instant::now();
    let (status, _) = gw
        .post(&format!("/v1/approvals/{id}/approve"), json!({}))
        .await;
    assert_eq!(status, 200);
    let sent = agent
        .finish(held)
        .await
        .unwrap_or_else(|e| panic!("{who}: the approved call failed in the client: {e}"));
    let after_approval = decided.elapsed().as_secs_f64();
    assert_ne!(sent["isError"], true, "{who}: {sent}");
    // The email's own result: the call ran when the decision came (at the hold's end it would
    // have answered "awaiting approval").
    assert_eq!(sent["structuredContent"]["sent"], true, "{who}: {sent}");

    let held = agent
        .start_call("send_email", email("all@example.com"))
        .await;
    let approval = gw.pending_approval().await;
    let id = approval["id"].as_str().unwrap();
    let decided = Instant::now();
    let (status, _) = gw
        .post(
            &format!("/v1/approvals/{id}/deny"),
            json!({"reason": "not to everyone"}),
        )
        .await;
    assert_eq!(status, 200);
    let denied = agent
        .finish(held)
        .await
        .unwrap_or_else(|e| panic!("{who}: a denial must be a tool error, not a failure: {e}"));
    assert_eq!(denied["isError"], true, "{who}: {denied}");
    assert!(
        text(&denied).contains("not to everyone"),
        "{who}: the reason reaches the client: {denied}"
    );
    let after_denial = decided.elapsed().as_secs_f64();

    let started = Instant::now();
    let held = agent
        .start_call("send_email", email("nobody@example.com"))
        .await;
    let waited = agent.finish(held).await.unwrap_or_else(|e| {
        panic!("{who}: an undecided call must answer 'awaiting approval', not fail: {e}")
    });
    let took = started.elapsed().as_secs_f64();
    assert_eq!(waited["isError"], true, "{who}: {waited}");
    assert!(
        text(&waited).contains("needs a person's approval"),
        "{who}: {waited}"
    );
    let hold = HOLD_SECS as f64;
    assert!(
        (hold - 0.5..hold + 10.0).contains(&took),
        "{who}: the undecided call answered after {took:.1} s; hold_secs is {HOLD_SECS}"
    );

    let emails = sent_emails(bank).await;
    assert_eq!(
        emails.len(),
        1,
        "{who}: only the approved email went out: {emails:?}"
    );
    eprintln!(
        "{who}: answered {after_approval:.2} s after the approval, {after_denial:.2} s after the \
         denial; the undecided call after {took:.1} s (hold_secs {HOLD_SECS})"
    );
}

async fn sent_emails(bank: &Bank) -> Vec<Value> {
    bank.ledger()
        .await
        .into_iter()
        .filter(|op| op["op"] == "send_email")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_mcp_adapters_replays_by_header_explicit_session_or_run() {
    let bank = Bank::start().await;
    let gw = gateway(&bank).await;
    let url = gw.mcp_url();

    // get_tools() opens a new MCP session for every call: the header names the agent's session.
    let mut by_header = Agent::langchain(&url, &["X-UndoLog-Session-Id: lc-thread-1"], false).await;
    check_replay("langchain get_tools + header", &mut by_header, &bank, 11).await;

    // One explicit client.session(): its Mcp-Session-Id is the session.
    let mut explicit = Agent::langchain(&url, &[], true).await;
    check_replay("langchain client.session()", &mut explicit, &bank, 12).await;

    // Without either, each call opens an MCP session of its own, yet they are one run: the
    // principal's (here the local operator's), so the identical call is replayed.
    let mut unnamed = Agent::langchain(&url, &[], false).await;
    check_replay("langchain get_tools, no header", &mut unnamed, &bank, 13).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_mcp_adapters_gets_a_held_calls_approval_denial_and_hold_timeout() {
    let bank = Bank::start().await;
    let gw = gateway(&bank).await;
    let mut agent =
        Agent::langchain(&gw.mcp_url(), &["X-UndoLog-Session-Id: lc-held"], false).await;
    check_approvals("langchain", "lc-held", &mut agent, &gw, &bank).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_agents_sdk_server_replays_within_its_header_session_or_its_run() {
    let bank = Bank::start().await;
    let gw = gateway(&bank).await;
    let mut agent =
        Agent::openai_agents(&gw.mcp_url(), &["X-UndoLog-Session-Id: oa-run-1"], None).await;
    // The SDK's mcp 2.x is stateless with UndoLog: only the header ties its calls together.
    assert_eq!(agent.protocol(), "2026-07-28");
    check_replay("openai-agents", &mut agent, &bank, 21).await;

    // Without the header its stateless requests still join one run: replayed too.
    let mut unnamed = Agent::openai_agents(&gw.mcp_url(), &[], None).await;
    check_replay("openai-agents, no header", &mut unnamed, &bank, 22).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_agents_sdk_needs_a_read_timeout_above_hold_secs_to_wait_for_a_person() {
    let bank = Bank::start().await;
    let gw = gateway(&bank).await;
    let url = gw.mcp_url();

    // With client_session_timeout_seconds above hold_secs, the held calls come back decided.
    let mut agent = Agent::openai_agents(
        &url,
        &["X-UndoLog-Session-Id: oa-held"],
        Some(HOLD_SECS + 10),
    )
    .await;
    check_approvals("openai-agents", "oa-held", &mut agent, &gw, &bank).await;

    // With the SDK's default (5 s, below hold_secs) the client gives up first.
    let mut impatient =
        Agent::openai_agents(&url, &["X-UndoLog-Session-Id: oa-default"], None).await;
    let started = Instant::now();
    let held = impatient
        .start_call(
            "send_email",
            json!({"to": "later@example.com", "subject": "slow"}),
        )
        .await;
    let outcome = impatient.finish(held).await;
    let took = started.elapsed();
    let error = outcome.expect_err("the SDK's 5 s read timeout ends a longer hold");
    assert!(
        error.to_lowercase().contains("timed out") || error.to_lowercase().contains("timeout"),
        "{error}"
    );
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(HOLD_SECS),
        "gave up after {took:?}"
    );
    eprintln!("openai-agents with the default read timeout: gave up after {took:?}: {error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_cli_replays_across_runs_that_send_the_same_session_header() {
    let bank = Bank::start().await;
    let gw = gateway(&bank).await;
    let mut agent = Agent::inspector(&gw.mcp_url(), &["X-UndoLog-Session-Id: inspector-1"]);
    check_replay("inspector-cli", &mut agent, &bank, 31).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_cli_gets_a_held_calls_approval_denial_and_hold_timeout() {
    let bank = Bank::start().await;
    let gw = gateway(&bank).await;
    let mut agent = Agent::inspector(&gw.mcp_url(), &["X-UndoLog-Session-Id: inspector-held"]);
    check_approvals("inspector-cli", "inspector-held", &mut agent, &gw, &bank).await;
}
