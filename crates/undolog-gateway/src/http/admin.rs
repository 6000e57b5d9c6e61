//! The admin API: sessions and their effects, undo, approvals, and in-doubt effects.
//! Everything is scoped to the caller's org. Reading takes any role; deciding an approval takes
//! an approver (never for the caller's own call), and undo and in-doubt resolution an admin.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
};
use serde::Deserialize;
use serde_json::{Value, json};
use undolog_engine::{Decider, Resolution, UndoReport};
use undolog_store::{Approval, Effect, Session};
use undolog_types::{ApprovalId, ApprovalState, EffectId, Role, SessionId};

use super::JsonBody;
use crate::{Error, Gateway, Principal, compensate::UpstreamCompensator};

type Result<T> = std::result::Result<Json<T>, Error>;

pub(crate) fn parse_id<T: std::str::FromStr>(
    what: &str,
    text: &str,
) -> std::result::Result<T, Error> {
    text.parse()
        .map_err(|_| Error::BadRequest(format!("{text:?} is not a valid {what} id")))
}

pub(crate) fn session_id(text: &str) -> std::result::Result<SessionId, Error> {
    SessionId::new(text).map_err(|e| Error::BadRequest(format!("session id: {e}")))
}

pub(crate) async fn sessions(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
) -> Result<Vec<Session>> {
    let reader = principal.reader();
    Ok(Json(
        gateway.engine.sessions(principal.acting(), &reader).await?,
    ))
}

/// `GET /v1/sessions/{id}/export`: the session's whole history (session, effects, approvals,
/// undo stack) as one JSON document, `undolog.session-snapshot.v1`; the export is kept in the log.
pub(crate) async fn export(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> std::result::Result<axum::response::Response, Error> {
    use axum::response::IntoResponse;
    let id = session_id(&id)?;
    let snapshot = (gateway.engine)
        .snapshot(principal.acting(), &id, &principal.reader())
        .await?;
    let name = format!(
        "attachment; filename=\"undolog-session-{}.json\"",
        id.as_str().replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_',
            "_"
        )
    );
    let disposition = axum::http::HeaderValue::from_str(&name)
        .unwrap_or_else(|_| axum::http::HeaderValue::from_static("attachment"));
    Ok((
        [(axum::http::header::CONTENT_DISPOSITION, disposition)],
        Json(snapshot),
    )
        .into_response())
}

