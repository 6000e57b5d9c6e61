//! The HTTP surface: MCP at `/mcp`, the REST tool call, the admin and SDK APIs under `/v1`, and
//! `GET /events`, and the dashboard at `/`. Every route but `/healthz`, `/v1/auth` and the
//! dashboard's page and assets (which hold no data) needs credentials (see [`crate::auth`]).

mod admin;
mod body;
mod dashboard;
mod events;
mod parse_guard;
mod rest;
mod sdk;
mod undo_steps;

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::DefaultBodyLimit,
    middleware,
    routing::{get, post},
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio_util::sync::CancellationToken;

use crate::{Gateway, auth, config::HttpSettings, mcp::McpFront};

pub(crate) use body::{JsonBody, parse as parse_body};
pub(crate) use parse_guard::check as check_mcp_body;

/// Origins of pages served from this machine: what a browser on a loopback-bound gateway's own
/// machine may send (any port).
const LOOPBACK_ORIGINS: &[&str] = &[
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// DNS-rebinding protection for `/mcp`: a page on some other site whose name resolves to
/// 127.0.0.1 reaches a loopback-bound gateway with its own `Host` and `Origin`, which are refused
/// (403). Bound beyond loopback (which needs API keys) the names are the operator's, unchecked
/// unless configured. `[http] allowed_hosts` / `allowed_origins` replace either default.
fn rebinding_protection(
    config: StreamableHttpServerConfig,
    http: &HttpSettings,
    addr: SocketAddr,
) -> StreamableHttpServerConfig {
    let loopback = addr.ip().is_loopback();
    let config = match &http.allowed_hosts {
        Some(hosts) if hosts.is_empty() => config.disable_allowed_hosts(),
        Some(hosts) => config.with_allowed_hosts(hosts.clone()),
        // rmcp's default list is the loopback names.
        None if loopback => config,
        None => config.disable_allowed_hosts(),
    };
    match &http.allowed_origins {
        Some(origins) if origins.is_empty() => config.disable_allowed_origins(),
        Some(origins) => config.with_allowed_origins(origins.clone()),
        None if loopback => config.with_allowed_origins(LOOPBACK_ORIGINS.iter().copied()),
        None => config.disable_allowed_origins(),
    }
}

pub(crate) fn router(gateway: Arc<Gateway>, addr: SocketAddr, cancel: CancellationToken) -> Router {
    let limits = &gateway.config.limits;
    let mcp_config = rebinding_protection(
        StreamableHttpServerConfig::default()
            .with_cancellation_token(cancel)
            .with_max_request_body_bytes(limits.max_body_bytes),
        &gateway.config.http,
        addr,
    );
    let factory_gateway = gateway.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(McpFront::http(factory_gateway.clone())),
        LocalSessionManager::default().into(),
        mcp_config,
    );
    let mcp = Router::new()
        .route_service("/mcp", mcp)
        .route_layer(middleware::from_fn_with_state(
            limits.max_body_bytes,
            parse_guard::reject_unparsable,
        ));
    let authenticated = Router::new()
        .merge(mcp)
        .route("/mcp/tool_call", post(rest::tool_call))
        .route("/v1/sessions", get(admin::sessions))
        .route("/v1/sessions/{id}/effects", get(admin::session_effects))
        .route("/v1/sessions/{id}/undo", post(admin::undo))
        .route("/v1/sessions/{id}/undo/begin", post(undo_steps::begin))
        .route(
            "/v1/sessions/{id}/undo/steps/{effect_id}",
            post(undo_steps::step),
        )
        .route("/v1/approvals", get(admin::approvals))
        .route("/v1/approvals/{id}", get(admin::approval))
        .route("/v1/approvals/{id}/approve", post(admin::approve))
        .route("/v1/approvals/{id}/deny", post(admin::deny))
        .route("/v1/effects", post(sdk::intercept))
        .route("/v1/effects/in_doubt", get(admin::in_doubt))
        .route("/v1/effects/{id}", get(admin::effect))
        .route("/v1/effects/{id}/commit", post(sdk::commit))
        .route("/v1/effects/{id}/fail", post(sdk::fail))
        .route("/v1/effects/{id}/resolve", post(admin::resolve))
        .route("/events", get(events::stream))
        .route("/v1/whoami", get(auth::whoami))
        .route_layer(middleware::from_fn_with_state(
            gateway.clone(),
            auth::require_principal,
        ));
    Router::new()
        .merge(authenticated)
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/auth", get(auth::mode))
        .merge(dashboard::routes())
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .with_state(gateway)
}
