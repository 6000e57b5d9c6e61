//! `undolog serve`, `undolog stdio` and `undolog keys`, run as a user runs them.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python fixtures of the gateway's tests (official `mcp` SDK in a venv).
pub(crate) fn fixtures() -> PathBuf {
    let dir = repo().join("target/fixtures");
    let status = Command::new("bash")
        .arg(repo().join("crates/undolog-gateway/tests/fixtures/setup.sh"))
        .arg(&dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "tests/fixtures/setup.sh failed");
    dir
}

pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `undolog COMMAND --listen 127.0.0.1:PORT --store STORE` in `dir`, its stderr dropped.
pub(crate) fn listening(command: &str, port: u16, store: &str, dir: &Path) -> Killed {
    let listen = format!("127.0.0.1:{port}");
    Killed(
        Command::new(env!("CARGO_BIN_EXE_undolog"))
            .args([command, "--listen", &listen, "--store", store])
            .current_dir(dir)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

pub(crate) fn wait_healthy(base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(out) = Command::new("curl")
            .args(["-sf", &format!("{base}/healthz")])
            .output()
            && out.status.success()
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the gateway did not come up at {base}");
}

/// `curl -s ARGS`, sending JSON (as the README's curl lines do), answering JSON.
pub(crate) fn curl_json(args: &[&str]) -> Value {
    let out = Command::new("curl")
        .args(["-s", "-H", "Content-Type: application/json"])
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn serve_with_no_configuration_runs_the_demo_bank_and_keys_close_open_mode() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("undolog.db").display());
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let gateway = listening("serve", port, &store, dir.path());
    wait_healthy(&base);
    let url = format!("{base}/mcp/tool_call");
    let body = r#"{"name": "transfer", "arguments": {"from_account": "alice", "to_account": "bob", "amount": 5}}"#;
    let call = |extra: &[&str]| {
        let mut args = vec![
            "-X",
            "POST",
            "-H",
            "X-UndoLog-Session-Id: cli-1",
            "-d",
            body,
        ];
        args.extend_from_slice(extra);
        args.push(&url);
        curl_json(&args)
    };
    assert_eq!(call(&[])["outcome"], "executed");
    assert_eq!(call(&[])["outcome"], "replayed");

    let created = Command::new(env!("CARGO_BIN_EXE_undolog"))
        .args(["keys", "create", "--org", "acme", "--store", &store])
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let key = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    assert!(key.starts_with("ul_"), "{key}");
    // Open mode ends within a second of the first key (the gateway rechecks once a second).
    std::thread::sleep(Duration::from_millis(1100));
    let refused = call(&[]);
    assert!(
        refused["error"].as_str().unwrap().contains("API key"),
        "{refused}"
    );
    let bearer = format!("Authorization: Bearer {key}");
    assert_eq!(
        call(&["-H", &bearer])["outcome"],
        "executed",
        "a new org's first call runs"
    );
    drop(gateway);
}

#[test]
fn serve_refuses_a_public_address_without_keys_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_undolog"))
        .args(["serve", "--listen", "0.0.0.0:0", "--store"])
        .arg(format!("sqlite://{}", dir.path().join("u.db").display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no API keys exist"), "{stderr}");
}

#[test]
fn serve_stops_on_an_invalid_configuration_with_one_line_naming_the_key_and_no_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[approvals]\nmode = \"later\"\n").unwrap();
    let run = |debug: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_undolog"));
        command
            .args(["serve", "--config"])
            .arg(&file)
            .env("RUST_BACKTRACE", "1")
            .env_remove("UNDOLOG_DEBUG");
        if debug {
            command.env("UNDOLOG_DEBUG", "1");
        }
        command.output().unwrap()
    };
    let out = run(false);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("approvals.mode") && stderr.contains("\"hold\" or \"defer\""),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("undolog: "), "{stderr}");
    // UNDOLOG_DEBUG asks for the whole story, backtrace included.
    let debug = String::from_utf8_lossy(&run(true).stderr).into_owned();
    assert!(debug.contains("backtrace"), "{debug}");
}

