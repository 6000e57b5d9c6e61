//! What the layer above plugs into the upstream layer: it runs what an upstream sends to a client
//! through a chain it does not know ([`RelayChain`]), and serves in-process upstreams it does not
//! hold ([`InProcess`]).

use std::{fmt::Debug, future::Future, pin::Pin};

use rmcp::ErrorData;
use serde_json::Value;
use tokio::io::DuplexStream;
use undolog_interceptors::Phase;

/// A future a hook answers with.
pub type Answer<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What every relayed message (a server-to-client request, and its answer) passes through: the
/// gateway's interceptor chain.
pub trait RelayChain: Send + Sync + Debug {
    /// `payload` as the chain lets it through (changed or not), or the JSON-RPC error that goes
    /// back to the upstream instead.
    fn relayed<'a>(
        &'a self,
        event: &'a str,
        phase: Phase,
        payload: Value,
    ) -> Answer<'a, Result<Value, ErrorData>>;
}

/// An upstream served inside this process (`transport = "demo"`): the layer hands it one end of
/// a pipe for each connection, and speaks MCP to it over the other.
pub trait InProcess: Send + Sync + Debug {
    /// Serves one connection on `io` until it closes (spawning what it needs).
    fn serve(&self, io: DuplexStream);
}
