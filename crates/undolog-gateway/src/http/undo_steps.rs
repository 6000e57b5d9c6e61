//! Undo run by the caller: the SDK begins the undo, runs each compensation in its own process,
//! newest first, and reports each outcome here.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::Deserialize;
use serde_json::Value;
use undolog_engine::{Compensated, StepOutcome, UndoPlanned, UndoProgress};
use undolog_types::EffectId;

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
    let id = session_id(&id)?;
    Ok(Json(gateway.engine.begin_undo(&principal.org, &id).await?))
}

#[derive(Debug, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum StepBody {
    Compensated {
        #[serde(default)]
        result: Value,
    },
    AlreadyUndone,
    Failed {
        error: String,
    },
}

/// `POST /v1/sessions/{id}/undo/steps/{effect_id}`: one compensation's outcome.
pub(crate) async fn step(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    Path((id, effect)): Path<(String, String)>,
    JsonBody(body): JsonBody<StepBody>,
) -> Result<Json<UndoProgress>, Error> {
    let id = session_id(&id)?;
    let effect: EffectId = parse_id("effect", &effect)?;
    let outcome = match body {
        StepBody::Compensated { result } => StepOutcome::Compensated {
            detail: Compensated::Done { result },
        },
        StepBody::AlreadyUndone => StepOutcome::Compensated {
            detail: Compensated::AlreadyUndone,
        },
        StepBody::Failed { error } => StepOutcome::Failed { error },
    };
    Ok(Json(
        gateway
            .engine
            .record_undo_step(&principal.org, &id, effect, outcome)
            .await?,
    ))
}