/// `undolog check` says whether a configuration would serve: valid, and each upstream reached
/// or named with why not; it opens no store and serves nothing.
#[test]
fn check_validates_a_configuration_and_reaches_every_upstream_without_serving() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, toml: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, toml).unwrap();
        file
    };
    let broken = write(
        "broken.toml",
        "[[upstreams]]\nname = \"ghost\"\ncommand = \"/no/such/command\"\n",
    );
    let invalid = write("invalid.toml", "[[notify]]\nkind = \"pager\"\n");
    let engine_at = format!("127.0.0.1:{}", free_port()); // nothing listens there
    let no_engine = write("split.toml", &format!("engine = \"grpc://{engine_at}\"\n"));
    let check = |file: Option<&std::path::Path>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_undolog"));
        command
            .arg("check")
            .current_dir(dir.path())
            .env("RUST_BACKTRACE", "1");
        if let Some(file) = file {
            command.arg("--config").arg(file);
        }
        let out = command.output().unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    // (what, the file, the exit code, what stdout and stderr say)
    type Case<'a> = (
        &'a str,
        Option<&'a std::path::Path>,
        i32,
        &'a [&'a str],
        &'a [&'a str],
    );
    let unreachable = format!("{engine_at} cannot be reached");
    let cases: [Case; 4] = [
        (
            "the demo",
            None,
            0,
            &["configuration: valid", "check: ok"],
            &["`demo`: connected, 3 tools"],
        ),
        (
            "a dead stdio command",
            Some(&broken),
            1,
            &["configuration: valid (1 upstream(s)"],
            &[
                "`ghost` cannot be reached",
                "/no/such/command",
                "1 upstream(s) cannot be reached",
            ],
        ),
        (
            "an invalid file",
            Some(&invalid),
            1,
            &[],
            &["notify[0].kind", "\"webhook\", \"slack\" or \"email\""],
        ),
        (
            "an engine nobody serves",
            Some(&no_engine),
            1,
            &["configuration: valid"],
            &[&unreachable, "the engine cannot be asked"],
        ),
    ];
    for (what, file, code, stdout, stderr) in cases {
        let (got, out, err) = check(file);
        assert_eq!(got, Some(code), "{what}: {out}{err}");
        for said in stdout {
            assert!(out.contains(said), "{what}: {said:?} not in {out}");
        }
        for said in stderr {
            assert!(err.contains(said), "{what}: {said:?} not in {err}");
        }
        assert!(!err.contains("backtrace"), "{what}: {err}");
        assert!(
            !err.contains("WARN"),
            "{what}: one line per finding, no library warnings: {err}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 3, "no store was created: {left:?}");
}

#[test]
fn a_stdio_client_spawns_undolog_stdio_and_calls_tools_through_it() {
    let fixtures = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "{} stdio --store sqlite://{}",
        env!("CARGO_BIN_EXE_undolog"),
        dir.path().join("stdio.db").display()
    );
    let mut client = Killed(
        Command::new(fixtures.join("mcp2/bin/python"))
            .arg(repo().join("crates/undolog-gateway/tests/fixtures/client.py"))
            .args(["--command", &command, "--mode", "legacy"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdin = client.0.stdin.take().unwrap();
    let args = json!({"from_account": "alice", "to_account": "bob", "amount": 3});
    for (id, op) in [
        (1, json!({"op": "list_tools"})),
        (
            2,
            json!({"op": "call_tool", "name": "transfer", "arguments": args}),
        ),
        (
            3,
            json!({"op": "call_tool", "name": "transfer", "arguments": args}),
        ),
    ] {
        let mut op = op;
        op["id"] = json!(id);
        writeln!(stdin, "{op}").unwrap();
    }
    drop(stdin);
    let lines: Vec<Value> = BufReader::new(client.0.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let answer = |id: u64| {
        lines
            .iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("no answer {id}: {lines:?}"))["ok"]
            .clone()
    };
    assert_eq!(answer(1), json!(["get_balance", "send_email", "transfer"]));
    // The client runs both calls at once: the engine lets one run and replays it to the other.
    let replayed = |id| answer(id)["_meta"]["io.undolog/replayed"] == json!(true);
    assert!(replayed(2) != replayed(3), "{} / {}", answer(2), answer(3));
    assert_eq!(
        answer(2)["structuredContent"],
        answer(3)["structuredContent"]
    );
}

#[test]
fn json_logs_are_one_object_per_line_with_the_calls_ids_and_never_its_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let log = std::fs::File::create(dir.path().join("log.jsonl")).unwrap();
    let gateway = Killed(
        Command::new(env!("CARGO_BIN_EXE_undolog"))
            .args(["serve", "--log-format", "json", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--store")
            .arg(format!("sqlite://{}", dir.path().join("u.db").display()))
            .env("UNDOLOG_LOG", "debug")
            // Nested keys from the environment, as deploy/compose.yaml names its gateways.
            .env("UNDOLOG_EXECUTOR__NAME", "gateway-json")
            .current_dir(dir.path())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_healthy(&base);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let body = r#"{"name": "transfer", "arguments": {"from_account": "alice", "to_account": "secret-account-7731", "amount": 5}}"#;
    let answer = curl_json(&[
        "-X",
        "POST",
        "-H",
        "X-UndoLog-Session-Id: logs-1",
        "-H",
        &format!("traceparent: 00-{trace}-00f067aa0ba902b7-01"),
        "-d",
        body,
        &format!("{base}/mcp/tool_call"),
    ]);
    assert_eq!(answer["outcome"], "executed", "{answer}");
    let effect = answer["effect_id"].as_str().unwrap().to_owned();
    std::thread::sleep(Duration::from_millis(300));
    drop(gateway);

    let text = std::fs::read_to_string(dir.path().join("log.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not one JSON object: {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string())
    );
    let call = lines
        .iter()
        .find(|l| l["message"] == "tool call")
        .unwrap_or_else(|| panic!("no line for the call: {text}"));
    assert_eq!(call["outcome"], "executed", "{call}");
    assert_eq!(call["span"]["session"], "logs-1", "{call}");
    assert_eq!(call["span"]["effect"], effect.as_str(), "{call}");
    assert_eq!(call["span"]["trace_id"], trace, "{call}");
    assert!(
        !text.contains("secret-account-7731"),
        "an argument was logged"
    );
}

#[test]
fn serve_names_each_upstream_that_cannot_be_reached_in_one_line_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("u.toml");
    let closed = free_port(); // nothing listens there
    std::fs::write(
        &config,
        format!(
            "[[upstreams]]\nname = \"ghost\"\ncommand = \"/nonexistent/mcp-server\"\n\n\
             [[upstreams]]\nname = \"far\"\nurl = \"http://127.0.0.1:{closed}/mcp\"\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let log = dir.path().join("stderr.txt");
    let gateway = Killed(
        Command::new(env!("CARGO_BIN_EXE_undolog"))
            .args(["serve", "--config"])
            .arg(&config)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--store"])
            .arg(format!("sqlite://{}", dir.path().join("u.db").display()))
            .current_dir(dir.path())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    // The gateway still serves: an upstream may come up later.
    wait_healthy(&base);
    drop(gateway);
    let said = std::fs::read_to_string(&log).unwrap();
    let line = |name: &str| -> String {
        let lines: Vec<&str> = said.lines().filter(|l| l.contains(name)).collect();
        assert_eq!(lines.len(), 1, "one line for {name}: {said}");
        lines[0].to_owned()
    };
    let ghost = line("upstream `ghost`");
    assert!(
        ghost.contains("cannot start `/nonexistent/mcp-server`"),
        "{ghost}"
    );
    assert!(ghost.contains("No such file or directory"), "{ghost}");
    let far = line("upstream `far`");
    assert!(
        far.contains(&format!("cannot connect to 127.0.0.1:{closed}")),
        "{far}"
    );
    assert!(far.contains("Connection refused"), "{far}");
    assert!(!said.contains("rmcp::"), "no MCP client internals: {said}");
}
