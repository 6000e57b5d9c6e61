//! `undolog keys list` and `keys revoke` against a running gateway's store, and what no log level
//! of the gateway ever prints.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::Value;

use crate::gateway::{Killed, curl_json, free_port, wait_healthy};

fn undolog(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_undolog"))
        .args(args)
        .output()
        .unwrap()
}

fn json_of(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A gateway on a fresh store, its stderr kept in `log` when given.
fn serve(store: &str, port: u16, env: &[(&str, &str)], log: Option<&std::path::Path>) -> Killed {
    let mut command = Command::new(env!("CARGO_BIN_EXE_undolog"));
    command
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--store",
            store,
        ])
        .envs(env.iter().copied())
        .stderr(match log {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::null(),
        });
    let gateway = Killed(command.spawn().unwrap());
    wait_healthy(&format!("http://127.0.0.1:{port}"));
    gateway
}

fn call(port: u16, key: &str, to: &str) -> Value {
    let body = format!(
        r#"{{"name": "transfer", "arguments": {{"from_account": "alice", "to_account": "{to}", "amount": 1}}}}"#
    );
    curl_json(&[
        "-X",
        "POST",
        "-H",
        &format!("Authorization: Bearer {key}"),
        "-H",
        "X-UndoLog-Session-Id: k-1",
        "-d",
        &body,
        &format!("http://127.0.0.1:{port}/mcp/tool_call"),
    ])
}

#[test]
fn keys_are_listed_with_their_roles_and_a_revoked_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("undolog.db").display());
    let create = |org: &str, role: &str| {
        json_of(&undolog(&[
            "keys", "create", "--org", org, "--role", role, "--json", "--store", &store,
        ]))
    };
    let agent = create("acme", "agent");
    let admin = create("acme", "admin");
    let other = create("globex", "approver");
    let bad = undolog(&[
        "keys", "create", "--org", "acme", "--role", "root", "--store", &store,
    ]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("agent approver admin"),
        "the error names the roles"
    );

    let listed = json_of(&undolog(&["keys", "list", "--json", "--store", &store]));
    let rows: Vec<(String, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["id"].as_str().unwrap().into(),
                k["role"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [&agent, &admin, &other]
        .iter()
        .map(|k| {
            (
                k["id"].as_str().unwrap().into(),
                k["role"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(rows, expected);
    assert!(
        !listed.to_string().contains("hash") && !listed.to_string().contains("ul_"),
        "no secret nor hash is listed: {listed}"
    );
    let acme_only = json_of(&undolog(&[
        "keys", "list", "--org", "acme", "--json", "--store", &store,
    ]));
    assert_eq!(acme_only.as_array().unwrap().len(), 2);
    let table = undolog(&["keys", "list", "--store", &store]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("ROLE") && table.contains("approver"),
        "{table}"
    );

    let port = free_port();
    let _gateway = serve(&store, port, &[], None);
    let key = agent["key"].as_str().unwrap();
    assert_eq!(call(port, key, "bob")["outcome"], "executed");

    // A key this gateway has not seen yet stops at once; one it has seen, within 30 s.
    let admin_key = admin["key"].as_str().unwrap();
    let revoked = json_of(&undolog(&[
        "keys",
        "revoke",
        admin["id"].as_str().unwrap(),
        "--json",
        "--store",
        &store,
    ]));
    assert!(revoked["revoked_at"].is_number(), "{revoked}");
    let refused = call(port, admin_key, "carol");
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(error.contains("revoked"), "{refused}");
    let missing = undolog(&["keys", "revoke", "nope", "--store", &store]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("keys list"));
}

#[test]
fn no_log_level_prints_what_a_call_carries() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("undolog.db").display());
    let log = dir.path().join("gateway.log");
    let port = free_port();
    let gateway = serve(
        &store,
        port,
        &[("UNDOLOG_LOG", "trace,rmcp=trace,sqlx=trace")],
        Some(&log),
    );
    let answer = curl_json(&[
        "-X",
        "POST",
        "-H",
        "X-UndoLog-Session-Id: l-1",
        "-d",
        r#"{"name": "transfer", "arguments": {"from_account": "alice", "to_account": "secret-recipient-0x5e", "amount": 1}}"#,
        &format!("http://127.0.0.1:{port}/mcp/tool_call"),
    ]);
    assert_eq!(answer["outcome"], "executed", "{answer}");
    std::thread::sleep(Duration::from_millis(300));
    drop(gateway);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("applied schema migration"),
        "logging is on:\n{text}"
    );
    assert!(
        !text.contains("secret-recipient-0x5e"),
        "an argument reached the log:\n{}",
        text.lines()
            .filter(|l| l.contains("secret-recipient"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
