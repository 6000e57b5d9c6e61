//! The admin commands against a running `undolog serve`, as an operator types them.

use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::gateway::{Killed, curl_json, free_port, wait_healthy};

struct Running {
    base: String,
    store: String,
    _gateway: Killed,
    _dir: tempfile::TempDir,
}

fn serve() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("undolog.db").display());
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let gateway = Killed(
        Command::new(env!("CARGO_BIN_EXE_undolog"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--store", &store])
            .current_dir(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_healthy(&base);
    Running {
        base,
        store,
        _gateway: gateway,
        _dir: dir,
    }
}

impl Running {
    /// `undolog ARGS --url BASE`, with the key from the environment as an operator sets it.
    fn admin(&self, key: Option<&str>, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_undolog"));
        command
            .args(args)
            .args(["--url", &self.base])
            .env_remove("UNDOLOG_API_KEY")
            .env_remove("UNDOLOG_URL");
        if let Some(key) = key {
            command.env("UNDOLOG_API_KEY", key);
        }
        command.output().unwrap()
    }

    fn table(&self, key: &str, args: &[&str]) -> String {
        let out = self.admin(Some(key), args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, key: &str, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let text = self.table(key, &args);
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{args:?}: not JSON: {text}"))
    }

    fn call(&self, key: &str, session: &str, body: &str) -> Value {
        curl_json(&[
            "-X",
            "POST",
            "-H",
            &format!("Authorization: Bearer {key}"),
            "-H",
            &format!("X-UndoLog-Session-Id: {session}"),
            "-d",
            body,
            &format!("{}/mcp/tool_call", self.base),
        ])
    }
}

const TRANSFER: &str = r#"{"name": "transfer", "arguments": {"from_account": "alice", "to_account": "bob", "amount": 7}}"#;
const EMAIL: &str =
    r#"{"name": "send_email", "arguments": {"to": "bob@example.com", "subject": "hi"}}"#;
const EMAIL_2: &str =
    r#"{"name": "send_email", "arguments": {"to": "eve@example.com", "subject": "hi"}}"#;

/// Where `word` starts in the line that contains `marker`.
fn column(text: &str, marker: &str, word: &str) -> usize {
    let line = text
        .lines()
        .find(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no line with {marker:?} in:\n{text}"));
    line.find(word)
        .unwrap_or_else(|| panic!("no {word:?} in {line:?}"))
}

#[test]
fn admin_commands_list_decide_and_undo_with_tables_and_json() {
    let gw = serve();
    let create = |role: &[&str]| {
        let created = Command::new(env!("CARGO_BIN_EXE_undolog"))
            .args([
                "keys", "create", "--org", "acme", "--json", "--store", &gw.store,
            ])
            .args(role)
            .output()
            .unwrap();
        assert!(created.status.success());
        let created: Value = serde_json::from_slice(&created.stdout).unwrap();
        assert_eq!(created["org"], "acme");
        created
    };
    // The agent calls tools with its key (an agent's, by default); the operator decides and
    // undoes with an admin's: four eyes.
    let agent = create(&[]);
    assert_eq!(agent["role"], "agent");
    let agent = agent["key"].as_str().unwrap().to_owned();
    let agent = agent.as_str();
    let admin = create(&["--role", "admin"]);
    assert_eq!(admin["role"], "admin");
    let key = admin["key"].as_str().unwrap().to_owned();
    let key = key.as_str();

    assert_eq!(gw.call(agent, "s-1", TRANSFER)["outcome"], "executed");
    let held = gw.call(agent, "s-1", EMAIL);
    assert_eq!(held["outcome"], "awaiting_approval");
    let approval = held["approval_id"].as_str().unwrap();

    let refused = gw.admin(None, &["sessions"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("401") && stderr.contains("--api-key"),
        "{stderr}"
    );

    let sessions = gw.table(key, &["sessions"]);
    assert!(sessions.starts_with("SESSION"), "{sessions}");
    assert_eq!(
        column(&sessions, "SESSION", "STATE"),
        column(&sessions, "s-1", "active"),
        "columns line up:\n{sessions}"
    );
    assert_eq!(gw.json(key, &["sessions"])[0]["id"], "s-1");

    let effects = gw.table(key, &["effects", "s-1"]);
    for word in [
        "transfer",
        "compensable",
        "committed",
        "send_email",
        "irreversible",
        "awaiting_approval",
        r#""amount":7"#,
    ] {
        assert!(effects.contains(word), "{word:?} missing:\n{effects}");
    }
    assert_eq!(
        gw.json(key, &["effects", "s-1"]).as_array().unwrap().len(),
        2
    );

    let approvals = gw.table(key, &["approvals"]);
    assert!(
        approvals.contains(approval) && approvals.contains("send_email"),
        "{approvals}"
    );
    assert_eq!(gw.json(key, &["approvals"]).as_array().unwrap().len(), 1);

    let refused = gw.admin(Some(agent), &["approve", approval]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("403") && stderr.contains("approver"),
        "an agent's key cannot approve: {stderr}"
    );
    let approved = gw.json(key, &["approve", approval, "--reason", "expected"]);
    assert_eq!(approved["state"], "approved");
    assert!(
        approved["decided_by"]
            .as_str()
            .unwrap()
            .starts_with("api-key:"),
        "{approved}"
    );
    assert_eq!(gw.call(agent, "s-1", EMAIL)["outcome"], "executed");

    let second = gw.call(agent, "s-1", EMAIL_2)["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let no_reason = gw.admin(Some(key), &["deny", &second]);
    assert!(!no_reason.status.success(), "a denial needs --reason");
    let denied = gw.table(key, &["deny", &second, "--reason", "unknown recipient"]);
    assert!(
        denied.contains("denied") && denied.contains("unknown recipient"),
        "{denied}"
    );
    assert_eq!(
        gw.json(key, &["approvals", "--status", "all"])
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(
        gw.table(key, &["approvals"]).lines().count() == 1,
        "none pending"
    );

    let undone = gw.table(key, &["undo", "s-1"]);
    assert!(
        undone.contains("session s-1 is now compensated"),
        "{undone}"
    );
    assert!(undone.contains("not undoable (irreversible)"), "{undone}");
    assert!(
        undone
            .lines()
            .any(|l| l.contains("transfer") && l.contains("compensated"))
    );
    assert_eq!(gw.json(key, &["sessions"])[0]["state"], "compensated");

    // The whole history, exported: to standard output, then to a file that must not exist yet.
    let exported: Value = serde_json::from_str(&gw.table(key, &["export", "s-1"])).unwrap();
    assert_eq!(exported["format"], "undolog.session-snapshot.v1");
    assert_eq!(exported["session"]["state"], "compensated");
    let tools: Vec<_> = (exported["effects"].as_array().unwrap().iter())
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["transfer", "send_email", "send_email"],
        "{exported}"
    );
    let via: Vec<_> = (exported["approvals"].as_array().unwrap().iter())
        .map(|a| a["decided_via"].as_str().unwrap())
        .collect();
    assert_eq!(via, ["api", "api"]);
    let file = gw._dir.path().join("s-1.json");
    let file_arg = file.to_str().unwrap();
    let written = gw.admin(Some(key), &["export", "s-1", "--output", file_arg]);
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    let kept: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(kept["effects"], exported["effects"]);
    let again = gw.admin(Some(key), &["export", "s-1", "--output", file_arg]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success() && stderr.contains("must not exist"),
        "{stderr}"
    );
    let unknown = gw.admin(Some(key), &["export", "no-such-session"]);
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success() && stderr.contains("404"),
        "{stderr}"
    );

    let missing = gw.admin(Some(key), &["approve", "not-an-id"]);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && stderr.contains("400"),
        "{stderr}"
    );
}

#[test]
fn admin_commands_say_how_to_reach_a_gateway_that_is_not_there() {
    for command in ["sessions", "tail"] {
        let out = Command::new(env!("CARGO_BIN_EXE_undolog"))
            .args([
                command,
                "--url",
                &format!("http://127.0.0.1:{}", free_port()),
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{command}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("cannot reach the gateway") && stderr.contains("undolog serve"),
            "{command}: {stderr}"
        );
    }
}

/// `undolog tail` prints each event of the gateway as it happens, one line each.
#[test]
fn tail_follows_the_gateways_events_as_lines() {
    use std::io::{BufRead, BufReader};
    let gw = serve();
    let mut tail = Killed(
        Command::new(env!("CARGO_BIN_EXE_undolog"))
            .args(["tail", "--url", &gw.base])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (lines, heard) = std::sync::mpsc::channel();
    let out = BufReader::new(tail.0.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    // The tail may open its stream after the first call: each try is a call of its own (a new
    // amount) until the tail has heard one whole, intercepted then committed.
    let mut seen: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for amount in 1.. {
        assert!(
            std::time::Instant::now() < deadline,
            "no whole call in 20 s: {seen:?}"
        );
        let body = TRANSFER.replace("\"amount\": 7", &format!("\"amount\": {amount}"));
        curl_json(&[
            "-X",
            "POST",
            "-H",
            "X-UndoLog-Session-Id: t-1",
            "-d",
            &body,
            &format!("{}/mcp/tool_call", gw.base),
        ]);
        while let Ok(line) = heard.recv_timeout(std::time::Duration::from_millis(300)) {
            seen.push(line);
        }
        let heard_intercepted = seen.iter().any(|l| l.contains("effect_intercepted"));
        if heard_intercepted && seen.last().is_some_and(|l| l.contains("effect_committed")) {
            break;
        }
    }
    let intercepted = seen
        .iter()
        .find(|l| l.contains("effect_intercepted"))
        .unwrap();
    assert!(
        intercepted.contains("t-1") && intercepted.contains("transfer · compensable"),
        "{seen:?}"
    );
}
