//! The dashboard: one page, a stylesheet and three scripts, embedded in the binary (nothing is
//! fetched from elsewhere at run time). Served without credentials because the files hold no
//! data: the page calls the authenticated admin API and `GET /events` with the key a person gives
//! it.

use axum::{
    Router,
    http::header,
    response::{IntoResponse, Response},
    routing::get,
};

const INDEX: &str = include_str!("dashboard/index.html");
const STYLE: &str = include_str!("dashboard/app.css");
const SCRIPT: &str = include_str!("dashboard/app.js");
const FLEET_SCRIPT: &str = include_str!("dashboard/fleet.js");
const LINK_SCRIPT: &str = include_str!("dashboard/link.js");

/// `/`, `/assets/app.css`, and the scripts `/assets/app.js`, `fleet.js` and `link.js`.
pub(super) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/assets/app.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .route(
            "/assets/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/assets/fleet.js",
            get(|| async { asset("text/javascript; charset=utf-8", FLEET_SCRIPT) }),
        )
        .route(
            "/assets/link.js",
            get(|| async { asset("text/javascript; charset=utf-8", LINK_SCRIPT) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; connect-src 'self'; img-src 'self' data:; \
                 frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
            ),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}
