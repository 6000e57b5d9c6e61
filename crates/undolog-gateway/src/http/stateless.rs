//! A stateless `tools/call` (MCP 2026-07-28), answered on the request's own task.
//!
//! Today's clients send each call as one self-contained POST: no session, the protocol version,
//! client info and capabilities in the request's `_meta`. When such a call wants nothing while it
//! runs (no progress token, no log level), its answer is its result alone, so it needs none of
//! the MCP server's per-request machinery (a service, a peer and their channels, two tasks, an
//! event stream): it goes straight to [`answer_tool_call`], the handler every surface shares, and
//! its answer is one JSON body. Everything else — a request this path is not sure of, a malformed
//! one, any other method — goes on to the MCP server untouched, which answers it as before. So
//! this path decides nothing of its own: it only skips work for the calls it fully understands.

use std::sync::Arc;

use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::{
    ErrorData,
    model::{
        CallToolRequestParams, CallToolResponse, ClientCapabilities, ErrorCode, ProtocolVersion,
        RequestId, ServerResult,
    },
};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::{
    Gateway, Principal,
    calls::Caller,
    mcp::{SESSION_HEADER, answer_tool_call, upstream_meta},
    runs::Named,
    upstream::{Era, Requester},
};

/// Axum middleware on `/mcp`, innermost: the principal is known and the body is in memory.
pub(crate) async fn answer_directly(
    State(gateway): State<Arc<Gateway>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST || !plain_stateless_headers(request.headers()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    // The parse guard has read the body into memory already: this takes it as it is.
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(principal) = parts.extensions.get::<Principal>().cloned() else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    match ToolsCall::understood(&bytes, &parts.headers) {
        Some(call) => answer(gateway, principal, call, &parts.headers).await,
        None => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

/// The headers of a stateless `tools/call` this path takes: no MCP session, a body of JSON, an
/// answer in JSON accepted (a client must accept it and an event stream both), and the standard
/// headers (SEP-2243) plain and single. Checked before the body is read, so other requests
/// cost nothing here.
fn plain_stateless_headers(headers: &HeaderMap) -> bool {
    let one = |name: &str| {
        let mut values = headers.get_all(name).iter();
        match (values.next(), values.next()) {
            (Some(value), None) => value.to_str().ok(),
            _ => None,
        }
    };
    let accepts = |media: &str| {
        headers.get_all(header::ACCEPT).iter().any(|value| {
            value.to_str().is_ok_and(|list| {
                list.split(',').any(|item| {
                    let essence = item.split(';').next().unwrap_or_default().trim();
                    essence.eq_ignore_ascii_case(media)
                })
            })
        })
    };
    let json_body = one(header::CONTENT_TYPE.as_str()).is_some_and(|value| {
        let essence = value.split(';').next().unwrap_or_default().trim();
        essence.eq_ignore_ascii_case("application/json")
    });
    !headers.contains_key("mcp-session-id")
        && json_body
        && accepts("application/json")
        && accepts("text/event-stream")
        && one("mcp-method") == Some("tools/call")
        && one("mcp-name").is_some_and(|name| !name.starts_with("=?"))
        && one("mcp-protocol-version").is_some_and(is_stateless_version)
}

/// A protocol revision the gateway speaks that has no sessions (2026-07-28 and later).
fn is_stateless_version(version: &str) -> bool {
    version >= ProtocolVersion::V_2026_07_28.as_str()
        && ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|known| known.as_str() == version)
}

/// A JSON-RPC `tools/call` request, as the MCP server reads its parameters.
#[derive(Debug, Deserialize)]
struct ToolsCall {
    jsonrpc: String,
    id: RequestId,
    method: String,
    params: CallToolRequestParams,
}

impl ToolsCall {
    /// The call, when this path takes it: a well-formed `tools/call` whose `_meta` carries every
    /// per-request key the revision requires, the version its header names, and neither a
    /// progress token nor a log level (the client wants nothing but the answer), and whose
    /// `Mcp-Name` header names its tool.
    fn understood(body: &Bytes, headers: &HeaderMap) -> Option<ToolsCall> {
        let call: ToolsCall = serde_json::from_slice(body).ok()?;
        let meta = call.params.meta.as_ref()?;
        let version = meta.protocol_version()?;
        let header_version = headers.get("mcp-protocol-version")?.to_str().ok()?;
        let named = headers.get("mcp-name")?.to_str().ok()?;
        let wants_nothing_meanwhile =
            meta.get_progress_token().is_none() && meta.log_level().is_none();
        (call.jsonrpc == "2.0"
            && call.method == "tools/call"
            && version.as_str() == header_version
            && meta.missing_required_keys(&version).is_empty()
            && wants_nothing_meanwhile
            && named == call.params.name.as_ref())
        .then_some(call)
    }
}

/// Runs the call on a task of its own, as the MCP server would: a client that goes away
/// cancels it (the call path then records what it must), and a call is never dropped half-way.
async fn answer(
    gateway: Arc<Gateway>,
    principal: Principal,
    call: ToolsCall,
    headers: &HeaderMap,
) -> Response {
    let ToolsCall { id, params, .. } = call;
    let header = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let meta = params.meta.clone().unwrap_or_default();
    let cancel = CancellationToken::new();
    let tasks = (meta.client_capabilities()).is_some_and(|c| c.supports_tasks());
    let caller = Caller {
        tasks,
        in_task: false,
        hold: None,
        requester: Some(Requester {
            peer: None,
            protocol_version: meta.protocol_version(),
            connection: Requester::next_connection(),
            request: id.clone(),
        }),
        cancel: cancel.clone(),
        never_hold: false,
        era: Era::Stateless,
        upstream_meta: Some(upstream_meta(meta.client_capabilities())),
    };
    let run = async move {
        let named = Named {
            header: header.as_deref(),
            meta: None,
            connection: None,
        };
        answer_tool_call(&gateway, principal, params, &meta, named, &caller).await
    };
    let gone = cancel.drop_guard();
    let answered = tokio::spawn(run).await;
    gone.disarm();
    let error = match answered {
        // As the MCP server guards every handler: no task for a client that cannot take one.
        Ok(Ok(CallToolResponse::Task(_))) if !tasks => {
            ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            )
        }
        Ok(Ok(result)) => {
            let message = JsonRpc::Result {
                id: &id,
                result: ServerResult::from(result),
            };
            return json_response(StatusCode::OK, &message);
        }
        Ok(Err(error)) => error,
        Err(e) => ErrorData::internal_error(format!("the call stopped: {e}"), None),
    };
    json_response(
        status_of(error.code),
        &JsonRpc::Error::<()> { id: &id, error },
    )
}

/// A JSON-RPC answer.
#[derive(Serialize)]
#[serde(untagged)]
enum JsonRpc<'a, T> {
    Result { id: &'a RequestId, result: T },
    Error { id: &'a RequestId, error: ErrorData },
}

/// The HTTP status of a JSON-RPC error on a stateless request, as the MCP server gives it.
fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn json_response<T: Serialize>(status: StatusCode, message: &JsonRpc<'_, T>) -> Response {
    #[derive(Serialize)]
    struct Versioned<'a, T: Serialize> {
        jsonrpc: &'static str,
        #[serde(flatten)]
        message: &'a JsonRpc<'a, T>,
    }
    let versioned = Versioned {
        jsonrpc: "2.0",
        message,
    };
    let body = serde_json::to_vec(&versioned).unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
}
