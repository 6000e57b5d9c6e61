//! The gateway's Prometheus metrics, served at `/metrics` on `[metrics] listen` (off unless
//! configured; an operator's scrape target, apart from the API). One registry per gateway. Labels
//! are bounded: tool names of the catalog (an unknown name counts as `unknown`), tiers, outcomes
//! and decisions, upstream and interceptor names of the configuration, store operations; never
//! an org, a session, an effect or an argument.

use std::{
    sync::{Arc, atomic::Ordering::Relaxed},
    time::Duration,
};

use axum::{
    extract::State,
    http::header,
    response::{IntoResponse, Response},
};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};
use undolog_engine::{Event, StepOutcome};
use undolog_interceptors::ChainExecutionResult;

use rmcp::model::ServerResult;

use crate::{Error, calls::Outcome, upstream::UpstreamError};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    tier: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DurationLabels {
    tier: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    decision: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamName {
    upstream: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    operation: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    interceptor: String,
    phase: &'static str,
    verdict: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NotifyLabels {
    target: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InterceptorName {
    interceptor: String,
}

/// What the gateway counts.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: Family<DurationLabels, Histogram, fn() -> Histogram>,
    decisions: Family<DecisionLabels, Counter>,
    decision_latency: Histogram,
    approvals_pending: Gauge,
    upstream_durations: Family<UpstreamLabels, Histogram, fn() -> Histogram>,
    /// Per upstream (in configuration order), its histogram of each [`UpstreamOutcome`], made
    /// once so that a call formats no label.
    upstream_series: Vec<[Histogram; UpstreamOutcome::ALL.len()]>,
    upstream_connected: Family<UpstreamName, Gauge>,
    store_durations: Family<StoreLabels, Histogram, fn() -> Histogram>,
    undo_steps: Family<StepLabels, Counter>,
    verdicts: Family<VerdictLabels, Counter>,
    interceptor_durations: Family<InterceptorName, Histogram, fn() -> Histogram>,
    batch_sizes: Histogram,
    notifications: Family<NotifyLabels, Counter>,
    /// Whether this process holds the engine. Decisions and undo steps are the engine's facts:
    /// a gateway in front of an engine passes them on and does not count them, so the series
    /// of a split deployment sum to what one process counts.
    pub(crate) holds_engine: bool,
}

fn call_buckets() -> Histogram {
    // 0.25 ms to about 8 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

/// A family of call-length histograms, registered.
fn histograms<L>(
    registry: &mut Registry,
    name: &str,
    help: &str,
) -> Family<L, Histogram, fn() -> Histogram>
where
    L: EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static,
{
    let family = Family::new_with_constructor(call_buckets as fn() -> Histogram);
    registry.register(name, help, family.clone());
    family
}

fn decision_buckets() -> Histogram {
    // 1 s to about 9 h.
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("undolog");
        let durations = histograms(
            &mut registry,
            "call_duration_seconds",
            "How long a tool call took, from its arrival to its answer",
        );
        let upstream_durations = histograms(
            &mut registry,
            "upstream_duration_seconds",
            "How long an upstream took to answer a tool call, by upstream and outcome",
        );
        let store_durations = histograms(
            &mut registry,
            "store_duration_seconds",
            "How long a call's store operation took (waiting for its batch included)",
        );
        let interceptor_durations = histograms(
            &mut registry,
            "interceptor_duration_seconds",
            "How long an interceptor took on one message",
        );
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "calls",
            "Tool calls by tool, tier and outcome",
            calls.clone(),
        );
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "approval_decisions",
            "Decisions of held calls by people",
            decisions.clone(),
        );
        let decision_latency = decision_buckets();
        registry.register(
            "approval_decision_seconds",
            "How long a held call waited for a person's decision",
            decision_latency.clone(),
        );
        let approvals_pending = Gauge::default();
        registry.register(
            "approvals_pending",
            "Approvals requested and not yet decided, as heard since this gateway started \
             (on PostgreSQL every gateway of the store hears them all)",
            approvals_pending.clone(),
        );
        let upstream_connected = Family::<UpstreamName, Gauge>::default();
        registry.register(
            "upstream_connected",
            "Whether the gateway holds a live connection to the upstream (1) or not (0)",
            upstream_connected.clone(),
        );
        let undo_steps = Family::<StepLabels, Counter>::default();
        registry.register(
            "undo_steps",
            "Compensation steps of undos, by outcome",
            undo_steps.clone(),
        );
        let verdicts = Family::<VerdictLabels, Counter>::default();
        registry.register(
            "interceptor_verdicts",
            "What each interceptor said of a message, by phase",
            verdicts.clone(),
        );
        let notifications = Family::<NotifyLabels, Counter>::default();
        registry.register(
            "notifications",
            "Held calls announced to each [[notify]] target, by outcome (after retries)",
            notifications.clone(),
        );
        let batch_sizes = Histogram::new(exponential_buckets(1.0, 2.0, 10));
        registry.register(
            "commit_batch_size",
            "Writes carried by each batched store transaction (group commit)",
            batch_sizes.clone(),
        );
        Metrics {
            registry,
            calls,
            durations,
            decisions,
            decision_latency,
            approvals_pending,
            upstream_durations,
            upstream_series: Vec::new(),
            upstream_connected,
            store_durations,
            undo_steps,
            verdicts,
            interceptor_durations,
            batch_sizes,
            notifications,
            holds_engine: true,
        }
    }
}

