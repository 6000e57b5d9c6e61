//! The SDK's effect API, for tools that run in the caller's process: intercept, run the tool,
//! then commit or fail. The caller supplies the tier and compensation it declares for its tool.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use undolog_engine::{Call, Intercept, ToolPolicy};
use undolog_store::Compensation;
use undolog_types::{Args, EffectId, LeaseToken, SessionId, Tier};

use super::{JsonBody, admin::parse_id};
use crate::{Error, Gateway, Principal};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InterceptBody {
    pub(crate) session_id: String,
    pub(crate) tool: String,
    #[serde(default)]
    pub(crate) arguments: Map<String, Value>,
    pub(crate) step: Option<u64>,
    pub(crate) tier: Tier,
    pub(crate) compensation: Option<Compensation>,
    #[serde(default)]
    pub(crate) idempotent: bool,
    #[serde(default)]
    pub(crate) requires_approval: bool,
    pub(crate) idempotency_key: Option<String>,
    /// Only over gRPC: the lease a caller that renews it asks for (at most `limits.sdk_lease`).
    #[serde(skip)]
    pub(crate) lease: Option<std::time::Duration>,
    /// Only over gRPC: how long the caller waits for an identical call in flight.
    #[serde(skip)]
    pub(crate) wait: Option<std::time::Duration>,
}

pub(crate) async fn intercept(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    JsonBody(body): JsonBody<InterceptBody>,
) -> Result<Json<Value>, Error> {
    answered(intercept_effect(&gateway, &principal, body).await?)
}

/// The SDK's intercept on any surface (HTTP, gRPC): the caller declares its tool's tier and
/// compensation, checked as [`check_compensation`] says, and runs the tool out of sight, so its
/// lease is `limits.sdk_lease`.
pub(crate) async fn intercept_effect(
    gateway: &Gateway,
    principal: &Principal,
    body: InterceptBody,
) -> Result<Intercept, Error> {
    let call = sdk_call(gateway, principal, body).await?;
    gateway.engine.intercept(principal.acting(), call).await
}

/// The engine's call for an SDK body, checked, as `principal` makes it.
pub(crate) async fn sdk_call(
    gateway: &Gateway,
    principal: &Principal,
    body: InterceptBody,
) -> Result<Call, Error> {
    let session = SessionId::new(body.session_id)
        .map_err(|e| Error::BadRequest(format!("session_id: {e}")))?;
    // What this process's configuration declares for this very tool is taken as the gateway
    // takes it (a gateway in front of this engine sends it so); anything else is checked.
    let declared_here = (gateway.config.tools.get(&body.tool))
        .is_some_and(|t| t.compensation.is_some() && t.compensation == body.compensation);
    if !declared_here {
        check_compensation(gateway, body.tier, body.compensation.as_ref()).await?;
    }
    let args = Args::try_from(Value::Object(body.arguments))
        .map_err(|e| Error::BadRequest(format!("arguments: {e}")))?;
    let policy = ToolPolicy {
        tier: body.tier,
        compensation: body.compensation,
        idempotent: body.idempotent,
        requires_approval: body.requires_approval,
    };
    // The tool runs in the caller's process, which cannot renew the lease as the gateway does
    // (unless it says it will, over gRPC, with a shorter lease).
    let sdk_lease = gateway.config.limits.sdk_lease;
    let lease = body.lease.map_or(sdk_lease, |asked| asked.min(sdk_lease));
    let mut call = Call::new(principal.org.clone(), session, body.tool, args, policy)
        .with_caller(principal.actor())
        .with_lease(lease);
    if let Some(step) = body.step {
        call = call.with_step(step);
    }
    if let Some(key) = body.idempotency_key {
        call = call.with_idempotency_key(key);
    }
    if let Some(wait) = body.wait {
        call = call.with_wait(wait);
    }
    Ok(call)
}

