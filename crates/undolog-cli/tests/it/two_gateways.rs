//! Two `undolog serve` processes agree, on one PostgreSQL database or in front of one `undolog
//! engine` (the split deployment): identical calls spread over both run once upstream, and an
//! approval given at one releases a call held at the other.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    thread,
};

use serde_json::{Value, json};

use crate::gateway::{Killed, curl_json, fixtures, free_port, repo, wait_healthy};

/// `undolog serve` on `port`, in front of the engine at `engine` if one is given.
fn serve(config: &std::path::Path, port: u16, engine: Option<u16>) -> Killed {
    let mut command = Command::new(env!("CARGO_BIN_EXE_undolog"));
    command
        .args(["serve", "--config"])
        .arg(config)
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    if let Some(engine) = engine {
        command.args(["--engine", &format!("grpc://127.0.0.1:{engine}")]);
    }
    let gateway = Killed(command.stderr(Stdio::null()).spawn().unwrap());
    wait_healthy(&format!("http://127.0.0.1:{port}"));
    gateway
}

#[test]
fn two_gateways_on_one_database_run_an_identical_call_once_and_share_approvals() {
    let db = undolog_store::scratch::ScratchDatabase::new("undolog_test_gw");
    let (_bank, _dir, config) = bank_and_config(&db);
    let (port_a, port_b) = (free_port(), free_port());
    let _a = serve(&config, port_a, None);
    let _b = serve(&config, port_b, None);
    agree(port_a, port_b);
}

#[test]
fn two_gateways_in_front_of_one_engine_run_an_identical_call_once_and_share_approvals() {
    let db = undolog_store::scratch::ScratchDatabase::new("undolog_test_split");
    let (_bank, _dir, config) = bank_and_config(&db);
    let engine_port = free_port();
    let _engine = Killed(
        Command::new(env!("CARGO_BIN_EXE_undolog"))
            .args(["engine", "--config"])
            .arg(&config)
            .args(["--listen", &format!("127.0.0.1:{engine_port}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (port_a, port_b) = (free_port(), free_port());
    // Each is healthy once the engine answers that it is.
    let _a = serve(&config, port_a, Some(engine_port));
    let _b = serve(&config, port_b, Some(engine_port));
    agree(port_a, port_b);
}

/// The demo bank, and a configuration on `db` that classifies its tools.
fn bank_and_config(
    db: &undolog_store::scratch::ScratchDatabase,
) -> (Killed, tempfile::TempDir, std::path::PathBuf) {
    let bank_port = free_port();
    let bank = Killed(
        Command::new(env!("CARGO_BIN_EXE_undolog"))
            .args(["demo-bank", "--listen", &format!("127.0.0.1:{bank_port}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("undolog.toml");
    std::fs::write(
        &config,
        format!(
            r#"store = "{}"
[approvals]
mode = "hold"
hold_secs = 60
[[upstreams]]
name = "bank"
url = "http://127.0.0.1:{bank_port}/mcp"
[tools.get_balance]
tier = "read_only"
[tools.transfer]
tier = "compensable"
[tools.send_email]
tier = "irreversible"
"#,
            db.url()
        ),
    )
    .unwrap();
    (bank, dir, config)
}

/// What gateways A and B must agree on.
fn agree(port_a: u16, port_b: u16) {
    // 64 identical transfers at once, half at each gateway.
    let calls: Vec<_> = (0..64)
        .map(|i| {
            let port = if i % 2 == 0 { port_a } else { port_b };
            thread::spawn(move || {
                curl_json(&[
                    "-X", "POST", "-H", "X-UndoLog-Session-Id: shared",
                    "-d", r#"{"name": "transfer", "arguments": {"from_account": "alice", "to_account": "bob", "amount": 7}}"#,
                    &format!("http://127.0.0.1:{port}/mcp/tool_call"),
                ])
            })
        })
        .collect();
    let answers: Vec<Value> = calls.into_iter().map(|c| c.join().unwrap()).collect();
    let count = |outcome: &str| answers.iter().filter(|a| a["outcome"] == outcome).count();
    assert_eq!(
        (count("executed"), count("replayed")),
        (1, 63),
        "{answers:?}"
    );
    let balance = curl_json(&[
        "-X",
        "POST",
        "-H",
        "X-UndoLog-Session-Id: check",
        "-d",
        r#"{"name": "get_balance", "arguments": {"account": "alice"}}"#,
        &format!("http://127.0.0.1:{port_a}/mcp/tool_call"),
    ]);
    assert_eq!(
        balance["result"]["balance"], 93,
        "the upstream moved money once: {balance}"
    );

    // A call held at A, approved at B.
    let mut client = Killed(
        Command::new(fixtures().join("mcp2/bin/python"))
            .arg(repo().join("crates/undolog-gateway/tests/fixtures/client.py"))
            .args([
                "--url",
                &format!("http://127.0.0.1:{port_a}/mcp"),
                "--mode",
                "legacy",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdin = client.0.stdin.take().unwrap();
    let mut lines = BufReader::new(client.0.stdout.take().unwrap()).lines();
    let ready: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(ready["ready"], true, "{ready}");
    let call = json!({"id": 1, "op": "call_tool", "name": "send_email",
                      "arguments": {"to": "ops@example.com", "subject": "held at A"}});
    writeln!(stdin, "{call}").unwrap();
    let pending = (0..200)
        .find_map(|_| {
            let list = curl_json(&[&format!(
                "http://127.0.0.1:{port_b}/v1/approvals?status=pending"
            )]);
            let first = list.as_array().and_then(|a| a.first()).cloned();
            if first.is_none() {
                thread::sleep(std::time::Duration::from_millis(50));
            }
            first
        })
        .expect("gateway B sees the approval that A's held call asked for");
    let id = pending["id"].as_str().unwrap();
    let decided = curl_json(&[
        "-X",
        "POST",
        &format!("http://127.0.0.1:{port_b}/v1/approvals/{id}/approve"),
    ]);
    assert_eq!(decided["state"], "approved", "{decided}");
    drop(stdin);
    let answer: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        answer["ok"]["structuredContent"]["sent"], true,
        "released at A: {answer}"
    );
}