/// How an upstream answered a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpstreamOutcome {
    Answered,
    /// It answered with `isError`.
    ToolError,
    /// It answered with a JSON-RPC error.
    Refused,
    /// No answer: not reached, timed out, or the connection broke.
    Unavailable,
    /// No answer awaited: the client cancelled the call (or went away) while it was upstream.
    Cancelled,
}

impl UpstreamOutcome {
    const ALL: [UpstreamOutcome; 5] = [
        UpstreamOutcome::Answered,
        UpstreamOutcome::ToolError,
        UpstreamOutcome::Refused,
        UpstreamOutcome::Unavailable,
        UpstreamOutcome::Cancelled,
    ];

    /// How `answer`, an upstream's answer to a tool call, counts.
    pub(crate) fn of(answer: &Result<ServerResult, UpstreamError>) -> UpstreamOutcome {
        match answer {
            Ok(ServerResult::CallToolResult(r)) if r.is_error == Some(true) => {
                UpstreamOutcome::ToolError
            }
            Ok(_) => UpstreamOutcome::Answered,
            Err(UpstreamError::Refused { .. }) => UpstreamOutcome::Refused,
            Err(UpstreamError::Cancelled) => UpstreamOutcome::Cancelled,
            Err(_) => UpstreamOutcome::Unavailable,
        }
    }

    /// The metric label, and the span's `error.type` when it failed.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            UpstreamOutcome::Answered => "answered",
            UpstreamOutcome::ToolError => "tool_error",
            UpstreamOutcome::Refused => "upstream_error",
            UpstreamOutcome::Unavailable => "upstream_unavailable",
            UpstreamOutcome::Cancelled => "cancelled",
        }
    }
}

/// The outcome label of a call's answer (also its trace's `undolog.outcome`).
pub(crate) fn outcome(answer: &Result<Outcome, Error>) -> &'static str {
    match answer {
        Ok(Outcome::Executed { .. }) => "executed",
        Ok(Outcome::Replayed { .. }) => "replayed",
        Ok(Outcome::Task { .. } | Outcome::UpstreamTask { .. }) => "task",
        Ok(Outcome::AwaitingApproval { .. }) => "awaiting_approval",
        Ok(Outcome::InDoubt { .. }) => "in_doubt",
        Ok(Outcome::Rejected { .. }) => "rejected",
        Ok(Outcome::InputRequired { .. }) => "input_required",
        Ok(Outcome::Refused { .. } | Outcome::Failed { .. }) => "failed",
        Err(Error::Intercepted { .. }) => "rejected",
        Err(_) => "error",
    }
}

