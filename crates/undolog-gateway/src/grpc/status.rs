//! Errors as gRPC statuses: the HTTP API's status mapped to its gRPC code (as gRPC's own
//! HTTP-to-gRPC table does), the message that says what to do, and in metadata what a gateway
//! in front of this engine needs to answer its own client exactly as this process would:
//! `x-undolog-code` (the API's error code), `x-undolog-status` (the HTTP status) and
//! `x-undolog-detail` (the ids and state the error names, as JSON).

use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use tonic::{Code, Status, metadata::MetadataValue};
use undolog_engine::Error as EngineError;

use crate::Error;

pub(crate) fn status(error: impl Into<Error>) -> Status {
    let error = error.into();
    let http = error.status();
    let code = match http {
        StatusCode::BAD_REQUEST
        | StatusCode::UNPROCESSABLE_ENTITY
        | StatusCode::PAYLOAD_TOO_LARGE => Code::InvalidArgument,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::CONFLICT => Code::FailedPrecondition,
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::BAD_GATEWAY => Code::Unavailable,
        StatusCode::GATEWAY_TIMEOUT | StatusCode::REQUEST_TIMEOUT => Code::DeadlineExceeded,
        // Still waiting for a person: ask again later.
        StatusCode::ACCEPTED => Code::Unavailable,
        _ => Code::Internal,
    };
    let mut answer = Status::new(code, error.to_string());
    let metadata = answer.metadata_mut();
    if let Ok(value) = MetadataValue::try_from(error.code()) {
        metadata.insert("x-undolog-code", value);
    }
    metadata.insert("x-undolog-status", MetadataValue::from(http.as_u16()));
    if let Ok(value) = MetadataValue::try_from(detail(&error).to_string()) {
        metadata.insert("x-undolog-detail", value);
    }
    answer
}

/// The ids and state `error` names, for a gateway to rebuild the same error.
fn detail(error: &Error) -> Value {
    let mut detail = Map::new();
    if let Some(effect) = error.effect_id() {
        detail.insert("effect_id".into(), json!(effect.to_string()));
    }
    match error {
        Error::Engine(EngineError::UnknownEffect(effect)) => {
            detail.insert("effect_id".into(), json!(effect.to_string()));
        }
        Error::Engine(EngineError::NotPending { effect, state }) => {
            detail.insert("effect_id".into(), json!(effect.to_string()));
            detail.insert("state".into(), json!(state));
        }
        Error::Engine(EngineError::StillRunning { waited, .. }) => {
            detail.insert("waited_ms".into(), json!(waited.as_millis() as u64));
        }
        Error::Engine(
            EngineError::ApprovalWaitTimedOut(approval) | EngineError::UnknownApproval(approval),
        ) => {
            detail.insert("approval_id".into(), json!(approval.to_string()));
        }
        Error::RoleMissing { needed, .. } => {
            detail.insert("needed".into(), json!(needed));
        }
        _ => {}
    }
    Value::Object(detail)
}
