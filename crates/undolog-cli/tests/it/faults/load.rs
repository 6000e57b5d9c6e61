//! The load a fault is done under: clients calling `charge` through the gateway's REST surface,
//! each call retried through the fault until it gets a definite answer, as a careful client does.
//! Then the operator's part: resolving in-doubt calls from the ledger's truth and undoing.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::history::{Heard, Op, ledger};

/// Calls `charge(id)` at `bases` (any of them; a retry goes to the next) until it gets a definite
/// answer or `give_up` passes.
pub(crate) async fn call(
    http: &reqwest::Client,
    bases: &[String],
    session: &str,
    id: &str,
    work_ms: u64,
    give_up: Duration,
) -> Op {
    let started = Instant::now();
    let mut cut_off: Option<Instant> = None;
    let mut attempt = 0_usize;
    let heard = loop {
        let base = &bases[attempt % bases.len()];
        attempt += 1;
        if started.elapsed() > give_up {
            break Heard::Failed(format!("no definite answer within {give_up:?}"));
        }
        let sent = http
            .post(format!("{base}/mcp/tool_call"))
            .header("x-undolog-session-id", session)
            .json(&json!({"name": "charge", "arguments": {"id": id, "amount": 1, "work_ms": work_ms}}))
            .timeout(Duration::from_secs(30))
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(_) => {
                // The gateway died under this call, or is not back yet: retry, as a client does.
                cut_off.get_or_insert_with(Instant::now);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status == 200 {
            break Heard::Acknowledged;
        }
        if body["in_doubt"] == true {
            break Heard::InDoubt;
        }
        let code = body["code"].as_str().unwrap_or_default();
        // Nothing recorded (the store or upstream is down), or the identical call is still
        // running: safe to retry.
        if matches!(status, 503 | 409)
            && matches!(
                code,
                "store_unavailable" | "upstream_unavailable" | "still_running"
            )
            || status == 502 && body["outcome"] == "failed" && is_unreachable(&body)
        {
            cut_off.get_or_insert_with(Instant::now);
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        break Heard::Failed(format!("{status} {body}"));
    };
    Op {
        id: id.to_owned(),
        heard,
        recovered_in: cut_off.map(|at| at.elapsed()),
    }
}

/// A failure known to happen before the call was sent (the upstream could not be reached).
fn is_unreachable(body: &Value) -> bool {
    body["error"]
        .as_str()
        .is_some_and(|e| e.contains("cannot be reached"))
}

/// `workers` clients calling until `stop` is set; every call's record, in no particular order.
pub(crate) async fn run(
    bases: Vec<String>,
    session: String,
    workers: usize,
    work_ms: u64,
    stop: Arc<AtomicBool>,
) -> Vec<Op> {
    let next = Arc::new(AtomicUsize::new(0));
    let bases = Arc::new(bases);
    let mut handles = Vec::new();
    for _ in 0..workers {
        let (bases, session, stop, next) =
            (bases.clone(), session.clone(), stop.clone(), next.clone());
        handles.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut ops = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let n = next.fetch_add(1, Ordering::SeqCst);
                let id = format!("{session}-{n}");
                // Vary the work so faults land before, during and after the tool's run.
                let work = (n as u64 * 7) % (work_ms + 1);
                ops.push(call(&http, &bases, &session, &id, work, Duration::from_secs(60)).await);
            }
            ops
        }));
    }
    let mut all = Vec::new();
    for handle in handles {
        all.extend(handle.await.unwrap());
    }
    all
}

/// The session's effects, as the admin API lists them.
pub(crate) async fn effects(base: &str, session: &str) -> Vec<Value> {
    let body: Value = reqwest::get(format!("{base}/v1/sessions/{session}/effects"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body.as_array()
        .cloned()
        .unwrap_or_else(|| panic!("effects of {session}: {body}"))
}

/// The operator's part: every in-doubt charge is resolved from the ledger's truth (charged:
/// committed; not charged: failed), then the session is undone. Answers how many were resolved.
pub(crate) async fn resolve_and_undo(base: &str, session: &str, ledger_path: &Path) -> usize {
    let http = reqwest::Client::new();
    let (charges, _) = ledger(ledger_path);
    let doubtful: Value = http
        .get(format!("{base}/v1/effects/in_doubt"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut resolved = 0;
    for effect in doubtful.as_array().unwrap() {
        if effect["session"] != session {
            continue;
        }
        let id = effect["args"]["id"].as_str().unwrap_or_default();
        let body = if charges.contains_key(id) {
            json!({"outcome": "committed", "result": {"charged": id}})
        } else {
            json!({"outcome": "failed", "error": "the ledger shows no charge"})
        };
        let answer = http
            .post(format!(
                "{base}/v1/effects/{}/resolve",
                effect["id"].as_str().unwrap()
            ))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(
            answer.status().is_success(),
            "resolve {effect}: {}",
            answer.text().await.unwrap()
        );
        resolved += 1;
    }
    let undo = http
        .post(format!("{base}/v1/sessions/{session}/undo"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let status = undo.status();
    let report = undo.text().await.unwrap();
    assert!(status.is_success(), "undo {session}: {status} {report}");
    resolved
}

/// After [`resolve_and_undo`]: every charge was refunded exactly once, and nothing else was.
pub(crate) fn assert_refunds_match_charges(ledger_path: &Path) {
    let (charges, refunds) = ledger(ledger_path);
    let charged: Vec<_> = charges.keys().collect();
    let refunded: Vec<_> = refunds.keys().collect();
    assert_eq!(refunded, charged, "undo refunds exactly what was charged");
    assert!(
        refunds.values().all(|n| *n == 1),
        "each refund ran once: {refunds:?}"
    );
}
