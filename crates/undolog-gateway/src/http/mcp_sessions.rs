//! Who may use a 2025-11-25 MCP session, and which of its request ids are taken.
//!
//! An `Mcp-Session-Id` is bound to the principal whose `initialize` opened it: a request of any
//! other principal that names it is answered as if the session did not exist, so another key (of
//! any org) can neither use nor end it. Within a session, a request whose JSON-RPC id is still
//! in flight is answered at once with an error: the transport would otherwise route the first
//! request's answer to the second and leave the first unanswered.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};

use axum::{
    Json,
    body::Body,
    extract::{Request, State},
    http::{Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::{
    SessionManager, local::LocalSessionManager,
};
use serde_json::{Value, json};

use crate::Principal;

const SESSION_HEADER: &str = "mcp-session-id";

/// Above this many sessions remembered, those the transport has closed are forgotten.
const PRUNE_ABOVE: usize = 1024;

/// The owner and the ids in flight of every MCP session opened through this gateway.
#[derive(Debug)]
pub(crate) struct McpSessions {
    manager: Arc<LocalSessionManager>,
    sessions: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug)]
struct Entry {
    owner: Principal,
    /// JSON-RPC ids of requests not yet answered, as canonical JSON text.
    in_flight: HashSet<String>,
}

impl McpSessions {
    pub(crate) fn new(manager: Arc<LocalSessionManager>) -> Arc<McpSessions> {
        Arc::new(McpSessions {
            manager,
            sessions: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a session `owner` just opened; forgets closed ones when there are many.
    async fn opened(&self, id: String, owner: Principal) {
        let known: Vec<String> = {
            let mut sessions = self.lock();
            sessions.insert(
                id,
                Entry {
                    owner,
                    in_flight: HashSet::new(),
                },
            );
            if sessions.len() <= PRUNE_ABOVE {
                return;
            }
            sessions.keys().cloned().collect()
        };
        let mut closed = Vec::new();
        for id in known {
            if !self
                .manager
                .has_session(&id.as_str().into())
                .await
                .unwrap_or(true)
            {
                closed.push(id);
            }
        }
        let mut sessions = self.lock();
        for id in closed {
            sessions.remove(&id);
        }
    }

    /// Takes `request_id` in session `id`; `false` when a request with that id is in flight.
    fn take(&self, id: &str, request_id: &str) -> bool {
        self.lock()
            .get_mut(id)
            .is_none_or(|entry| entry.in_flight.insert(request_id.to_owned()))
    }

    fn release(&self, id: &str, request_id: &str) {
        if let Some(entry) = self.lock().get_mut(id) {
            entry.in_flight.remove(request_id);
        }
    }
}

/// Axum middleware on `/mcp`, inside authentication (the principal is known) and outside the
/// parse guard (the body is already read into memory).
pub(crate) async fn bind_to_principal(
    State(sessions): State<Arc<McpSessions>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(principal) = request.extensions().get::<Principal>().cloned() else {
        return next.run(request).await;
    };
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some(session) = session else {
        // No session yet: an `initialize` opens one, which is then this principal's.
        let response = next.run(request).await;
        let opened = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok());
        if let (true, Some(id)) = (response.status().is_success(), opened) {
            sessions.opened(id.to_owned(), principal).await;
        }
        return response;
    };
    let owner = sessions.lock().get(&session).map(|e| e.owner.clone());
    if owner.is_some_and(|owner| owner != principal) {
        tracing::warn!(principal = %principal.actor(), "refused a request naming another principal's MCP session");
        return not_this_session();
    }
    let method = request.method().clone();
    let (request, request_id) = match method {
        Method::POST => request_id(request).await,
        _ => (request, None),
    };
    if let Some(id) = &request_id
        && !sessions.take(&session, id)
    {
        return duplicate_id(id);
    }
    let response = next.run(request).await;
    if method == Method::DELETE && response.status().is_success() {
        sessions.lock().remove(&session);
    }
    match request_id {
        // The id is free again once the answer has gone out (or the client has gone away).
        Some(id) => {
            let release = Release {
                sessions,
                session,
                id,
            };
            let (parts, body) = response.into_parts();
            let body = body.into_data_stream().map(move |chunk| {
                let _held = &release;
                chunk
            });
            Response::from_parts(parts, Body::from_stream(body))
        }
        None => response,
    }
}

/// The body again, and the JSON-RPC id when it is one request (a notification or a response
/// has none; the parse guard has refused anything that is not JSON).
async fn request_id(request: Request) -> (Request, Option<String>) {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let id = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|message| {
            let id = message.get("id")?;
            message.get("method")?;
            Some(id.to_string())
        });
    (Request::from_parts(parts, Body::from(bytes)), id)
}

/// Frees a request id when the answer's body is done with.
struct Release {
    sessions: Arc<McpSessions>,
    session: String,
    id: String,
}

impl Drop for Release {
    fn drop(&mut self) {
        self.sessions.release(&self.session, &self.id);
    }
}

fn not_this_session() -> Response {
    let error = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32001,
            "message": "Session not found: no MCP session with this id is open for these \
                        credentials; initialize a new session",
        },
    });
    (StatusCode::NOT_FOUND, Json(error)).into_response()
}

fn duplicate_id(id: &str) -> Response {
    let id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
    let error = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32600,
            "message": format!(
                "Invalid Request: a request with id {id} is still in flight in this session; \
                 give every request of a session its own id"
            ),
        },
    });
    (StatusCode::BAD_REQUEST, Json(error)).into_response()
}
