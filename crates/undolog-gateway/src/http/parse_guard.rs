//! JSON-RPC's parse error for bodies that are not JSON at all: HTTP 400 with code −32700, as the
//! spec names it, before the MCP transport sees the request (it would answer 415). The body is
//! read here within `limits.body_timeout_secs`, so a client that sends it slowly is cut off.

use std::time::Duration;

use axum::{
    Json,
    body::Body,
    extract::{Request, State},
    http::{Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde_json::json;

pub(crate) async fn reject_unparsable(
    State((limit, timeout)): State<(usize, Duration)>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            // The rest of the body is not read: the connection ends with this answer.
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                [(header::CONNECTION, "close")],
                Json(json!({"error": format!("the body is over {limit} bytes; send less or raise limits.max_body_bytes")})),
            )
                .into_response();
        }
        Err(_) => return super::body::too_slow(timeout).into_response(),
    };
    if let Err(e) = check(&bytes) {
        let error = json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32700, "message": format!("Parse error: the body is not JSON ({e})")}
        });
        return (StatusCode::BAD_REQUEST, Json(error)).into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Whether a POST body is JSON text at all: the grammar only (numbers and escapes are skipped,
/// not read; nesting has no limit).
pub(crate) fn check(bytes: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map(|_| ())
}