/// Answers the HTTP API's JSON for an engine decision.
fn answered(decision: Intercept) -> Result<Json<Value>, Error> {
    let answer = match decision {
        Intercept::Execute {
            effect_id,
            lease_expires_at,
            lease_token,
        } => json!({"outcome": "execute", "effect_id": effect_id.to_string(),
                    "lease_expires_at": lease_expires_at.as_millis(),
                    "lease_token": lease_token.as_str()}),
        Intercept::Replay { effect_id, result } => {
            json!({"outcome": "replay", "effect_id": effect_id.to_string(), "result": result})
        }
        // 409 with code `call_failed` and the effect, as the SDK expects.
        Intercept::Failed {
            effect_id, error, ..
        } => return Err(Error::CallFailed { effect_id, error }),
        Intercept::AwaitingApproval {
            effect_id,
            approval_id,
            expires_at,
        } => json!({"outcome": "awaiting_approval", "effect_id": effect_id.to_string(),
                    "approval_id": approval_id.to_string(), "expires_at": expires_at.as_millis()}),
        // An identical call in doubt: it may have run, and an operator says whether it did.
        Intercept::Rejected { effect_id, reason } => json!({
            "outcome": "rejected",
            "effect_id": effect_id.map(|id| id.to_string()),
            "in_doubt": reason == undolog_engine::Rejection::InDoubt,
            "reason": reason.message(),
        }),
    };
    Ok(Json(answer))
}

/// An SDK effect's compensation runs when its session is undone, with no person asked: it is a
/// function local to the SDK caller, or an upstream tool the configuration itself declares as a
/// compensation (never any other upstream tool, which would launder a call past its policy), and
/// never one that waits for a person.
async fn check_compensation(
    gateway: &Gateway,
    tier: Tier,
    compensation: Option<&Compensation>,
) -> Result<(), Error> {
    if compensation.is_some() && tier != Tier::Compensable {
        return Err(Error::Unprocessable(format!(
            "compensation: only a compensable effect takes one, and this one is {tier}"
        )));
    }
    let Some(Compensation::Upstream { tool, .. }) = compensation else {
        return Ok(());
    };
    if !gateway.config.is_declared_compensation(tool) {
        return Err(Error::Unprocessable(format!(
            "compensation: the upstream tool {tool:?} is not declared as a compensation in this \
             gateway's configuration ([tools.X] compensation), so an SDK effect may not name \
             it; use a local function ({{\"kind\": \"local\", \"function\": \"…\"}})"
        )));
    }
    if gateway.waits_for_a_person(tool).await {
        return Err(Error::Unprocessable(format!(
            "compensation: the upstream tool {tool:?} waits for a person's approval (it is \
             irreversible or requires approval), and an undo step runs unapproved"
        )));
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommitBody {
    result: Value,
    lease_token: Option<String>,
}

pub(crate) async fn commit(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<CommitBody>,
) -> Result<Json<Value>, Error> {
    let id: EffectId = parse_id("effect", &id)?;
    let token = presented_token(body.lease_token.as_deref())?;
    gateway
        .engine
        .commit(principal.acting(), id, &token, body.result)
        .await?;
    Ok(Json(
        json!({"effect_id": id.to_string(), "state": "committed"}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailBody {
    error: String,
    lease_token: Option<String>,
}

pub(crate) async fn fail(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<FailBody>,
) -> Result<Json<Value>, Error> {
    let id: EffectId = parse_id("effect", &id)?;
    let token = presented_token(body.lease_token.as_deref())?;
    gateway
        .engine
        .fail(principal.acting(), id, &token, body.error)
        .await?;
    Ok(Json(
        json!({"effect_id": id.to_string(), "state": "failed"}),
    ))
}

/// The lease token a settling request carried (HTTP or gRPC), read as the engine reads it: a
/// request without one is refused before the engine is asked, and says what to send.
pub(crate) fn presented_token(text: Option<&str>) -> Result<LeaseToken, Error> {
    let text = text.filter(|t| !t.is_empty()).ok_or_else(|| {
        Error::BadRequest(
            "lease_token: required; send the lease_token of the intercept answer that told you \
             to execute this effect"
                .into(),
        )
    })?;
    LeaseToken::parse(text).map_err(|e| Error::BadRequest(format!("lease_token: {e}")))
}
