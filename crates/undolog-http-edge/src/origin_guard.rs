//! What every route refuses before anything else runs: requests a web page could make in the
//! operator's browser, and request framing a proxy could read differently.
//!
//! - **DNS rebinding**: a page on some other site whose name resolves to 127.0.0.1 reaches a
//!   loopback-bound gateway with its own `Host`. On loopback only loopback names are accepted
//!   (`[http] allowed_hosts` replaces the list; beyond loopback any `Host` is, unless configured).
//! - **Cross-site requests**: a browser names the page that sent a request in `Origin`. On
//!   loopback only pages of this machine may call (`[http] allowed_origins` replaces the list);
//!   beyond loopback only the gateway's own origin (the dashboard). `Sec-Fetch-Site: cross-site`
//!   is refused too, but for following a link to a page.
//! - **Simple requests**: a cross-site HTML form can POST `text/plain`, urlencoded or multipart
//!   bodies without asking first; every state-changing request must be `application/json`.
//! - **Oversized bodies** are refused from their `Content-Length`, before they reach a handler.
//!
//! A refused request's body is read and dropped first, as far as it arrives at once (up to
//! [`DRAIN_BYTES`], for at most [`DRAIN_TIME`], while no more than [`DRAIN_IDLE`] passes between
//! two pieces), and the answer says `Connection: close`: closing a socket that still holds unread
//! bytes sends a reset, which discards the answer on its way and breaks the client's write, and a
//! client that reused the connection would lose its next request. A client that sends nothing
//! after its headers is answered within [`DRAIN_IDLE`].

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Json,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use futures::StreamExt;
use serde_json::json;

use undolog_config::HttpSettings;

/// How much of a refused request's body is read before answering; a longer one is not read.
pub const DRAIN_BYTES: u64 = 8 << 20;

/// How long a refused request's body may take to arrive before the answer goes anyway.
pub const DRAIN_TIME: Duration = Duration::from_secs(2);

/// How long the drain waits for the next piece of a refused body.
pub const DRAIN_IDLE: Duration = Duration::from_millis(100);

/// Names a loopback-bound gateway answers to, on any port.
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

/// Origins of pages served from this machine, on any port.
const LOOPBACK_ORIGINS: &[&str] = &[
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// The rules, computed once from the configuration and the listen address.
#[derive(Debug, Clone)]
pub struct OriginGuard {
    hosts: Allowed,
    origins: Origins,
    max_body_bytes: usize,
}

#[derive(Debug, Clone)]
enum Allowed {
    Any,
    /// `host` (any port) or `host:port` entries, lowercase.
    These(Vec<String>),
}

#[derive(Debug, Clone)]
enum Origins {
    Any,
    /// `scheme://host[:port]` entries, `:*` for any port, lowercase.
    These(Vec<String>),
    /// Only the origin whose authority is the request's own `Host`.
    SameOrigin,
}

impl OriginGuard {
    pub fn new(http: &HttpSettings, addr: SocketAddr, max_body_bytes: usize) -> Self {
        let loopback = addr.ip().is_loopback();
        let lower = |list: &[String]| list.iter().map(|s| s.to_ascii_lowercase()).collect();
        let hosts = match &http.allowed_hosts {
            Some(list) if list.is_empty() => Allowed::Any,
            Some(list) => Allowed::These(lower(list)),
            None if loopback => {
                Allowed::These(LOOPBACK_HOSTS.iter().map(|h| (*h).into()).collect())
            }
            None => Allowed::Any,
        };
        let origins = match &http.allowed_origins {
            Some(list) if list.is_empty() => Origins::Any,
            Some(list) => Origins::These(lower(list)),
            None if loopback => {
                Origins::These(LOOPBACK_ORIGINS.iter().map(|o| (*o).into()).collect())
            }
            None => Origins::SameOrigin,
        };
        OriginGuard {
            hosts,
            origins,
            max_body_bytes,
        }
    }

    /// Why this request is refused, if it is: the status and a message that says what to do.
    fn refusal(&self, method: &Method, headers: &HeaderMap) -> Option<(StatusCode, String)> {
        let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let host = text(header::HOST).unwrap_or_default().to_ascii_lowercase();
        if !self.host_allowed(&host) {
            return Some((
                StatusCode::FORBIDDEN,
                format!(
                    "Host {host:?} is not one this gateway answers to (DNS-rebinding protection); \
                     use a loopback name, or list the name in [http] allowed_hosts"
                ),
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("?").to_ascii_lowercase();
            if !self.origin_allowed(&origin, &host) {
                return Some((
                    StatusCode::FORBIDDEN,
                    format!(
                        "requests from pages of {origin:?} are refused (cross-site protection); \
                         list the origin in [http] allowed_origins to let that page call"
                    ),
                ));
            }
        }
        let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
        let navigation = *method == Method::GET
            && headers.get("sec-fetch-mode").and_then(|v| v.to_str().ok()) == Some("navigate");
        if site == Some("cross-site") && !navigation && !matches!(self.origins, Origins::Any) {
            return Some((
                StatusCode::FORBIDDEN,
                "cross-site requests are refused; call the gateway from its own pages or a \
                 program, or list the calling origin in [http] allowed_origins"
                    .into(),
            ));
        }
        if headers.contains_key(header::CONTENT_LENGTH)
            && headers.contains_key(header::TRANSFER_ENCODING)
        {
            return Some((
                StatusCode::BAD_REQUEST,
                "a request may not carry both Content-Length and Transfer-Encoding; send one"
                    .into(),
            ));
        }
        let length = text(header::CONTENT_LENGTH).and_then(|v| v.trim().parse::<u64>().ok());
        if length.is_some_and(|n| n > self.max_body_bytes as u64) {
            return Some((
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the body is over {} bytes; send less or raise limits.max_body_bytes",
                    self.max_body_bytes
                ),
            ));
        }
        let changes_state = matches!(*method, Method::POST | Method::PUT | Method::PATCH);
        if changes_state && !is_json(text(header::CONTENT_TYPE)) {
            return Some((
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send the body as JSON with `Content-Type: application/json` (`{}` when there is \
                 nothing to say); other types are refused because any web page can send them"
                    .into(),
            ));
        }
        None
    }

    fn host_allowed(&self, host: &str) -> bool {
        let Allowed::These(list) = &self.hosts else {
            return true;
        };
        let name = strip_port(host);
        list.iter()
            .any(|entry| entry == host || (strip_port(entry) == entry && entry == name))
    }

    fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        match &self.origins {
            Origins::Any => true,
            Origins::SameOrigin => origin
                .split_once("://")
                .is_some_and(|(_, authority)| authority == host),
            Origins::These(list) => list.iter().any(|entry| match entry.strip_suffix(":*") {
                Some(base) => {
                    origin == base
                        || origin
                            .strip_prefix(base)
                            .and_then(|rest| rest.strip_prefix(':'))
                            .is_some_and(|port| {
                                !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
                            })
                }
                None => origin == entry,
            }),
        }
    }
}

/// `host` without a `:port` (IPv6 literals keep their brackets).
fn strip_port(host: &str) -> &str {
    match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host,
    }
}

