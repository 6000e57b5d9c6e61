//! The edge of UndoLog's HTTP server: the server loop (a deadline for each request's headers,
//! a graceful drain), the refusal of a request framed two ways, and the guard against cross-site
//! and DNS-rebinding requests.
//!
//! It holds what every HTTP request meets before any route: it knows HTTP and the `[http]`
//! settings, and nothing of MCP, the engine or credentials.

pub mod framing;
pub mod origin_guard;
pub mod server;
