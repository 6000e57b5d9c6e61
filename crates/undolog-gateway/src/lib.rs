//! The MCP gateway: agents connect to it as their MCP server (Streamable HTTP at `/mcp`, or
//! stdio), and it connects to the real MCP tool servers. Every `tools/call` goes through the
//! engine — recorded, replayed, held for approval, undoable — and everything else is forwarded.
//! Beside MCP it serves the seed's REST tool call, the SDK's effect API, the admin API and a
//! stream of typed events.
//!
//! It holds the call path and the surfaces that reach it; the settings, credentials,
//! notifications, upstream connections, traces and the HTTP server's edge are crates below it.
//! Invariant: the gateway knows MCP and HTTP, never SQL; the engine knows neither.

mod app;
mod auth;
mod calls;
mod compensate;
mod engine_link;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod grpc;
mod http;
mod interceptors;
mod mcp;
mod metrics;
mod overview;
mod policy;
mod results;
mod runs;
mod sign_in;
mod tasks;

// The crates below it, under the names its modules use.
pub use undolog_config as config;
use undolog_demo as demo;
use undolog_identity::oauth;
use undolog_notify as notify;
use undolog_traces as traces;
use undolog_upstream as upstream;

pub use app::{Gateway, serve_http, serve_stdio};
pub use config::{ConfigSource, GatewayConfig};
pub use demo::DemoBank;
pub use error::Error;
pub use grpc::serve_engine;
pub use undolog_identity::{Credential, NewKey, Principal, create_key};
pub use upstream::UpstreamStatus;
