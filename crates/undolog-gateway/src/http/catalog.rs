//! `GET /v1/tools`: the tools this gateway offers, each with its tier and why (the
//! configuration, an annotation of its upstream, or the fail-closed default), its upstream, and
//! its compensation. The same for every org: the catalog is the gateway's.

use std::sync::Arc;

use axum::{Json, extract::State};
use serde::Serialize;
use undolog_store::Compensation;
use undolog_types::Tier;

use crate::{Error, Gateway, policy::TierSource, upstream::Era};

#[derive(Debug, Serialize)]
pub(crate) struct ToolView {
    /// The name clients call it by.
    name: String,
    /// The `[[upstreams]]` entry that serves it, and the name it has there.
    upstream: String,
    upstream_tool: String,
    description: Option<String>,
    tier: Tier,
    tier_source: TierSource,
    /// The tier's reason, in words.
    why: String,
    requires_approval: bool,
    idempotent: bool,
    compensation: Option<Compensation>,
}

pub(crate) async fn tools(
    State(gateway): State<Arc<Gateway>>,
) -> Result<Json<Vec<ToolView>>, Error> {
    let routes = gateway.upstreams.tools(Era::Session).await;
    let views = routes
        .into_iter()
        .map(|route| {
            let exposed = route.item.name.to_string();
            let (policy, source) = gateway.explain(&exposed, &route);
            ToolView {
                upstream: gateway
                    .upstreams
                    .connection(route.upstream)
                    .name()
                    .to_owned(),
                upstream_tool: route.name.clone(),
                description: route.item.description.as_ref().map(|d| d.to_string()),
                tier: policy.tier,
                tier_source: source,
                why: source.why(policy.tier),
                requires_approval: policy.requires_approval,
                idempotent: policy.idempotent,
                compensation: policy.compensation,
                name: exposed,
            }
        })
        .collect();
    Ok(Json(views))
}
