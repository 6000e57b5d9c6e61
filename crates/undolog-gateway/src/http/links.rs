//! Deciding from a notification: the approve and deny links it carried, and the record of what
//! was sent.
//!
//! A link opens the dashboard (`/?link=TOKEN`), which signs the person in and asks here what the
//! link is for (`GET /v1/links/{token}`): that never decides. The decision is a `POST` from the
//! confirmation page, by a signed-in approver of the link's org, four eyes included, and the
//! approval records `link:TARGET` as its channel. A link of another org reads as unknown.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use undolog_store::Approval;
use undolog_types::{ApprovalId, Role, Tier, Timestamp};

use super::{
    JsonBody,
    admin::{self, Verdict, Via},
};
use crate::{
    Error, Gateway, Principal,
    notify::{
        Delivery,
        links::{Link, LinkDecision},
    },
};

type Result<T> = std::result::Result<Json<T>, Error>;

/// What a link asks a person to decide.
#[derive(Debug, Serialize)]
pub(crate) struct LinkView {
    decision: LinkDecision,
    /// The channel the decision will be recorded as coming through.
    via: String,
    approval: Approval,
    tool: String,
    arguments: Value,
    tier: Tier,
    /// Why the call waits for a person.
    reason: &'static str,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LinkDecisionBody {
    reason: Option<String>,
}

/// The link `token` is, for `principal`: signed here, unexpired, of the principal's org, and
/// opened by someone who may decide.
fn opened(
    gateway: &Gateway,
    principal: &Principal,
    token: &str,
) -> std::result::Result<Link, Error> {
    principal.require(Role::Approver, "deciding from a link")?;
    let link = gateway.notifier.links.open(token, Timestamp::now())?;
    if link.org != principal.org {
        // As for any approval of another org: nothing says it exists.
        return Err(undolog_engine::Error::UnknownApproval(link.approval).into());
    }
    Ok(link)
}

pub(crate) async fn view(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(token): Path<String>,
) -> Result<LinkView> {
    let link = opened(&gateway, &principal, &token)?;
    let approval = gateway
        .engine
        .approval(principal.acting(), link.approval)
        .await?;
    let effect = gateway
        .engine
        .effect(principal.acting(), approval.effect)
        .await?;
    Ok(Json(LinkView {
        decision: link.decision,
        via: Via::Link(link.target).record(),
        tool: effect.tool,
        arguments: effect.args.into(),
        tier: effect.tier,
        reason: undolog_engine::hold_reason(Some(effect.tier)),
        approval,
    }))
}

pub(crate) async fn decide(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(token): Path<String>,
    JsonBody(body): JsonBody<LinkDecisionBody>,
) -> Result<Approval> {
    let link = opened(&gateway, &principal, &token)?;
    let approval: ApprovalId = link.approval;
    let verdict = match link.decision {
        LinkDecision::Approve => Verdict::Approve(body.reason),
        LinkDecision::Deny => Verdict::Deny(body.reason),
    };
    let via = Via::Link(link.target);
    Ok(Json(
        admin::decide(&gateway, &principal, approval, verdict, &via).await?,
    ))
}

/// `GET /v1/notifications`: what the engine's process told of the org's held calls, newest
/// first.
pub(crate) async fn deliveries(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
) -> Result<Vec<Value>> {
    if let Some(remote) = gateway.engine.remote() {
        return Ok(Json(remote.notifications(&principal.presented).await?));
    }
    let deliveries = local_deliveries(&gateway, &principal)?;
    Ok(Json(
        deliveries
            .iter()
            .map(|d| serde_json::to_value(d).unwrap_or_default())
            .collect(),
    ))
}

/// The deliveries this process made for `principal`'s org (an approver's to read).
pub(crate) fn local_deliveries(
    gateway: &Gateway,
    principal: &Principal,
) -> std::result::Result<Vec<Delivery>, Error> {
    principal.require(Role::Approver, "reading notification deliveries")?;
    Ok(gateway.notifier.deliveries(&principal.org))
}
