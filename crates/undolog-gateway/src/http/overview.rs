//! `GET /v1/overview`: the caller's org over the last hour, from this gateway's own counting
//! (calls per minute by outcome, latency percentiles, the replay ratio) and the approvals that
//! wait now. What the dashboard's overview draws; no external service is asked.

use std::sync::Arc;

use axum::{Extension, Json, extract::State};
use serde::Serialize;
use undolog_types::{ApprovalState, Timestamp};

use crate::{Error, Gateway, Principal, overview::OrgOverview};

#[derive(Debug, Serialize)]
pub(crate) struct Overview {
    #[serde(flatten)]
    calls: OrgOverview,
    approvals_waiting: usize,
    /// What the figures cover.
    counted_by: &'static str,
}

pub(crate) async fn overview(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<Overview>, Error> {
    let org = &principal.org;
    let waiting = gateway
        .engine
        .approvals(principal.acting(), Some(ApprovalState::Pending))
        .await?;
    Ok(Json(Overview {
        calls: gateway.overview.of(org, Timestamp::now()),
        approvals_waiting: waiting.len(),
        counted_by: "this gateway, since it started: the tool calls it answered (MCP and REST)",
    }))
}
