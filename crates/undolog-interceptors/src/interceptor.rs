//! The `Interceptor` trait, implemented in-process or by a remote interceptor server.

use std::fmt::Debug;

use async_trait::async_trait;
use serde_json::Value;

use crate::descriptor::{Descriptor, Phase};
use crate::error::Error;
use crate::wire::{InvocationContext, InvokeParams, Outcome};

/// One call of an interceptor.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub event: String,
    pub phase: Phase,
    pub payload: Value,
    /// Already checked against the descriptor's `configSchema`.
    pub config: Option<Value>,
    pub context: Option<InvocationContext>,
}

/// An interceptor: a descriptor plus a handler.
///
/// A handler returns an `Outcome` of its declared type; an `Err` is a crash, which the chain turns
/// into a block unless the interceptor is fail-open or in audit mode.
#[async_trait]
pub trait Interceptor: Send + Sync + Debug {
    /// What `interceptors/list` says about this interceptor.
    fn descriptor(&self) -> &Descriptor;

    /// Run the handler once.
    async fn invoke(&self, invocation: Invocation) -> Result<Outcome, Error>;
}

impl InvokeParams {
    /// The wire request for one invocation of the interceptor `name`.
    pub fn for_invocation(name: &str, invocation: Invocation) -> InvokeParams {
        InvokeParams {
            name: name.to_owned(),
            event: invocation.event,
            phase: invocation.phase,
            payload: invocation.payload,
            config: invocation.config,
            context: invocation.context,
            timeout_ms: None,
        }
    }
}
