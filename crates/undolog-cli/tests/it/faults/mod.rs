//! The fault suite: the real binary, a counting upstream whose ledger says what really ran, and
//! the faults machines have — SIGKILLs of the gateway, crash points at every step of a call,
//! upstreams killed mid-call over HTTP and stdio, PostgreSQL stopped with `-m immediate`, two
//! gateways on one database killed in turn, and a full disk. After each, the history checker
//! (`history`) holds the run to its invariants, the operator resolves what is in doubt from the
//! ledger, and an undo must refund exactly what was charged. Every run prints its row of the
//! table in docs/RELIABILITY.md.
//!
//! `UNDOLOG_FAULT_KILLS` sets how many faults each run injects (5 here, for CI; `bench/faults.sh`
//! runs 100).

mod history;
mod load;
mod processes;

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use history::{Heard, Report, check};
use processes::{Cluster, CountingUpstream, GatewayProcess, counting_server, python};
use undolog_store::SmallDisk;

/// How many faults each run injects.
fn faults() -> usize {
    std::env::var("UNDOLOG_FAULT_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
}

/// The longest a stranded call may take to get its answer after its fault.
const RECOVERY_LIMIT: Duration = Duration::from_secs(10);

/// A gateway config in front of the counting upstream (`upstream` is its `url = …` or
/// `command = …` lines). Leases and heartbeats are short, so in-doubt calls show within seconds.
fn config(upstream: &str) -> String {
    format!(
        r#"[[upstreams]]
name = "counting"
{upstream}

[limits]
upstream_timeout_secs = 10

[executor]
lease_ms = 2000
heartbeat_ms = 200
dead_after_ms = 1000

[tools.charge]
tier = "compensable"
compensation = {{ tool = "refund", args = {{ id = "{{{{args.id}}}}" }} }}

[tools.refund]
tier = "compensable"
"#
    )
}

fn http_upstream(upstream: &CountingUpstream) -> String {
    format!("url = {:?}", upstream.url)
}

fn stdio_upstream(ledger: &Path) -> String {
    format!(
        "command = {:?}\nargs = [{:?}, \"--ledger\", {:?}, \"--stdio\"]",
        python().display().to_string(),
        counting_server().display().to_string(),
        ledger.display().to_string()
    )
}

/// A pause between faults that varies with `i`, so faults land at every point of a call.
fn pause(i: usize) -> Duration {
    Duration::from_millis(150 + (i as u64 * 137) % 400)
}

/// The end of every run: check, print the row, settle (resolve from the ledger, undo) and check
/// that the undo refunded exactly what was charged.
async fn finish(
    fault: &str,
    faults: usize,
    ops: &[history::Op],
    base: &str,
    session: &str,
    ledger: &Path,
) -> Report {
    // Let leases cut short by the last fault run out, so every stranded call is listed in doubt.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let effects = load::effects(base, session).await;
    let report = check(fault, faults, ops, ledger, &effects);
    println!("{}\n{}", Report::HEADER, report.row());
    report.assert_holds();
    load::resolve_and_undo(base, session, ledger).await;
    load::assert_refunds_match_charges(ledger);
    report
}

/// The load runs while `inject` does its faults (blocking: it owns the processes); answers the
/// calls' records.
async fn under_load<T: Send + 'static>(
    bases: Vec<String>,
    session: &str,
    work_ms: u64,
    inject: impl FnOnce() -> T + Send + 'static,
) -> (Vec<history::Op>, T) {
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(load::run(
        bases,
        session.to_owned(),
        3,
        work_ms,
        stop.clone(),
    ));
    let kept = tokio::task::spawn_blocking(inject).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    (load.await.unwrap(), kept)
}

/// A fresh database on the machine's PostgreSQL, dropped at the end of the run.
struct Database(String);

impl Database {
    fn create() -> Database {
        let name = format!("undolog_faults_{}", uuid::Uuid::now_v7().simple());
        psql(&format!("CREATE DATABASE {name}"));
        Database(name)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:5432/{}", self.0)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        psql(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.0));
    }
}

fn psql(sql: &str) {
    let ok = std::process::Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-qc",
            sql,
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "psql {sql:?} failed: PostgreSQL must run at 127.0.0.1:5432"
    );
}

