//! The seed's REST tool call: `POST /mcp/tool_call` with `{"name", "arguments"}`, the session in
//! `X-UndoLog-Session-Id` (else the principal's implicit run), an optional `Idempotency-Key`. Approvals are never held here: a call
//! that needs one answers 202 with the approval id, and the identical call retried later runs.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use undolog_types::Args;

use super::JsonBody;
use crate::{
    Error, Gateway, Principal,
    calls::{Caller, Outcome, ToolCall},
    mcp::SESSION_HEADER,
    results,
    runs::{CallSession, Named},
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolCallBody {
    name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
}

pub(crate) async fn tool_call(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<ToolCallBody>,
) -> Result<Response, Error> {
    let named = Named {
        header: header(&headers, SESSION_HEADER),
        ..Named::default()
    };
    let session = CallSession::of(&principal, named)?;
    let call = ToolCall {
        caller: principal.actor(),
        presented: principal.presented.clone(),
        org: principal.org,
        session,
        tool: body.name,
        args: Args::try_from(Value::Object(body.arguments))
            .map_err(|e| Error::BadRequest(format!("arguments: {e}")))?,
        idempotency_key: header(&headers, "idempotency-key").map(str::to_owned),
        step: None,
        meta: trace_context(&headers),
        round: None,
        wait: None,
    };
    let caller = Caller {
        never_hold: true,
        ..Caller::default()
    };
    let outcome = gateway.call_tool(call, &caller).await?;
    Ok(respond(&outcome))
}

/// The W3C trace context of the HTTP request (`traceparent`, `tracestate`), carried as MCP
/// carries it: in the call's `_meta`.
fn trace_context(headers: &HeaderMap) -> Option<rmcp::model::RequestMetaObject> {
    let mut meta = rmcp::model::RequestMetaObject::new();
    for name in ["traceparent", "tracestate"] {
        if let Some(value) = header(headers, name) {
            meta.0
                .0
                .insert(name.to_owned(), Value::String(value.to_owned()));
        }
    }
    (!meta.0.0.is_empty()).then_some(meta)
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A failure answered now is the upstream's (502); one replayed is a conflict with the log (409).
fn failure_status(replayed: bool) -> StatusCode {
    if replayed {
        StatusCode::CONFLICT
    } else {
        StatusCode::BAD_GATEWAY
    }
}

fn respond(outcome: &Outcome) -> Response {
    let (status, body) = match outcome {
        Outcome::Executed { effect_id, result } | Outcome::Replayed { effect_id, result } => {
            let replayed = matches!(outcome, Outcome::Replayed { .. });
            (
                StatusCode::OK,
                json!({
                    "outcome": if replayed { "replayed" } else { "executed" },
                    "effect_id": effect_id.to_string(),
                    "result": results::template_view(Some(result)),
                    "tool_result": result,
                }),
            )
        }
        // The REST surface never declares the tasks extension; a task is still answered.
        Outcome::Task { effect_id, .. } | Outcome::UpstreamTask { effect_id, .. } => (
            StatusCode::ACCEPTED,
            json!({"outcome": "task", "task_id": effect_id.to_string(), "effect_id": effect_id.to_string()}),
        ),
        Outcome::AwaitingApproval {
            effect_id,
            approval_id,
            expires_at,
        } => (
            StatusCode::ACCEPTED,
            json!({
                "outcome": "awaiting_approval",
                "approval_id": approval_id.to_string(),
                "effect_id": effect_id.to_string(),
                "expires_at": expires_at.as_millis(),
            }),
        ),
        Outcome::InDoubt {
            effect_id,
            message,
            replayed,
        } => (
            failure_status(*replayed),
            json!({
                "outcome": "in_doubt",
                "in_doubt": true,
                "effect_id": effect_id.to_string(),
                "replayed": replayed,
                "code": "in_doubt",
                "error": message,
            }),
        ),
        Outcome::Rejected { effect_id, message } => (
            StatusCode::FORBIDDEN,
            json!({
                "outcome": "rejected",
                "effect_id": effect_id.map(|id| id.to_string()),
                "error": message,
            }),
        ),
        Outcome::Refused { effect_id, error } => (
            StatusCode::BAD_GATEWAY,
            json!({
                "outcome": "failed",
                "effect_id": effect_id.to_string(),
                "replayed": false,
                "error": format!("the upstream refused the call: {}", error.message),
                "upstream_error": error,
            }),
        ),
        // The REST call has no way to answer the upstream's questions.
        Outcome::InputRequired { effect_id, result } => (
            StatusCode::BAD_GATEWAY,
            json!({
                "outcome": "failed",
                "effect_id": effect_id.to_string(),
                "replayed": false,
                "error": "the upstream asked for the client's input (an input_required round); \
                          call this tool over MCP (2026-07-28) to answer it",
                "input_required": result,
            }),
        ),
        Outcome::Failed {
            effect_id,
            error,
            result,
            replayed,
        } => (
            failure_status(*replayed),
            json!({
                "outcome": "failed",
                "effect_id": effect_id.to_string(),
                "replayed": replayed,
                "error": error,
                "tool_result": result,
            }),
        ),
    };
    (status, Json(body)).into_response()
}
