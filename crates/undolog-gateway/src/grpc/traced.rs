//! The engine's server spans: each gRPC request runs in a span named by its method, under the
//! trace its `traceparent` metadata names (a gateway's request to its engine), so the engine's
//! store spans hang under the gateway's call. Without `[traces]`, requests pass untouched.

use std::{
    future::Future,
    sync::Arc,
    task::{Context, Poll},
};

use futures::future::{BoxFuture, Either};
use opentelemetry::{context::FutureExt as _, trace::TraceContextExt as _};
use tonic::server::NamedService;
use tower_service::Service;

use crate::Gateway;

/// `inner`, each request of which runs in its own server span.
#[derive(Debug, Clone)]
pub(super) struct Traced<S> {
    pub(super) inner: S,
    pub(super) gateway: Arc<Gateway>,
}

impl<S: NamedService> NamedService for Traced<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for Traced<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Either<S::Future, BoxFuture<'static, Result<S::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let traces = &self.gateway.traces;
        let span = traces.engine_request(request.uri().path(), request.headers());
        let answer = self.inner.call(request);
        match span {
            None => Either::Left(answer),
            Some(cx) => Either::Right(Box::pin(spanned(cx, answer))),
        }
    }
}

/// `answer` in `span`, the server span of the request it answers (an operation of `Calls`,
/// which is answered as that request), if spans are exported.
pub(super) fn within<F: Future>(
    span: Option<opentelemetry::Context>,
    answer: F,
) -> Either<F, impl Future<Output = F::Output>> {
    match span {
        None => Either::Left(answer),
        Some(cx) => Either::Right(spanned(cx, answer)),
    }
}

async fn spanned<F: Future>(cx: opentelemetry::Context, answer: F) -> F::Output {
    let answer = answer.with_context(cx.clone()).await;
    cx.span().end();
    answer
}