/// SIGKILLs of the gateway under load, restarted on its address each time.
async fn sigkill_loop(fault: &str, store: &str) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.jsonl");
    let upstream = CountingUpstream::start(&ledger);
    let mut gw = GatewayProcess::new(dir.path(), "gw", &config(&http_upstream(&upstream)), store);
    gw.start(None);
    let base = gw.base.clone();
    let n = faults();
    let (ops, _gw) = under_load(vec![base.clone()], "killed", 60, move || {
        for i in 0..n {
            std::thread::sleep(pause(i));
            gw.kill();
            gw.start(None);
        }
        gw
    })
    .await;
    let report = finish(fault, n, &ops, &base, "killed", &ledger).await;
    assert!(
        report.recovery <= RECOVERY_LIMIT,
        "a stranded call waited {:?}",
        report.recovery
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_sigkills_lose_nothing_and_strand_nothing_for_long_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("log.db").display());
    sigkill_loop("gateway SIGKILL, SQLite", &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_sigkills_lose_nothing_and_strand_nothing_for_long_on_postgres() {
    let db = Database::create();
    sigkill_loop("gateway SIGKILL, PostgreSQL", &db.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_killed_mid_call_leaves_no_charge_failed_over_http_and_stdio() {
    for transport in ["http", "stdio"] {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.jsonl");
        let store = format!("sqlite://{}", dir.path().join("log.db").display());
        let mut upstream = (transport == "http").then(|| CountingUpstream::start(&ledger));
        let upstream_lines = match &upstream {
            Some(u) => http_upstream(u),
            None => stdio_upstream(&ledger),
        };
        let mut gw = GatewayProcess::new(dir.path(), "gw", &config(&upstream_lines), &store);
        gw.start(None);
        let base = gw.base.clone();
        let n = faults();
        let pattern = ledger.display().to_string();
        // The upstream is kept (not dropped) until the undo has run its refunds.
        let (ops, _kept) = under_load(vec![base.clone()], "upstream", 300, move || {
            let mut killed = 0;
            for i in 0..n {
                std::thread::sleep(pause(i) * 2);
                match upstream.as_mut() {
                    Some(u) => {
                        u.restart(); // SIGKILL, then up again on its port
                        killed += 1;
                    }
                    // The gateway restarts its stdio child on the next call.
                    None => killed += processes::kill_matching(&pattern).min(1),
                }
            }
            (killed, upstream)
        })
        .await;
        let fault = format!("upstream SIGKILL mid-call, {transport}");
        let report = finish(&fault, n, &ops, &base, "upstream", &ledger).await;
        assert!(report.in_doubt + report.operations > 0);
        drop(gw);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_immediately_under_load_loses_nothing() {
    let cluster = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.jsonl");
    let upstream = CountingUpstream::start(&ledger);
    let mut gw = GatewayProcess::new(
        dir.path(),
        "gw",
        &config(&http_upstream(&upstream)),
        &cluster.url(),
    );
    gw.start(None);
    let base = gw.base.clone();
    let n = faults();
    let (ops, cluster) = under_load(vec![base.clone()], "pgstop", 60, move || {
        for i in 0..n {
            std::thread::sleep(pause(i));
            cluster.stop_immediate();
            std::thread::sleep(Duration::from_millis(300));
            cluster.pg_ctl_start();
        }
        cluster
    })
    .await;
    finish(
        "PostgreSQL stop -m immediate",
        n,
        &ops,
        &base,
        "pgstop",
        &ledger,
    )
    .await;
    drop(gw);
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_on_one_database_killed_in_turn_lose_nothing() {
    let db = Database::create();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.jsonl");
    let upstream = CountingUpstream::start(&ledger);
    let toml = config(&http_upstream(&upstream));
    let mut a = GatewayProcess::new(dir.path(), "a", &toml, &db.url());
    let mut b = GatewayProcess::new(dir.path(), "b", &toml, &db.url());
    a.start(None);
    b.start(None);
    let bases = vec![a.base.clone(), b.base.clone()];
    let base = a.base.clone();
    let n = faults();
    let (ops, _kept) = under_load(bases, "pair", 60, move || {
        for i in 0..n {
            std::thread::sleep(pause(i));
            let gw = if i % 2 == 0 { &mut a } else { &mut b };
            gw.kill();
            gw.start(None);
        }
        (a, b)
    })
    .await;
    let report = finish(
        "two gateways, one database, killed in turn",
        n,
        &ops,
        &base,
        "pair",
        &ledger,
    )
    .await;
    assert!(
        report.recovery <= RECOVERY_LIMIT,
        "a stranded call waited {:?}",
        report.recovery
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_calls_until_space_returns_then_they_resume_within_5_s() {
    let disk = SmallDisk::mount();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.jsonl");
    let upstream = CountingUpstream::start(&ledger);
    let store = format!("sqlite://{}", disk.path().join("log.db").display());
    let mut gw = GatewayProcess::new(dir.path(), "gw", &config(&http_upstream(&upstream)), &store);
    gw.start(None);
    let http = reqwest::Client::new();
    let bases = vec![gw.base.clone()];
    let call = |id: String| {
        let (http, bases) = (http.clone(), bases.clone());
        async move { load::call(&http, &bases, "disk", &id, 0, Duration::from_millis(1)).await }
    };
    let mut ops = Vec::new();
    for i in 0..5 {
        ops.push(call(format!("before-{i}")).await);
    }
    assert!(
        ops.iter().all(|op| op.heard == Heard::Acknowledged),
        "{ops:?}"
    );

    let filler = disk.fill();
    let mut refused = 0;
    for i in 0..20 {
        let op = call(format!("full-{i}")).await;
        if op.heard != Heard::Acknowledged {
            refused += 1;
        }
        ops.push(op);
    }
    assert!(refused > 0, "a full disk refuses calls");
    let health = reqwest::get(format!("{}/healthz", gw.base)).await.unwrap();
    let health_status = health.status().as_u16();
    let health_body: serde_json::Value = health.json().await.unwrap();
    assert_eq!(
        health_status, 503,
        "healthz says the store is unavailable: {health_body}"
    );
    assert_eq!(health_body["status"], "store_unavailable", "{health_body}");

    std::fs::remove_file(filler).unwrap();
    let freed = Instant::now();
    let mut n = 0;
    let resumed = loop {
        n += 1;
        let op = call(format!("after-{n}")).await;
        let ok = op.heard == Heard::Acknowledged;
        ops.push(op);
        if ok {
            break freed.elapsed();
        }
        assert!(
            freed.elapsed() < Duration::from_secs(5),
            "calls not accepted 5 s after space returned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut report = finish(
        "full disk (2 MiB tmpfs), SQLite",
        1,
        &ops,
        &gw.base,
        "disk",
        &ledger,
    )
    .await;
    report.recovery = resumed;
    println!("calls accepted again {resumed:?} after space returned; {refused} refused while full");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_every_step_of_a_call_loses_nothing_and_runs_nothing_twice() {
    // Where the process dies, and what a retry after the restart must hear.
    let cases = [
        ("call::after_intent", Heard::InDoubt, false),
        ("call::before_commit", Heard::InDoubt, true),
        ("call::before_reply", Heard::Acknowledged, true),
        // Intents taken for their batch, none committed: nothing ran, the retry runs it once.
        ("engine::intercept_batch", Heard::Acknowledged, true),
        // Outcomes taken for their batch, none committed: ran, and in doubt.
        ("engine::group_commit", Heard::InDoubt, true),
    ];
    for (point, retry_hears, charged) in cases {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.jsonl");
        let upstream = CountingUpstream::start(&ledger);
        let store = format!("sqlite://{}", dir.path().join("log.db").display());
        let mut gw =
            GatewayProcess::new(dir.path(), "gw", &config(&http_upstream(&upstream)), &store);
        gw.start(Some(&format!("{point}=return")));
        let http = reqwest::Client::new();
        // Calls at once, each working the same time: their commits meet in one batch.
        let bases = vec![gw.base.clone()];
        let ids: Vec<String> = (0..8)
            .map(|i| format!("{}-{i}", point.replace("::", "-")))
            .collect();
        let first: Vec<_> = ids
            .iter()
            .map(|id| {
                let (http, bases, id) = (http.clone(), bases.clone(), id.clone());
                tokio::spawn(async move {
                    load::call(&http, &bases, "crash", &id, 100, Duration::from_millis(500)).await
                })
            })
            .collect();
        for handle in first {
            handle.await.unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !gw.exited() {
            assert!(
                Instant::now() < deadline,
                "{point}: the crash point did not fire: {}",
                gw.log_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        gw.start(None);
        let mut ops = Vec::new();
        for id in &ids {
            ops.push(load::call(&http, &bases, "crash", id, 100, Duration::from_secs(30)).await);
        }
        // The call that met the crash point (others may have been before or after it).
        let (charges, _) = history::ledger(&ledger);
        assert!(
            ops.iter()
                .any(|op| op.heard == retry_hears && charges.contains_key(&op.id) == charged),
            "{point}: no retry heard {retry_hears:?} with charged = {charged}: {ops:?} {charges:?}"
        );
        finish(
            &format!("crash point {point}"),
            1,
            &ops,
            &gw.base,
            "crash",
            &ledger,
        )
        .await;
    }
}
