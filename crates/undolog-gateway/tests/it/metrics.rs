//! `/metrics` as an operator's Prometheus sees it: Debian's `prometheus` (installed by
//! tests/fixtures/setup.sh) scrapes the gateway once a second, and its query API shows that an
//! executed, a replayed and a held call, and a decision, each moved their own series;
//! `promtool check metrics` finds nothing wrong with the exposition.

use std::{process::Stdio, time::Duration};

use serde_json::{Value, json};
use tokio::{io::AsyncWriteExt, process::Command};

use crate::harness::{TestGateway, spawn};

async fn free_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// The value Prometheus holds for `query`, once it is `want` (it may take a scrape or two for
/// every target to be read); otherwise the last value it held within 30 s.
async fn scraped(http: &reqwest::Client, prometheus: &str, query: &str, want: f64) -> f64 {
    let url =
        reqwest::Url::parse_with_params(&format!("{prometheus}/api/v1/query"), [("query", query)])
            .unwrap();
    let mut last = None;
    for _ in 0..300 {
        let answer: Option<Value> = match http.get(url.clone()).send().await {
            Ok(response) => response.json().await.ok(),
            Err(_) => None, // not listening yet
        };
        let value = answer
            .as_ref()
            .and_then(|a| a["data"]["result"][0]["value"][1].as_str())
            .and_then(|v| v.parse().ok());
        if value == Some(want) {
            return want;
        }
        last = value.or(last);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last.unwrap_or_else(|| panic!("Prometheus has no value for {query} within 30 s"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_sees_a_replayed_and_a_held_call_move_their_series() {
    let metrics_port = free_port().await;
    let gw = TestGateway::start(&format!(
        "[metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n[[interceptors]]\nbuiltin = \"redactor\"\n"
    ))
    .await;
    let transfer = json!({"from_account": "alice", "to_account": "bob", "amount": 7});
    for _ in 0..2 {
        let (status, answer) = gw
            .rest_call(None, "m-1", "transfer", transfer.clone())
            .await;
        assert_eq!(status, 200, "{answer}");
    }
    let email = json!({"to": "ceo@example.com", "subject": "hi"});
    let (status, held) = gw.rest_call(None, "m-1", "send_email", email).await;
    assert_eq!(status, 202, "{held}");
    let approve = format!(
        "/v1/approvals/{}/approve",
        held["approval_id"].as_str().unwrap()
    );
    let (status, decided) = gw.post(&approve, json!({})).await;
    assert_eq!(status, 200, "{decided}");
    let (status, _) = gw.rest_call(None, "m-1", "no_such_tool", json!({})).await;
    assert_eq!(status, 404);
    // A second held call, left waiting.
    let email = json!({"to": "cfo@example.com", "subject": "later"});
    let (status, held) = gw.rest_call(None, "m-2", "send_email", email).await;
    assert_eq!(status, 202, "{held}");
    // A transfer of its own session, undone: one compensation step.
    let transfer = json!({"from_account": "bob", "to_account": "alice", "amount": 2});
    let (status, answer) = gw.rest_call(None, "m-3", "transfer", transfer).await;
    assert_eq!(status, 200, "{answer}");
    let (status, undone) = gw.post("/v1/sessions/m-3/undo", json!({})).await;
    assert_eq!(status, 200, "{undone}");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    // One target, or in a split deployment two: the gateway's and its engine's series.
    let targets: Vec<String> = gw.metrics.iter().map(|at| format!("'{at}'")).collect();
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: undolog\n    \
             static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    )
    .unwrap();
    let prometheus_port = free_port().await;
    let _prometheus = spawn(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .arg("--log.level=warn"),
    );
    let prometheus = format!("http://127.0.0.1:{prometheus_port}");
    // Every target scraped before any sum is read.
    let up = r#"count(up{job="undolog"} == 1)"#;
    let targets = targets.len() as f64;
    assert_eq!(scraped(&gw.http, &prometheus, up, targets).await, targets);
    // Sums over the targets: each fact is counted by one process, so a split deployment sums
    // to what one process counts.
    let cases = [
        (
            r#"sum(undolog_calls_total{tool="transfer",tier="compensable",outcome="executed"})"#,
            2.0,
        ),
        (
            r#"sum(undolog_calls_total{tool="transfer",tier="compensable",outcome="replayed"})"#,
            1.0,
        ),
        (
            r#"sum(undolog_calls_total{tool="send_email",tier="irreversible",outcome="awaiting_approval"})"#,
            2.0,
        ),
        (
            r#"sum(undolog_calls_total{tool="unknown",tier="unknown",outcome="error"})"#,
            1.0,
        ),
        (
            r#"sum(undolog_approval_decisions_total{decision="approved"})"#,
            1.0,
        ),
        (r#"sum(undolog_call_duration_seconds_count)"#, 6.0),
        // The two transfers ran upstream; the replay and the held calls did not.
        (
            r#"sum(undolog_upstream_duration_seconds_count{outcome="answered"})"#,
            2.0,
        ),
        // Recorded before running: the transfers, the replay, the two held calls.
        (
            r#"sum(undolog_store_duration_seconds_count{operation="intercept"})"#,
            5.0,
        ),
        (
            r#"sum(undolog_store_duration_seconds_count{operation="record_outcome"})"#,
            2.0,
        ),
        (r#"sum(undolog_approvals_pending)"#, 1.0),
        (r#"sum(undolog_approval_decision_seconds_count)"#, 1.0),
        (
            r#"sum(undolog_undo_steps_total{outcome="compensated"})"#,
            1.0,
        ),
        (r#"sum(undolog_commit_batch_size_count) > bool 0"#, 1.0),
        (
            r#"sum(undolog_interceptor_duration_seconds_count{interceptor="undolog/secret-redactor"}) > bool 0"#,
            1.0,
        ),
        (
            r#"sum(undolog_interceptor_verdicts_total{interceptor="undolog/secret-redactor"}) > bool 0"#,
            1.0,
        ),
        // Each process that connects to the upstream is connected.
        (r#"min(undolog_upstream_connected)"#, 1.0),
    ];
    for (query, want) in cases {
        assert_eq!(
            scraped(&gw.http, &prometheus, query, want).await,
            want,
            "{query}"
        );
    }

    // What Prometheus read passes its own linter.
    for at in &gw.metrics {
        let text = gw.http.get(format!("http://{at}/metrics")).send().await;
        promtool_passes(&text.unwrap().text().await.unwrap()).await;
    }
}

/// `promtool check metrics` finds nothing wrong with `text`, which names no session.
async fn promtool_passes(text: &str) {
    assert!(!text.contains("m-1"), "no session in a label: {text}");
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package) is installed");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .await
        .unwrap();
    let checked = promtool.wait_with_output().await.unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}