/// Whether a `Content-Type` names JSON (`application/json`, with parameters or not).
fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|t| {
        t.split(';')
            .next()
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// Axum middleware: refuses what [`OriginGuard`] refuses, as `{"error", "code"}`.
pub async fn refuse_foreign(
    State(guard): State<Arc<OriginGuard>>,
    request: Request,
    next: Next,
) -> Response {
    match guard.refusal(request.method(), request.headers()) {
        None => next.run(request).await,
        Some((status, message)) => {
            let code = match status {
                StatusCode::FORBIDDEN => "cross_site_refused",
                StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
                StatusCode::UNSUPPORTED_MEDIA_TYPE => "json_required",
                _ => "bad_request_framing",
            };
            tracing::debug!(%status, %message, "request refused before routing");
            drain(request).await;
            let mut answer =
                (status, Json(json!({"error": message, "code": code}))).into_response();
            answer.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            answer
        }
    }
}

/// Reads and drops a refused request's body, unless it says it is longer than [`DRAIN_BYTES`].
async fn drain(request: Request) {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > DRAIN_BYTES) {
        return;
    }
    let mut chunks = Body::into_data_stream(request.into_body());
    let read_all = async {
        let mut read = 0u64;
        while let Ok(Some(Ok(chunk))) = tokio::time::timeout(DRAIN_IDLE, chunks.next()).await {
            read += chunk.len() as u64;
            if read > DRAIN_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, read_all).await;
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderValue, Method};

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            let name = header::HeaderName::from_bytes(name.as_bytes()).unwrap();
            map.insert(name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn guard(hosts: Option<&[&str]>, origins: Option<&[&str]>, addr: &str) -> OriginGuard {
        let list = |l: Option<&[&str]>| l.map(|l| l.iter().map(|s| (*s).to_owned()).collect());
        let http = HttpSettings {
            allowed_hosts: list(hosts),
            allowed_origins: list(origins),
        };
        OriginGuard::new(&http, addr.parse().unwrap(), 1000)
    }

    /// (what, the rules, method, headers, the status refused with or `None`).
    type Case<'a> = (
        &'a str,
        &'a OriginGuard,
        Method,
        Vec<(&'a str, &'a str)>,
        Option<u16>,
    );

    #[test]
    fn what_each_setup_refuses() {
        let loopback = guard(None, None, "127.0.0.1:8080");
        let public = guard(None, None, "0.0.0.0:8080");
        let listed = guard(
            Some(&["gw.test", "api.test:9000"]),
            Some(&["https://app.test", "http://dev.test:*"]),
            "0.0.0.0:8080",
        );
        let json = ("content-type", "application/json");
        let cases: Vec<Case<'_>> = vec![
            (
                "loopback, a program",
                &loopback,
                Method::POST,
                vec![("host", "127.0.0.1:8080"), json],
                None,
            ),
            (
                "loopback name",
                &loopback,
                Method::GET,
                vec![("host", "localhost:8080")],
                None,
            ),
            (
                "IPv6 loopback",
                &loopback,
                Method::GET,
                vec![("host", "[::1]:8080")],
                None,
            ),
            (
                "rebinding Host",
                &loopback,
                Method::GET,
                vec![("host", "evil.example:8080")],
                Some(403),
            ),
            ("no Host at all", &loopback, Method::GET, vec![], Some(403)),
            (
                "a local page",
                &loopback,
                Method::POST,
                vec![
                    ("host", "localhost:8080"),
                    ("origin", "http://localhost:3000"),
                    json,
                ],
                None,
            ),
            (
                "a foreign page",
                &loopback,
                Method::POST,
                vec![
                    ("host", "localhost:8080"),
                    ("origin", "https://evil.example"),
                    json,
                ],
                Some(403),
            ),
            (
                "a sandboxed page",
                &loopback,
                Method::GET,
                vec![("host", "localhost:8080"), ("origin", "null")],
                Some(403),
            ),
            (
                "a port that is not one",
                &loopback,
                Method::GET,
                vec![
                    ("host", "localhost:8080"),
                    ("origin", "http://localhost:80x"),
                ],
                Some(403),
            ),
            (
                "a form POST",
                &loopback,
                Method::POST,
                vec![("host", "localhost:8080"), ("content-type", "text/plain")],
                Some(415),
            ),
            (
                "an urlencoded POST",
                &loopback,
                Method::POST,
                vec![
                    ("host", "localhost:8080"),
                    ("content-type", "application/x-www-form-urlencoded"),
                ],
                Some(415),
            ),
            (
                "a POST with no type",
                &loopback,
                Method::POST,
                vec![("host", "localhost:8080")],
                Some(415),
            ),
            (
                "JSON with a charset",
                &loopback,
                Method::POST,
                vec![
                    ("host", "localhost:8080"),
                    ("content-type", "application/json; charset=utf-8"),
                ],
                None,
            ),
            (
                "a DELETE needs no body",
                &loopback,
                Method::DELETE,
                vec![("host", "localhost:8080")],
                None,
            ),
            (
                "cross-site fetch",
                &loopback,
                Method::GET,
                vec![
                    ("host", "localhost:8080"),
                    ("sec-fetch-site", "cross-site"),
                    ("sec-fetch-mode", "cors"),
                ],
                Some(403),
            ),
            (
                "following a link",
                &loopback,
                Method::GET,
                vec![
                    ("host", "localhost:8080"),
                    ("sec-fetch-site", "cross-site"),
                    ("sec-fetch-mode", "navigate"),
                ],
                None,
            ),
            (
                "too long, from its length",
                &loopback,
                Method::POST,
                vec![("host", "localhost:8080"), json, ("content-length", "1001")],
                Some(413),
            ),
            (
                "both framings",
                &loopback,
                Method::POST,
                vec![
                    ("host", "localhost:8080"),
                    json,
                    ("content-length", "5"),
                    ("transfer-encoding", "chunked"),
                ],
                Some(400),
            ),
            (
                "public, any Host",
                &public,
                Method::GET,
                vec![("host", "gw.example.com")],
                None,
            ),
            (
                "public, its own page",
                &public,
                Method::POST,
                vec![
                    ("host", "gw.example.com"),
                    ("origin", "https://gw.example.com"),
                    json,
                ],
                None,
            ),
            (
                "public, another page",
                &public,
                Method::POST,
                vec![
                    ("host", "gw.example.com"),
                    ("origin", "https://evil.example"),
                    json,
                ],
                Some(403),
            ),
            (
                "listed host, any port",
                &listed,
                Method::GET,
                vec![("host", "gw.test:1234")],
                None,
            ),
            (
                "listed host:port",
                &listed,
                Method::GET,
                vec![("host", "api.test:9000")],
                None,
            ),
            (
                "listed host, other port",
                &listed,
                Method::GET,
                vec![("host", "api.test:9001")],
                Some(403),
            ),
            (
                "listed origin",
                &listed,
                Method::GET,
                vec![("host", "gw.test"), ("origin", "https://app.test")],
                None,
            ),
            (
                "listed origin, any port",
                &listed,
                Method::GET,
                vec![("host", "gw.test"), ("origin", "http://dev.test:5173")],
                None,
            ),
            (
                "origin not listed",
                &listed,
                Method::GET,
                vec![
                    ("host", "gw.test"),
                    ("origin", "https://app.test.evil.example"),
                ],
                Some(403),
            ),
        ];
        for (what, guard, method, pairs, want) in &cases {
            let got = guard
                .refusal(method, &headers(pairs))
                .map(|(s, _)| s.as_u16());
            assert_eq!(got, *want, "{what}");
        }
    }
}
