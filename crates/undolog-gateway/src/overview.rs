//! The dashboard's overview of an org, from the gateway's own counting: calls per minute by
//! outcome, latency percentiles and the replay ratio over the last hour. Kept per org, in this
//! process (each gateway of a fleet counts the calls it answered), beside the Prometheus series,
//! which carry no org.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Mutex, PoisonError},
    time::Duration,
};

use serde::Serialize;
use undolog_types::{OrgId, Timestamp};

/// Minutes kept per org.
const MINUTES: usize = 60;
/// Orgs counted at most; calls of orgs beyond are not (the metrics still count them).
const ORGS: usize = 4_096;
/// Upper bounds of the latency buckets, in milliseconds (the last one takes everything above).
const BOUNDS_MS: [f64; 16] = [
    0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0,
    8192.0,
];

/// What the overview counts a call as.
pub(crate) const OUTCOMES: [&str; 5] = ["executed", "replayed", "held", "failed", "rejected"];

/// The overview's name of a call's outcome (as the metrics name it).
fn kind(outcome: &str) -> usize {
    match outcome {
        "replayed" => 1,
        "awaiting_approval" => 2,
        "failed" | "in_doubt" | "error" => 3,
        "rejected" => 4,
        _ => 0, // executed, a task, an input round
    }
}

/// One minute of one org.
#[derive(Debug, Clone, Default)]
struct Minute {
    /// Minutes since the epoch.
    at: i64,
    calls: [u64; OUTCOMES.len()],
    latency: [u64; BOUNDS_MS.len() + 1],
}

#[derive(Debug, Default)]
pub(crate) struct Overview(Mutex<HashMap<OrgId, VecDeque<Minute>>>);

/// One org's last hour, as `GET /v1/overview` answers it.
#[derive(Debug, Serialize)]
pub(crate) struct OrgOverview {
    /// Oldest first, one per minute with calls, each `{"at": MS, "executed": N, ...}`.
    pub(crate) minutes: Vec<serde_json::Value>,
    pub(crate) calls: u64,
    /// Upper bounds of the buckets the percentiles fall in, in milliseconds.
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
    /// Replays of all answered calls.
    pub(crate) replay_ratio: Option<f64>,
}

impl Overview {
    /// One call of `org` answered at `now` as `outcome` (as the metrics name it) after `took`.
    pub(crate) fn record(&self, org: &OrgId, outcome: &str, took: Duration, now: Timestamp) {
        let kind = kind(outcome);
        let minute = now.as_millis().div_euclid(60_000);
        let ms = took.as_secs_f64() * 1000.0;
        let bucket = BOUNDS_MS
            .iter()
            .position(|b| ms <= *b)
            .unwrap_or(BOUNDS_MS.len());
        let mut orgs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !orgs.contains_key(org) {
            if orgs.len() >= ORGS {
                return;
            }
            orgs.insert(org.clone(), VecDeque::new());
        }
        let ring = orgs.get_mut(org).expect("inserted above");
        if ring.back().is_none_or(|m| m.at != minute) {
            ring.push_back(Minute {
                at: minute,
                ..Minute::default()
            });
        }
        while ring.len() > MINUTES
            || ring
                .front()
                .is_some_and(|m| m.at <= minute - MINUTES as i64)
        {
            ring.pop_front();
        }
        let last = ring.back_mut().expect("pushed above");
        last.calls[kind] += 1;
        last.latency[bucket] += 1;
    }

    /// `org`'s last hour as of `now`.
    pub(crate) fn of(&self, org: &OrgId, now: Timestamp) -> OrgOverview {
        let minute = now.as_millis().div_euclid(60_000);
        let orgs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let kept: Vec<Minute> = orgs
            .get(org)
            .map(|ring| {
                ring.iter()
                    .filter(|m| m.at > minute - MINUTES as i64)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        drop(orgs);
        let mut latency = [0u64; BOUNDS_MS.len() + 1];
        let mut totals = [0u64; OUTCOMES.len()];
        for m in &kept {
            for (sum, n) in latency.iter_mut().zip(m.latency) {
                *sum += n;
            }
            for (sum, n) in totals.iter_mut().zip(m.calls) {
                *sum += n;
            }
        }
        let calls: u64 = totals.iter().sum();
        let percentile = |p: f64| -> Option<f64> {
            let rank = (calls as f64 * p).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, n) in latency.iter().enumerate() {
                seen += n;
                if calls > 0 && seen >= rank {
                    // Above the last bound reads as the last bound.
                    return Some(BOUNDS_MS[i.min(BOUNDS_MS.len() - 1)]);
                }
            }
            None
        };
        let minutes = kept
            .iter()
            .map(|m| {
                let mut row = serde_json::json!({"at": m.at * 60_000});
                for (name, n) in OUTCOMES.iter().zip(m.calls) {
                    row[*name] = n.into();
                }
                row
            })
            .collect();
        OrgOverview {
            minutes,
            calls,
            p50_ms: percentile(0.50),
            p99_ms: percentile(0.99),
            replay_ratio: (calls > 0).then(|| totals[1] as f64 / calls as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn org(name: &str) -> OrgId {
        OrgId::new(name).unwrap()
    }

    const MINUTE: i64 = 60_000;

    #[test]
    fn an_org_sees_its_last_hour_by_minute_with_percentiles_and_its_replay_ratio() {
        let overview = Overview::default();
        let at = |minute: i64| Timestamp(minute * MINUTE + 5);
        // (org, outcome, milliseconds, minute)
        let calls = [
            ("acme", "executed", 3, 0),
            ("acme", "replayed", 1, 0),
            ("acme", "awaiting_approval", 1, 1),
            ("acme", "executed", 3, 1),
            ("acme", "error", 3, 1),
            ("acme", "executed", 900, 2),
            ("globex", "executed", 1, 2),
            ("acme", "executed", 3, -80), // older than an hour by the time it is read
        ];
        for (name, outcome, ms, minute) in calls {
            overview.record(&org(name), outcome, Duration::from_millis(ms), at(minute));
        }
        let acme = overview.of(&org("acme"), at(2));
        assert_eq!(acme.calls, 6);
        let rows: Vec<(i64, u64, u64, u64, u64)> = (acme.minutes.iter())
            .map(|m| {
                let n = |k: &str| m[k].as_u64().unwrap();
                (
                    m["at"].as_i64().unwrap() / MINUTE,
                    n("executed"),
                    n("replayed"),
                    n("held"),
                    n("failed"),
                )
            })
            .collect();
        assert_eq!(rows, [(0, 1, 1, 0, 0), (1, 1, 0, 1, 1), (2, 1, 0, 0, 0)]);
        assert_eq!((acme.p50_ms, acme.p99_ms), (Some(4.0), Some(1024.0)));
        assert_eq!(acme.replay_ratio, Some(1.0 / 6.0));
        let globex = overview.of(&org("globex"), at(2));
        assert_eq!(globex.calls, 1, "orgs apart");
        let nobody = overview.of(&org("initech"), at(2));
        assert_eq!(
            (nobody.calls, nobody.p50_ms, nobody.replay_ratio),
            (0, None, None)
        );
        // An hour later, nothing is left.
        assert_eq!(overview.of(&org("acme"), at(62)).calls, 0);
    }
}