impl Metrics {
    /// One call answered: `tool` as the catalog names it (`None`: not in the catalog), its
    /// `tier` (`None`: never classified).
    pub(crate) fn call(
        &self,
        tool: Option<String>,
        tier: Option<undolog_types::Tier>,
        answer: &Result<Outcome, Error>,
        took: Duration,
    ) {
        let tier = tier.map_or("unknown", |t| t.as_str());
        let outcome = outcome(answer);
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.unwrap_or_else(|| "unknown".to_owned()),
                tier,
                outcome,
            })
            .inc();
        self.durations
            .get_or_create(&DurationLabels { tier, outcome })
            .observe(took.as_secs_f64());
    }

    /// A person decided a held call that was requested at `requested_at`.
    pub(crate) fn decided(&self, approved: bool, requested_at: undolog_types::Timestamp) {
        if !self.holds_engine {
            return;
        }
        let decision = if approved { "approved" } else { "denied" };
        self.decisions
            .get_or_create(&DecisionLabels { decision })
            .inc();
        let waited = undolog_types::Timestamp::now().as_millis() - requested_at.as_millis();
        self.decision_latency.observe(waited.max(0) as f64 / 1000.0);
    }

    /// The same, with the series of these upstreams (in configuration order) made now.
    pub(crate) fn for_upstreams<'a>(names: impl Iterator<Item = &'a str>) -> Metrics {
        let mut metrics = Metrics::default();
        metrics.upstream_series = names
            .map(|name| {
                UpstreamOutcome::ALL.map(|outcome| {
                    let labels = UpstreamLabels {
                        upstream: name.to_owned(),
                        outcome: outcome.as_str(),
                    };
                    metrics.upstream_durations.get_or_create(&labels).clone()
                })
            })
            .collect();
        metrics
    }

    /// Upstream `index` answered (or did not) after `took`.
    pub(crate) fn upstream(&self, index: usize, outcome: UpstreamOutcome, took: Duration) {
        if let Some(series) = self.upstream_series.get(index) {
            series[outcome as usize].observe(took.as_secs_f64());
        }
    }

    /// Whether the gateway holds a connection to `upstream` now (set at every scrape).
    fn connected(&self, upstream: &str, connected: bool) {
        let labels = UpstreamName {
            upstream: upstream.to_owned(),
        };
        self.upstream_connected
            .get_or_create(&labels)
            .set(i64::from(connected));
    }

    /// A store operation of a call took `took`.
    pub(crate) fn store(&self, operation: &'static str, took: Duration) {
        (self
            .store_durations
            .get_or_create(&StoreLabels { operation }))
        .observe(took.as_secs_f64());
    }

    /// One step of an undo ended.
    pub(crate) fn undo_step(&self, outcome: &StepOutcome) {
        if !self.holds_engine {
            return;
        }
        let outcome = match outcome {
            StepOutcome::Compensated { .. } => "compensated",
            StepOutcome::Failed { .. } => "failed",
            StepOutcome::InDoubt { .. } => "in_doubt",
        };
        self.undo_steps.get_or_create(&StepLabels { outcome }).inc();
    }

    /// What each member of a chain run said, and how long it took.
    pub(crate) fn chain(&self, record: &ChainExecutionResult) {
        let phase = match record.phase {
            undolog_interceptors::Phase::Request => "request",
            undolog_interceptors::Phase::Response => "response",
        };
        for entry in &record.results {
            let verdict = match (&entry.error, &entry.validation, entry.applied) {
                (Some(_), _, _) if entry.skipped => "skipped",
                (Some(_), _, _) => "error",
                (None, Some(v), _) if v.valid => "valid",
                (None, Some(_), _) => "invalid",
                (None, None, Some(true)) => "mutated",
                (None, None, _) => "unchanged",
            };
            let labels = VerdictLabels {
                interceptor: entry.interceptor.clone(),
                phase,
                verdict,
            };
            self.verdicts.get_or_create(&labels).inc();
            let name = InterceptorName {
                interceptor: entry.interceptor.clone(),
            };
            (self.interceptor_durations.get_or_create(&name))
                .observe(entry.duration_ms as f64 / 1000.0);
        }
    }

    /// A batched store transaction carries `size` writes.
    pub(crate) fn batch(&self, size: usize) {
        self.batch_sizes.observe(size as f64);
    }

    /// Follows the engine's events for the approvals waiting (requested, then decided).
    pub(crate) fn follow(self: &Arc<Self>, engine: &undolog_engine::Engine) {
        let metrics = Arc::downgrade(self);
        let mut events = engine.subscribe();
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                let Some(metrics) = metrics.upgrade() else {
                    return;
                };
                match event {
                    Event::ApprovalRequired { .. } => {
                        metrics.approvals_pending.inc();
                    }
                    Event::ApprovalDecided { .. } => {
                        // Never below zero: decisions of approvals requested before we started.
                        let _ = (metrics.approvals_pending.inner()).fetch_update(
                            Relaxed,
                            Relaxed,
                            |n| (n > 0).then(|| n - 1),
                        );
                    }
                    _ => {}
                }
            }
        });
    }

    /// The Prometheus text format (0.0.4) of everything counted.
    fn render(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// Serves `GET /metrics` on `at` until `cancel`: bound now (a taken port stops start-up), served
/// in the background.
pub(crate) async fn listen(
    gateway: Arc<crate::Gateway>,
    at: std::net::SocketAddr,
    cancel: tokio_util::sync::CancellationToken,
) -> Result<(), Error> {
    let listener = tokio::net::TcpListener::bind(at).await.map_err(|e| {
        Error::Startup(format!(
            "cannot serve metrics on {at} ({e}); change metrics.listen or free the port"
        ))
    })?;
    let router = axum::Router::new()
        .route("/metrics", axum::routing::get(render))
        .with_state(gateway);
    tracing::info!(%at, "metrics at http://{at}/metrics");
    tokio::spawn(async move {
        let stopped = cancel.cancelled_owned();
        if let Err(e) = axum::serve(listener, router)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    });
    Ok(())
}

async fn render(State(gateway): State<Arc<crate::Gateway>>) -> Response {
    for conn in gateway.upstreams.connections() {
        gateway
            .metrics
            .connected(&conn.config.name, conn.is_connected());
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        gateway.metrics.render(),
    )
        .into_response()
}

impl undolog_notify::Tally for Metrics {
    /// One held call announced to `target` (a `[[notify]]` name), or not after every retry.
    fn notified(&self, target: &str, delivered: bool) {
        let outcome = if delivered { "delivered" } else { "failed" };
        let target = target.to_owned();
        self.notifications
            .get_or_create(&NotifyLabels { target, outcome })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::model::{CallToolResult, ContentBlock, ErrorData, ServerResult};

    use super::UpstreamOutcome;
    use crate::upstream::UpstreamError;

    #[test]
    fn an_upstreams_answer_counts_by_how_it_ended() {
        let bank = || "bank".to_owned();
        let text = || vec![ContentBlock::text("done")];
        let cases: [(&str, Result<ServerResult, UpstreamError>, &str); 8] = [
            (
                "a result",
                Ok(ServerResult::CallToolResult(
                    CallToolResult::success(text()),
                )),
                "answered",
            ),
            (
                "a result with isError",
                Ok(ServerResult::CallToolResult(CallToolResult::error(text()))),
                "tool_error",
            ),
            (
                "a JSON-RPC error",
                Err(UpstreamError::Refused {
                    upstream: bank(),
                    error: ErrorData::invalid_params("no such account", None),
                }),
                "upstream_error",
            ),
            (
                "not reached",
                Err(UpstreamError::Unavailable {
                    upstream: bank(),
                    reason: "connection refused".into(),
                }),
                "upstream_unavailable",
            ),
            (
                "no answer in time",
                Err(UpstreamError::TimedOut {
                    upstream: bank(),
                    after: Duration::from_secs(30),
                }),
                "upstream_unavailable",
            ),
            (
                "the connection closed",
                Err(UpstreamError::Closed { upstream: bank() }),
                "upstream_unavailable",
            ),
            (
                "an unreadable answer",
                Err(UpstreamError::Garbage { upstream: bank() }),
                "upstream_unavailable",
            ),
            (
                "cancelled by its client",
                Err(UpstreamError::Cancelled),
                "cancelled",
            ),
        ];
        for (what, answer, label) in cases {
            assert_eq!(UpstreamOutcome::of(&answer).as_str(), label, "{what}");
        }
    }
}
