//! Tool results between the wire and the log: what is recorded, what a compensation template
//! reads, and the MCP result each outcome becomes (with `_meta["io.undolog/…"]`).

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, InputRequiredResult,
    MetaObject, ResultType,
};
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::calls::Outcome;

pub(crate) const META_EFFECT_ID: &str = "io.undolog/effect_id";
pub(crate) const META_REPLAYED: &str = "io.undolog/replayed";
pub(crate) const META_APPROVAL_ID: &str = "io.undolog/approval_id";
pub(crate) const META_IN_DOUBT: &str = "io.undolog/in_doubt";

/// The result as recorded: the upstream's `CallToolResult` without its per-response fields.
pub(crate) fn stored(result: &CallToolResult) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("_meta");
        map.remove("resultType");
    }
    value
}

/// The error text of a result whose `isError` is set.
pub(crate) fn tool_error(result: &Value) -> Option<String> {
    if result.get("isError") != Some(&Value::Bool(true)) {
        return None;
    }
    let text = text_of(result);
    Some(if text.is_empty() {
        "the tool reported an error without a message".to_owned()
    } else {
        text
    })
}

/// The text content of a result, joined.
pub(crate) fn text_of(result: &Value) -> String {
    result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// What `{{result.…}}` reads: the structured content, else the text parsed as JSON, else the text.
pub(crate) fn template_view(result: Option<&Value>) -> Value {
    let Some(result) = result else {
        return Value::Null;
    };
    if let Some(structured) = result.get("structuredContent") {
        return structured.clone();
    }
    let text = text_of(result);
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// The MCP answer to a `tools/call`: the upstream's `input_required` round as it sent it (its
/// `_meta` naming the effect), every other outcome as a [`to_mcp`] result.
pub(crate) fn to_mcp_response(outcome: &Outcome) -> CallToolResponse {
    if let Outcome::Task {
        effect_id,
        created_at,
        ttl,
    } = outcome
    {
        let mut meta = MetaObject::default();
        meta.0
            .insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
        let task = crate::tasks::seed(*effect_id, *created_at, *ttl);
        return CallToolResponse::Task(CreateTaskResult::new(task).with_meta(meta));
    }
    if let Outcome::InputRequired { effect_id, result } = outcome
        && let Ok(mut asked) = serde_json::from_value::<InputRequiredResult>(result.clone())
    {
        let mut meta = asked.meta.take().unwrap_or_default();
        meta.0
            .insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
        asked.meta = Some(meta);
        return CallToolResponse::InputRequired(asked);
    }
    to_mcp(outcome).into()
}

/// The MCP result of a `tools/call` outcome.
pub(crate) fn to_mcp(outcome: &Outcome) -> CallToolResult {
    let mut meta = serde_json::Map::new();
    let result = match outcome {
        Outcome::Executed { effect_id, result } => {
            meta.insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
            recorded(result)
        }
        Outcome::Replayed { effect_id, result } => {
            meta.insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
            meta.insert(META_REPLAYED.into(), json!(true));
            replay_noted(recorded(result), *effect_id)
        }
        Outcome::Failed {
            effect_id,
            error,
            result,
            replayed,
        } => {
            meta.insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
            if *replayed {
                meta.insert(META_REPLAYED.into(), json!(true));
            }
            let result = match result {
                Some(result) => recorded(result),
                None => CallToolResult::error(vec![ContentBlock::text(error.clone())]),
            };
            if *replayed {
                replay_noted(result, *effect_id)
            } else {
                result
            }
        }
        Outcome::Refused { effect_id, error } => {
            meta.insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
            CallToolResult::error(vec![ContentBlock::text(format!(
                "the upstream refused the call: {}",
                error.message
            ))])
        }
        Outcome::InputRequired { effect_id, .. } => {
            meta.insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
            CallToolResult::error(vec![ContentBlock::text(
                "the upstream asked for the client's input (an input_required round) and its \
                 request could not be passed on",
            )])
        }
        Outcome::InDoubt {
            effect_id,
            message,
            replayed,
        } => {
            meta.insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
            meta.insert(META_IN_DOUBT.into(), json!(true));
            if *replayed {
                meta.insert(META_REPLAYED.into(), json!(true));
            }
            let mut result = CallToolResult::error(vec![ContentBlock::text(message.clone())]);
            result.structured_content = Some(json!({
                "status": "in_doubt",
                "in_doubt": true,
                "effect_id": effect_id.to_string(),
            }));
            result
        }
        Outcome::Rejected { effect_id, message } => {
            if let Some(id) = effect_id {
                meta.insert(META_EFFECT_ID.into(), json!(id.to_string()));
            }
            CallToolResult::error(vec![ContentBlock::text(message.clone())])
        }
        Outcome::Task { effect_id, .. } | Outcome::UpstreamTask { effect_id, .. } => {
            meta.insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
            CallToolResult::success(vec![ContentBlock::text(format!(
                "The call goes on as task {effect_id}; follow it with tasks/get."
            ))])
        }
        Outcome::AwaitingApproval {
            effect_id,
            approval_id,
            expires_at,
        } => {
            meta.insert(META_EFFECT_ID.into(), json!(effect_id.to_string()));
            meta.insert(META_APPROVAL_ID.into(), json!(approval_id.to_string()));
            let text = format!(
                "This call needs a person's approval (approval {approval_id}). It has not run. \
                 Call it again with the same arguments once it is approved; the request expires \
                 at {expires_at}."
            );
            let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
            result.structured_content = Some(json!({
                "status": "awaiting_approval",
                "approval_id": approval_id.to_string(),
                "effect_id": effect_id.to_string(),
            }));
            result
        }
    };
    result.with_meta(Some(MetaObject(meta)))
}

/// A replay says so in words too, after the recorded content, for a model that reads no `_meta`.
fn replay_noted(mut result: CallToolResult, effect: undolog_types::EffectId) -> CallToolResult {
    result.content.push(ContentBlock::text(format!(
        "(UndoLog: replayed. An identical call already ran in this run as effect {effect}; this is \
         its recorded result, and nothing ran now. To run it again, send a new \
         `io.undolog/idempotency_key` or `io.undolog/step` in the request's _meta.)"
    )));
    result
}

fn recorded(result: &Value) -> CallToolResult {
    // Read from the value where it is: `from_value` would take a copy of the whole tree first.
    let mut result = CallToolResult::deserialize(result).unwrap_or_else(|_| {
        CallToolResult::error(vec![ContentBlock::text(
            "the recorded result cannot be read back as an MCP tool result",
        )])
    });
    // Recorded without it; 2026-07-28 clients need it (the SDK drops it for older ones).
    result.result_type = Some(ResultType::COMPLETE);
    result
}
