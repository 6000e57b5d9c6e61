//! Undo run by the caller: the SDK begins the undo (claiming the session), runs each compensation
//! in its own process, newest first, and reports each outcome here under that claim. Admins only.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::Deserialize;
use serde_json::Value;
use undolog_engine::{Compensated, StepOutcome, UndoPlanned, UndoProgress};
use undolog_types::{EffectId, Role};

use super::{
    JsonBody,
    admin::{parse_id, session_id},
};
use crate::{Error, Gateway, Principal};

/// `POST /v1/sessions/{id}/undo/begin`: the plan, with the session now compensating.
pub(crate) async fn begin(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<UndoPlanned>, Error> {
    principal.require(Role::Admin, "undoing a session")?;
    let id = session_id(&id)?;
    Ok(Json(
        gateway.engine.begin_undo(principal.acting(), &id).await?,
    ))
}

/// One step's report: how it went, under the claim `begin` answered.
#[derive(Debug, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum StepBody {
    Compensated {
        claim: String,
        #[serde(default)]
        result: Value,
    },
    AlreadyUndone {
        claim: String,
    },
    Failed {
        claim: String,
        error: String,
    },
    /// It was sent and its answer lost: it may or may not have run, and is kept for an admin.
    InDoubt {
        claim: String,
        error: String,
    },
}

impl StepBody {
    /// The claim it names, and the step's outcome as the engine takes it.
    pub(crate) fn into_outcome(self) -> (String, StepOutcome) {
        match self {
            StepBody::Compensated { claim, result } => (
                claim,
                StepOutcome::Compensated {
                    detail: Compensated::Done { result },
                },
            ),
            StepBody::AlreadyUndone { claim } => (
                claim,
                StepOutcome::Compensated {
                    detail: Compensated::AlreadyUndone,
                },
            ),
            StepBody::Failed { claim, error } => (claim, StepOutcome::Failed { error }),
            StepBody::InDoubt { claim, error } => (claim, StepOutcome::InDoubt { error }),
        }
    }
}

/// `POST /v1/sessions/{id}/undo/steps/{effect_id}`: one compensation's outcome.
pub(crate) async fn step(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path((id, effect)): Path<(String, String)>,
    JsonBody(body): JsonBody<StepBody>,
) -> Result<Json<UndoProgress>, Error> {
    principal.require(Role::Admin, "undoing a session")?;
    let id = session_id(&id)?;
    let effect: EffectId = parse_id("effect", &effect)?;
    let (claim, outcome) = body.into_outcome();
    let counted = outcome.clone();
    let progress = (gateway.engine)
        .record_undo_step(principal.acting(), &id, &claim, effect, outcome)
        .await?;
    gateway.metrics.undo_step(&counted);
    Ok(Json(progress))
}
