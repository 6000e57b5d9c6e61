//! The HTTP/1.1 server loop: one task per connection, `TCP_NODELAY` on every socket, a deadline
//! for each request's headers (a client that trickles them in is cut off, not waited for), a
//! refusal of requests framed two ways ([`framing`]), and a graceful shutdown that lets requests
//! in progress finish for a few seconds.

use std::{future::Future, pin::pin, time::Duration};

use axum::{
    Json, Router,
    body::Body,
    http::{Request, StatusCode},
    response::{IntoResponse, Response},
};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
};
use tokio::net::TcpListener;
use tower_service::Service;

use crate::framing;

/// How long requests in progress may go on once shutdown begins.
const DRAIN: Duration = Duration::from_secs(5);

pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let (tcp, framed_twice) = framing::Inspected::new(tcp);
        let router = router.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            let refuse = framing::framed_twice(&framed_twice);
            let mut router = router.clone();
            async move {
                if refuse {
                    return Ok(two_framings());
                }
                router.call(request.map(Body::new)).await
            }
        });
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(tcp), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN) => {
            tracing::info!("stopping with requests still open after {DRAIN:?}");
        }
    }
}

/// The answer to a request with both `Content-Length` and `Transfer-Encoding`.
fn two_framings() -> Response {
    let body = serde_json::json!({
        "error": "a request may not carry both Content-Length and Transfer-Encoding; send one",
        "code": "bad_request_framing",
    });
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}
