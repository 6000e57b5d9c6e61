//! An engine's refusal, read back from its status: the error this gateway answers its own
//! client, with the same status, code and message (`grpc::status` writes what is read here).

use std::time::Duration;

use serde_json::Value;
use tonic::{Status, metadata::MetadataMap};
use undolog_types::{ApprovalId, EffectId, Role};

use crate::Error;

fn metadata_text<'m>(metadata: &'m MetadataMap, key: &str) -> Option<&'m str> {
    metadata.get(key).and_then(|v| v.to_str().ok())
}

/// The engine's refusal as the error this gateway answers: the same status, code and message,
/// rebuilt as the engine's own error where the gateway acts on which one it is. A status with
/// no `x-undolog-code` did not come from the engine's code: the engine was not reached.
pub(super) fn refused(url: &str, status: &Status) -> Error {
    use undolog_engine::Error as E;
    let metadata = status.metadata();
    let Some(code) = metadata_text(metadata, "x-undolog-code") else {
        return Error::EngineUnreachable {
            url: url.to_owned(),
            reason: status.message().to_owned(),
        };
    };
    let detail: Value = metadata_text(metadata, "x-undolog-detail")
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null);
    let effect = detail["effect_id"]
        .as_str()
        .and_then(|id| id.parse::<EffectId>().ok());
    let approval = detail["approval_id"]
        .as_str()
        .and_then(|id| id.parse::<ApprovalId>().ok());
    let message = status.message().to_owned();
    match (code, effect, approval) {
        ("still_running", Some(effect), _) => E::StillRunning {
            effect,
            waited: Duration::from_millis(detail["waited_ms"].as_u64().unwrap_or(0)),
        }
        .into(),
        ("unknown_effect", Some(effect), _) => E::UnknownEffect(effect).into(),
        ("not_pending", Some(effect), _) => match serde_json::from_value(detail["state"].clone()) {
            Ok(state) => E::NotPending { effect, state }.into(),
            Err(_) => remote(status, code, message, Some(effect)),
        },
        ("still_waiting_for_approval", _, Some(approval)) => {
            E::ApprovalWaitTimedOut(approval).into()
        }
        ("unknown_approval", _, Some(approval)) => E::UnknownApproval(approval).into(),
        ("unauthorized", ..) => Error::Unauthorized(message),
        ("invalid_token", ..) => Error::InvalidToken(message),
        ("forbidden", ..) => match detail["needed"].as_str().map(str::parse::<Role>) {
            Some(Ok(needed)) => Error::RoleMissing { needed, message },
            _ => Error::Forbidden(message),
        },
        _ => remote(status, code, message, effect),
    }
}

fn remote(status: &Status, code: &str, message: String, effect_id: Option<EffectId>) -> Error {
    let http = metadata_text(status.metadata(), "x-undolog-status")
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| axum::http::StatusCode::from_u16(s).ok())
        .unwrap_or(axum::http::StatusCode::BAD_GATEWAY);
    Error::Remote {
        status: http,
        code: code.to_owned(),
        message,
        effect_id,
    }
}