pub(crate) async fn session(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Session> {
    let id = session_id(&id)?;
    let found = gateway
        .engine
        .sessions(principal.acting(), &principal.reader())
        .await?
        .into_iter()
        .find(|s| s.id == id)
        .ok_or(undolog_engine::Error::UnknownSession(id))?;
    Ok(Json(found))
}

pub(crate) async fn session_effects(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Vec<Effect>> {
    let id = session_id(&id)?;
    let reader = principal.reader();
    Ok(Json(
        (gateway.engine)
            .session_effects(principal.acting(), &id, &reader)
            .await?,
    ))
}

pub(crate) async fn undo(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<UndoReport> {
    may_undo(&principal)?;
    let id = session_id(&id)?;
    let compensator = UpstreamCompensator { gateway: &gateway };
    Ok(Json(
        undo_session(&gateway, &principal, &id, &compensator).await?,
    ))
}

/// Undoing a session takes an admin (on every surface).
pub(crate) fn may_undo(principal: &Principal) -> std::result::Result<(), Error> {
    Ok(principal.require(Role::Admin, "undoing a session")?)
}

/// Undoes session `id` of the principal's org through `compensator`, and counts its steps. The
/// caller has asked [`may_undo`] first.
pub(crate) async fn undo_session(
    gateway: &Gateway,
    principal: &Principal,
    id: &SessionId,
    compensator: &dyn undolog_engine::Compensator,
) -> std::result::Result<UndoReport, Error> {
    let report = gateway
        .engine
        .undo(principal.acting(), id, compensator)
        .await?;
    for step in &report.steps {
        gateway.metrics.undo_step(&step.outcome);
    }
    Ok(report)
}

#[derive(Debug, Deserialize)]
pub(crate) struct ApprovalFilter {
    status: Option<String>,
}

pub(crate) async fn approvals(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Query(filter): Query<ApprovalFilter>,
) -> Result<Vec<Approval>> {
    let state = filter.status.as_deref().map(approval_state).transpose()?;
    let reader = principal.reader();
    Ok(Json(
        (gateway.engine)
            .approvals_read_by(principal.acting(), state, &reader)
            .await?,
    ))
}

pub(crate) async fn approval(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Approval> {
    let id: ApprovalId = parse_id("approval", &id)?;
    Ok(Json(gateway.engine.approval(principal.acting(), id).await?))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Decision {
    reason: Option<String>,
}

/// Who decides, for the engine's four-eyes check: an approver's own calls are never theirs to
/// decide, unless the setup allows it (or it is open mode's single local operator).
fn decider(
    gateway: &Gateway,
    principal: &Principal,
    action: &str,
    via: &Via,
) -> std::result::Result<Decider, Error> {
    principal.require(Role::Approver, action)?;
    Ok(Decider {
        id: principal.actor(),
        may_decide_own: gateway.config.approvals.allow_self_approval
            || principal.is_local_operator(),
        via: via.record(),
    })
}

/// Where a person decided, recorded as the approval's `decided_via`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Via {
    /// A direct request: the API, the dashboard or the CLI (`api`).
    Api,
    /// A signed link the `[[notify]]` target of this name carried (`link:NAME`).
    Link(String),
}

impl Via {
    /// As the approval records it.
    pub(crate) fn record(&self) -> String {
        match self {
            Via::Api => "api".into(),
            Via::Link(target) => format!("link:{target}"),
        }
    }

    /// The channel a gateway in front of this engine says a decision came through (none:
    /// `api`), as [`Via::record`] writes it.
    pub(crate) fn of_record(said: Option<&str>) -> std::result::Result<Via, Error> {
        match said {
            None | Some("api") => Ok(Via::Api),
            Some(said) => match said.strip_prefix("link:") {
                Some(target) if crate::config::is_target_name(target) => {
                    Ok(Via::Link(target.to_owned()))
                }
                _ => Err(Error::BadRequest(format!(
                    "{said:?} is not a channel; a decision comes through \"api\" or \"link:NAME\""
                ))),
            },
        }
    }
}

/// An approval state named by a client.
pub(crate) fn approval_state(text: &str) -> std::result::Result<ApprovalState, Error> {
    text.parse().map_err(|_| {
        Error::BadRequest(format!(
            "{text:?} is not an approval state; use pending, approved, denied, expired or withdrawn"
        ))
    })
}

pub(crate) async fn approve(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    JsonBody(decision): JsonBody<Decision>,
) -> Result<Approval> {
    let id: ApprovalId = parse_id("approval", &id)?;
    let verdict = Verdict::Approve(decision.reason);
    Ok(Json(
        decide(&gateway, &principal, id, verdict, &Via::Api).await?,
    ))
}

pub(crate) async fn deny(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    JsonBody(decision): JsonBody<Decision>,
) -> Result<Approval> {
    let id: ApprovalId = parse_id("approval", &id)?;
    let verdict = Verdict::Deny(decision.reason);
    Ok(Json(
        decide(&gateway, &principal, id, verdict, &Via::Api).await?,
    ))
}

/// What a person says of a held call, with their reason (required to deny: the agent is told).
#[derive(Debug)]
pub(crate) enum Verdict {
    Approve(Option<String>),
    Deny(Option<String>),
}

/// Decides held call `id` on any surface: an approver, never of their own call (four eyes),
/// and counted.
pub(crate) async fn decide(
    gateway: &Gateway,
    principal: &Principal,
    id: ApprovalId,
    verdict: Verdict,
    via: &Via,
) -> std::result::Result<Approval, Error> {
    let (acting, engine) = (principal.acting(), &gateway.engine);
    let approving = matches!(verdict, Verdict::Approve(_));
    let decided = match verdict {
        Verdict::Approve(reason) => {
            let by = decider(gateway, principal, "approving a call", via)?;
            engine.approve(acting, id, &by, reason).await?
        }
        Verdict::Deny(reason) => {
            let by = decider(gateway, principal, "denying a call", via)?;
            let reason = reason.filter(|r| !r.trim().is_empty()).ok_or_else(|| {
                Error::BadRequest("a denial needs a reason: send {\"reason\": \"…\"}".into())
            })?;
            engine.deny(acting, id, &by, reason).await?
        }
    };
    gateway.metrics.decided(approving, decided.requested_at);
    Ok(decided)
}

pub(crate) async fn effect(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Effect> {
    let id: EffectId = parse_id("effect", &id)?;
    let reader = principal.reader();
    Ok(Json(
        (gateway.engine)
            .effect_read_by(principal.acting(), id, &reader)
            .await?,
    ))
}

pub(crate) async fn in_doubt(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
) -> Result<Vec<Effect>> {
    let reader = principal.reader();
    Ok(Json(
        (gateway.engine)
            .in_doubt_read_by(principal.acting(), &reader)
            .await?,
    ))
}

#[derive(Debug, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum ResolveBody {
    Committed {
        result: Value,
    },
    Failed {
        error: String,
    },
    /// A compensation in doubt did run.
    Compensated {},
    /// A compensation in doubt did not run (an undo tries it again).
    NotCompensated {
        error: Option<String>,
    },
}

pub(crate) async fn resolve(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ResolveBody>,
) -> Result<Value> {
    let id: EffectId = parse_id("effect", &id)?;
    let resolution = match body {
        ResolveBody::Committed { result } => Resolution::Committed(result),
        ResolveBody::Failed { error } => Resolution::Failed(error),
        ResolveBody::Compensated {} => Resolution::Compensated,
        ResolveBody::NotCompensated { error } => Resolution::NotCompensated(
            error.unwrap_or_else(|| "an operator found it did not".into()),
        ),
    };
    resolve_effect(&gateway, &principal, id, resolution).await?;
    Ok(Json(
        json!({ "effect_id": id.to_string(), "resolved": true, "resolved_by": principal.actor() }),
    ))
}

/// Records what happened to in-doubt effect `id` on any surface: an admin, who is recorded.
pub(crate) async fn resolve_effect(
    gateway: &Gateway,
    principal: &Principal,
    id: EffectId,
    resolution: Resolution,
) -> std::result::Result<(), Error> {
    principal.require(Role::Admin, "resolving an in-doubt effect")?;
    (gateway.engine)
        .resolve_in_doubt(principal.acting(), id, resolution, principal.actor())
        .await?;
    tracing::info!(effect = %id, by = %principal.actor(), "in-doubt effect resolved");
    Ok(())
}
