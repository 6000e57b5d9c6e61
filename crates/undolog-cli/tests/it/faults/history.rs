//! The history checker: what the client heard, what the counting upstream's ledger says really
//! ran, and what the gateway's log recorded, held to the invariants that must survive any fault.
//!
//! - no double execution: no charge id appears twice in the ledger;
//! - nothing acknowledged is lost: every call answered "executed" or "replayed" is in the ledger
//!   exactly once;
//! - nothing that ran is recorded failed: every charge in the ledger is a committed effect or an
//!   in-doubt one (pending, for an operator), never a failed one.

use std::{collections::BTreeMap, path::Path, time::Duration};

use serde_json::Value;

/// How a call ended for the client that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Heard {
    /// 200: executed, or replayed from the log.
    Acknowledged,
    /// Told that the tool may have run and an operator decides (`in_doubt: true`).
    InDoubt,
    /// A definite failure: the tool did not run.
    Failed(String),
}

/// One call of the load, as the client saw it.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    pub(crate) id: String,
    pub(crate) heard: Heard,
    /// How long the final answer took after the first attempt was cut off by a fault, if one was.
    pub(crate) recovered_in: Option<Duration>,
}

/// The counts of one run, and the table row it prints.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) fault: String,
    pub(crate) faults: usize,
    pub(crate) operations: usize,
    pub(crate) double: usize,
    pub(crate) lost: usize,
    pub(crate) ran_but_failed: usize,
    pub(crate) in_doubt: usize,
    pub(crate) recovery: Duration,
    pub(crate) problems: Vec<String>,
}

impl Report {
    pub(crate) const HEADER: &'static str = "| fault | faults injected | operations | double | lost | ran but failed | in doubt | worst recovery |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";

    pub(crate) fn row(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} s |",
            self.fault,
            self.faults,
            self.operations,
            self.double,
            self.lost,
            self.ran_but_failed,
            self.in_doubt,
            self.recovery.as_secs_f64()
        )
    }

    /// Fails the test with every broken invariant named.
    pub(crate) fn assert_holds(&self) {
        assert!(
            self.problems.is_empty()
                && self.double == 0
                && self.lost == 0
                && self.ran_but_failed == 0,
            "{}\n{}\n{}",
            Report::HEADER,
            self.row(),
            self.problems.join("\n")
        );
    }
}

/// Charge and refund counts per id, from the ledger file.
pub(crate) fn ledger(path: &Path) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let (mut charges, mut refunds) = (BTreeMap::new(), BTreeMap::new());
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let entry: Value = serde_json::from_str(line).expect("ledger lines are JSON");
        let id = entry["id"].as_str().unwrap_or_default().to_owned();
        match entry["op"].as_str() {
            Some("charge") => *charges.entry(id).or_default() += 1,
            Some("refund") => *refunds.entry(id).or_default() += 1,
            other => panic!("unknown ledger op {other:?}"),
        }
    }
    (charges, refunds)
}

/// Checks `ops` against the ledger and the recorded `effects` (the session's, as the admin API
/// lists them).
pub(crate) fn check(
    fault: &str,
    faults: usize,
    ops: &[Op],
    ledger_path: &Path,
    effects: &[Value],
) -> Report {
    let (charges, _) = ledger(ledger_path);
    let mut report = Report {
        fault: fault.to_owned(),
        faults,
        operations: ops.len(),
        ..Report::default()
    };
    let mut recorded: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for effect in effects.iter().filter(|e| e["tool"] == "charge") {
        let id = effect["args"]["id"].as_str().unwrap_or_default();
        recorded.entry(id).or_default().push(effect);
    }
    for (id, count) in &charges {
        if *count > 1 {
            report.double += 1;
            report.problems.push(format!("{id}: charged {count} times"));
        }
        for effect in recorded.get(id.as_str()).into_iter().flatten() {
            if effect["state"] == "failed" {
                report.ran_but_failed += 1;
                report
                    .problems
                    .push(format!("{id}: charged, but recorded failed: {effect}"));
            }
        }
        if !recorded.contains_key(id.as_str()) {
            report
                .problems
                .push(format!("{id}: charged, but no effect records it"));
        }
    }
    for op in ops {
        let ran = charges.get(&op.id).copied().unwrap_or(0);
        match &op.heard {
            Heard::Acknowledged if ran != 1 => {
                report.lost += 1;
                report
                    .problems
                    .push(format!("{}: acknowledged, charged {ran} times", op.id));
            }
            Heard::InDoubt => report.in_doubt += 1,
            Heard::Failed(why) if ran > 0 => {
                report.ran_but_failed += 1;
                report
                    .problems
                    .push(format!("{}: told it failed ({why}), but it charged", op.id));
            }
            _ => {}
        }
        if let Some(took) = op.recovered_in {
            report.recovery = report.recovery.max(took);
        }
    }
    report
}
