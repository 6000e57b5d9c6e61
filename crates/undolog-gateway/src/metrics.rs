//! The gateway's Prometheus metrics, served at `/metrics` on `[metrics] listen` (off unless
//! configured; an operator's scrape target, apart from the API). One registry per gateway. Labels
//! are bounded: tool names of the catalog (an unknown name counts as `unknown`), tiers, outcomes
//! and decisions; never an org, a session, an effect or an argument.

use std::{sync::Arc, time::Duration};

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
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

use crate::{Error, calls::Outcome};

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

/// What the gateway counts.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: Family<DurationLabels, Histogram>,
    decisions: Family<DecisionLabels, Counter>,
}

fn call_buckets() -> Histogram {
    // 0.25 ms to about 8 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("undolog");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "calls",
            "Tool calls by tool, tier and outcome",
            calls.clone(),
        );
        let durations = Family::<DurationLabels, Histogram>::new_with_constructor(
            call_buckets as fn() -> Histogram,
        );
        registry.register(
            "call_duration_seconds",
            "How long a tool call took, from its arrival to its answer",
            durations.clone(),
        );
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "approval_decisions",
            "Decisions of held calls by people",
            decisions.clone(),
        );
        Metrics {
            registry,
            calls,
            durations,
            decisions,
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

    /// A person decided a held call.
    pub(crate) fn decided(&self, approved: bool) {
        let decision = if approved { "approved" } else { "denied" };
        self.decisions
            .get_or_create(&DecisionLabels { decision })
            .inc();
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
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        gateway.metrics.render(),
    )
        .into_response()
}
