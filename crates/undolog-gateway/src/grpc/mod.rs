//! The engine over gRPC (`undolog.engine.v1.EffectEngine`), the seed's boundary: a proxy in any
//! language asks this process for every decision. See `proto/undolog/engine/v1/engine.proto`.

/// The generated messages, server and client.
#[allow(unreachable_pub, missing_debug_implementations, clippy::all)]
pub mod proto {
    tonic::include_proto!("undolog.engine.v1");
}

mod call_stream;
mod calls;
pub(crate) mod client;
mod convert;
mod refusal;
mod service;
mod status;
mod traced;

use std::{future::Future, sync::Arc};

use tokio::net::TcpListener;
use tokio_stream::{StreamExt as _, wrappers::TcpListenerStream};

use crate::{Error, Gateway};

/// Serves `EffectEngine` on `listener` until `shutdown` completes: the engine alone, on the
/// gateway's store, as this process's executor (its heartbeat keeps the leases of the calls it
/// hands out). Refuses, as the HTTP server does, to listen beyond loopback while no credential
/// could be asked for.
pub async fn serve_engine(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let addr = gateway.start_serving(&listener).await?;
    // The store's and the engine's series live here in a split deployment.
    let cancel = tokio_util::sync::CancellationToken::new();
    if let Some(at) = gateway.config.metrics_listen {
        crate::metrics::listen(gateway.clone(), at, cancel.clone()).await?;
    }
    let stopped = cancel.clone();
    let shutdown = async move {
        shutdown.await;
        stopped.cancel();
    };
    let service = traced::Traced {
        inner: proto::effect_engine_server::EffectEngineServer::new(service::EngineService {
            gateway: gateway.clone(),
            stopping: cancel.clone(),
        }),
        gateway,
    };
    tracing::info!(%addr, "undolog engine listening (gRPC undolog.engine.v1.EffectEngine)");
    // The builder's own `tcp_nodelay` applies only to listeners it binds: set it on each
    // connection, or every answer waits for the client's delayed ACK (about 40 ms a call).
    let incoming = TcpListenerStream::new(listener).map(|accepted| {
        accepted.inspect(|stream| {
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY not set");
            }
        })
    });
    tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|e| Error::Startup(format!("the engine's gRPC server stopped: {e}")))
}
