//! MCP interceptors (SEP-2624) as first-class primitives: the descriptor and the wire types of
//! `interceptors/list` and `interceptor/invoke`, event matching with `*` and globs, config checked
//! against each interceptor's `configSchema`, the chain executor (validators in parallel, mutators
//! in sequence, audit and fail-open, per-interceptor and whole-chain timeouts), interceptor servers
//! on rmcp, remote interceptor clients over stdio and Streamable HTTP, and built-in interceptors.
//!
//! **Invariant:** this crate knows nothing of the effect log. It decides what happens to one
//! message; recording, replaying and approving are the gateway's and the engine's business.

pub mod builtin;
pub mod chain;
pub mod config;
pub mod descriptor;
pub mod error;
pub mod event;
pub mod interceptor;
pub mod registry;
pub mod remote;
pub mod server;
pub mod wire;

pub use chain::{Chain, ChainExecutionResult, ChainRequest, ChainStatus, Member};
pub use descriptor::{Descriptor, Hook, InterceptorType, Mode, Phase, PriorityHint};
pub use error::Error;
pub use event::{Direction, event_matches};
pub use interceptor::{Interceptor, Invocation};
pub use registry::Registry;
pub use remote::{InterceptorClient, RemoteInterceptor};
pub use server::InterceptorServer;
pub use wire::{InvocationContext, InvokeParams, InvokeResult, ListParams, ListResult, Outcome};
