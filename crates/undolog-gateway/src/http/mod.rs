//! The HTTP surface: MCP at `/mcp`, the REST tool call, the admin and SDK APIs under `/v1`, and
//! `GET /events`, and the dashboard at `/`. Every route but `/healthz`, `/v1/auth` (and the
//! dashboard's sign-in under it), the OAuth protected resource metadata and the dashboard's page
//! and assets (which hold no data) needs credentials (see [`crate::auth`]), and
//! every route, those included, refuses cross-site and DNS-rebinding requests first
//! ([`origin_guard`]).

pub(crate) mod admin;
mod body;
mod catalog;
mod dashboard;
pub(crate) mod events;
pub(crate) mod health;
pub(crate) mod links;
mod mcp_sessions;
mod overview;
mod parse_guard;
mod rest;
pub(crate) mod sdk;
pub(crate) mod stateless;
pub(crate) mod undo_steps;

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
use tower::ServiceBuilder;

use undolog_http_edge::origin_guard;

use crate::{Gateway, auth, mcp::McpFront};

pub(crate) use body::{JsonBody, parse as parse_body};
pub(crate) use parse_guard::check as check_mcp_body;

pub(crate) fn router(gateway: Arc<Gateway>, addr: SocketAddr, cancel: CancellationToken) -> Router {
    let limits = &gateway.config.limits;
    // Host and Origin are checked for every route by `origin_guard`, so rmcp's own checks of
    // `/mcp` are off: one rule, one place.
    let mcp_config = StreamableHttpServerConfig::default()
        .with_cancellation_token(cancel)
        .with_max_request_body_bytes(limits.max_body_bytes)
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let guard = Arc::new(origin_guard::OriginGuard::new(
        &gateway.config.http,
        addr,
        limits.max_body_bytes,
    ));
    let factory_gateway = gateway.clone();
    let manager = Arc::new(LocalSessionManager::default());
    let sessions = mcp_sessions::McpSessions::new(manager.clone());
    let mcp = StreamableHttpService::new(
        move || Ok(McpFront::http(factory_gateway.clone())),
        manager,
        mcp_config,
    );
    // The middleware of `/mcp` and of every route are stacks of concrete types, each put
    // together once: a layer added to a router wraps every route in a box of its own, which
    // every request clones again, layer by layer.
    let mcp = ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(
            (limits.max_body_bytes, limits.body_timeout),
            parse_guard::reject_unparsable,
        ))
        .layer(middleware::from_fn_with_state(
            sessions,
            mcp_sessions::bind_to_principal,
        ))
        .layer(middleware::from_fn_with_state(
            gateway.clone(),
            stateless::answer_directly,
        ))
        .service(mcp);
    let authenticated = Router::new()
        .route_service("/mcp", mcp)
        .route("/mcp/tool_call", post(rest::tool_call))
        .route("/v1/sessions", get(admin::sessions))
        .route("/v1/sessions/{id}", get(admin::session))
        .route("/v1/sessions/{id}/effects", get(admin::session_effects))
        .route("/v1/sessions/{id}/export", get(admin::export))
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
        .route("/v1/links/{token}", get(links::view).post(links::decide))
        .route("/v1/notifications", get(links::deliveries))
        .route("/v1/tools", get(catalog::tools))
        .route("/v1/overview", get(overview::overview))
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
    let routes = Router::new()
        .merge(authenticated)
        .route("/healthz", get(health::healthz))
        .route("/v1/auth", get(auth::mode))
        .route("/v1/auth/login", get(crate::sign_in::login))
        .route("/v1/auth/callback", get(crate::sign_in::callback))
        .route("/v1/auth/logout", post(crate::sign_in::logout))
        .route(
            "/.well-known/oauth-protected-resource",
            get(auth::resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*resource}",
            get(auth::resource_metadata),
        )
        .merge(dashboard::routes());
    let max_body_bytes = limits.max_body_bytes;
    let routes = routes.with_state(gateway);
    let guarded = ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(
            guard,
            origin_guard::refuse_foreign,
        ))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .service(routes);
    Router::new().fallback_service(guarded)
}
