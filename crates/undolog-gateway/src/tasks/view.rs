//! What `tasks/get` answers: a task's state as this gateway runs it, or as the log has it.

use std::time::Duration;

use rmcp::{
    ErrorData,
    model::{DetailedTask, JsonObject, TaskPayload},
};
use serde_json::{Value, json};
use undolog_store::{Approval, Effect};
use undolog_types::{ApprovalState, EffectId, EffectState, Timestamp};

use super::{RunState, TaskRun, awaiting, seed};
use crate::{calls::Outcome, results};

/// A task this gateway runs.
pub(super) fn of_run(id: EffectId, run: &TaskRun, ttl: Duration) -> DetailedTask {
    let mut task = seed(id, run.created_at, ttl);
    let (payload, updated_at) = match run.state() {
        RunState::Working {
            message,
            updated_at,
        } => {
            task.status_message = message;
            (TaskPayload::Working, updated_at)
        }
        RunState::InputRequired {
            mut requests,
            answers,
            updated_at,
            ..
        } => {
            // Only what is still to be answered.
            requests.retain(|key, _| !answers.contains_key(key));
            (
                TaskPayload::InputRequired {
                    input_requests: requests,
                },
                updated_at,
            )
        }
        RunState::Finished {
            outcome,
            updated_at,
            ..
        } => (finished(outcome), updated_at),
        RunState::Cancelled { updated_at, .. } => (TaskPayload::Cancelled, updated_at),
    };
    task.last_updated_at = updated_at.to_string();
    DetailedTask::new(task, payload)
}

/// A task as the log has it (it ended here before, or another gateway ran it).
pub(super) fn of_effect(
    effect: &Effect,
    approval: Option<&Approval>,
    ttl: Duration,
    now: Timestamp,
) -> DetailedTask {
    let mut task = seed(effect.id, effect.created_at, ttl);
    task.last_updated_at = effect.updated_at.to_string();
    let failure = |message: String| TaskPayload::Failed {
        error: error_object(&ErrorData::internal_error(message, None)),
    };
    let payload = match effect.state {
        EffectState::AwaitingApproval => {
            task.status_message = effect.approval.map(awaiting);
            TaskPayload::Working
        }
        // Its executor gave up on it, or is gone: it may or may not have run.
        EffectState::Pending if effect.lease.as_ref().is_none_or(|l| l.expires_at <= now) => {
            TaskPayload::Failed {
                error: error_object(&in_doubt(
                    effect.id,
                    effect
                        .error
                        .clone()
                        .unwrap_or_else(|| "its executor is gone".into()),
                )),
            }
        }
        EffectState::Approved | EffectState::Pending => TaskPayload::Working,
        EffectState::Committed
        | EffectState::Compensating
        | EffectState::Compensated
        | EffectState::CompensationFailed
        | EffectState::CompensationInDoubt => completed(effect.id, effect.result.as_ref()),
        EffectState::Failed => match effect.result.as_ref() {
            // The upstream's JSON-RPC error, kept as the effect's details.
            Some(details) if details.get("error").is_some_and(Value::is_object) => {
                TaskPayload::Failed {
                    error: details["error"].as_object().cloned().unwrap_or_default(),
                }
            }
            // A tool error is a completed call whose result says so.
            Some(result) if results::tool_error(result).is_some() => {
                completed(effect.id, Some(result))
            }
            _ => failure(
                effect
                    .error
                    .clone()
                    .unwrap_or_else(|| "the call failed".into()),
            ),
        },
        // An input round this gateway no longer runs: its requests, as the upstream asked.
        EffectState::InputRequired => match effect
            .result
            .as_ref()
            .and_then(|r| r.get("inputRequests"))
            .and_then(|r| serde_json::from_value(r.clone()).ok())
        {
            Some(input_requests) => TaskPayload::InputRequired { input_requests },
            None => failure("the upstream asked for input it did not name".into()),
        },
        EffectState::Denied if approval.is_some_and(|a| a.state == ApprovalState::Withdrawn) => {
            TaskPayload::Cancelled
        }
        EffectState::Denied => failure(match approval {
            Some(a) => format!(
                "denied by {}: {}",
                a.decided_by.as_deref().unwrap_or("an operator"),
                a.reason.as_deref().unwrap_or("no reason given")
            ),
            None => "denied".into(),
        }),
        EffectState::Expired => failure("nobody decided on the call in time".into()),
        EffectState::Rejected => failure(
            effect
                .error
                .clone()
                .unwrap_or_else(|| "the call was refused".into()),
        ),
    };
    DetailedTask::new(task, payload)
}

/// A finished call's outcome as a task's payload.
fn finished(outcome: Result<Outcome, ErrorData>) -> TaskPayload {
    match outcome {
        Err(error) => TaskPayload::Failed {
            error: error_object(&error),
        },
        Ok(Outcome::Refused { error, .. }) => TaskPayload::Failed {
            error: error_object(&error),
        },
        Ok(Outcome::Failed {
            result: None,
            error,
            ..
        })
        | Ok(Outcome::Rejected { message: error, .. }) => TaskPayload::Failed {
            error: error_object(&ErrorData::internal_error(error, None)),
        },
        Ok(Outcome::InDoubt {
            effect_id, message, ..
        }) => TaskPayload::Failed {
            error: error_object(&in_doubt(effect_id, message)),
        },
        Ok(Outcome::AwaitingApproval { .. }) => TaskPayload::Failed {
            error: error_object(&ErrorData::internal_error(
                "nobody decided on the call in time",
                None,
            )),
        },
        Ok(outcome) => TaskPayload::Completed {
            result: object(serde_json::to_value(results::to_mcp(&outcome)).unwrap_or(Value::Null)),
        },
    }
}

/// The recorded result of effect `id` as a completed task's payload.
fn completed(id: EffectId, result: Option<&Value>) -> TaskPayload {
    let result = result.cloned().unwrap_or_else(|| json!({"content": []}));
    let outcome = Outcome::Executed {
        effect_id: id,
        result,
    };
    TaskPayload::Completed {
        result: object(serde_json::to_value(results::to_mcp(&outcome)).unwrap_or(Value::Null)),
    }
}

/// The error of a call that may or may not have run.
fn in_doubt(effect_id: EffectId, message: String) -> ErrorData {
    let data = json!({"in_doubt": true, "effect_id": effect_id.to_string()});
    ErrorData::internal_error(
        format!("the call is in doubt (it may or may not have run): {message}"),
        Some(data),
    )
}

fn error_object(error: &ErrorData) -> JsonObject {
    let mut object = JsonObject::new();
    object.insert("code".into(), json!(error.code.0));
    object.insert("message".into(), json!(error.message));
    if let Some(data) = &error.data {
        object.insert("data".into(), data.clone());
    }
    object
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => {
            let mut map = JsonObject::new();
            map.insert("value".into(), other);
            map
        }
    }
}
