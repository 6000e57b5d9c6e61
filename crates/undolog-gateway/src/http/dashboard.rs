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

/// Every file the dashboard is: its path, its type, its text.
const FILES: [(&str, &str, &str); 5] = [
    (
        "/",
        "text/html; charset=utf-8",
        include_str!("dashboard/index.html"),
    ),
    (
        "/assets/app.css",
        "text/css; charset=utf-8",
        include_str!("dashboard/app.css"),
    ),
    (
        "/assets/app.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/app.js"),
    ),
    (
        "/assets/fleet.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/fleet.js"),
    ),
    (
        "/assets/link.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/link.js"),
    ),
];

/// `/`, the stylesheet and the scripts under `/assets/`.
pub(super) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    FILES
        .into_iter()
        .fold(Router::new(), |router, (path, content_type, body)| {
            router.route(path, get(move || async move { asset(content_type, body) }))
        })
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
