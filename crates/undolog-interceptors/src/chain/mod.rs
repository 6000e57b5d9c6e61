//! The chain executor: runs every matching interceptor on one message.
//!
//! Validators run in parallel and all finish before any rejection is reported; mutators run one
//! after another by `priorityHint`, ties broken by name, each on the previous one's output. A
//! message being sent is mutated then validated; a message being received is validated then
//! mutated. Only an active validator with severity `error` blocks; audit interceptors never block
//! and their mutations are recorded, not applied; a failing interceptor blocks unless it is
//! fail-open. Every invocation has its own timeout, and the whole chain has one too.

mod result;
mod run;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use result::{
    AbortedAt, ChainEntry, ChainExecutionResult, ChainStatus, EntryError, ValidationSummary,
};

use crate::config::ConfigSchema;
use crate::descriptor::{Descriptor, Phase};
use crate::error::Error;
use crate::event::Direction;
use crate::interceptor::Interceptor;
use crate::wire::InvocationContext;

/// How long a whole chain run may take by default.
pub const DEFAULT_CHAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// An ordered set of interceptors (local or remote) with their configs and timeouts.
#[derive(Debug, Clone)]
pub struct Chain {
    members: Vec<Member>,
    timeout: Duration,
}

/// One interceptor in a chain.
#[derive(Debug, Clone)]
pub struct Member {
    interceptor: Arc<dyn Interceptor>,
    config: Option<Value>,
    timeout: Option<Duration>,
}

impl Member {
    /// An interceptor with no config and its descriptor's timeout.
    pub fn new(interceptor: Arc<dyn Interceptor>) -> Self {
        Member {
            interceptor,
            config: None,
            timeout: None,
        }
    }

    /// The config passed on every invocation (checked when the member joins a chain).
    pub fn with_config(mut self, config: Value) -> Self {
        self.config = Some(config);
        self
    }

    /// The per-invocation timeout, overriding the descriptor's.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    fn descriptor(&self) -> &Descriptor {
        self.interceptor.descriptor()
    }
}

/// One message to run through a chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainRequest {
    pub event: String,
    pub phase: Phase,
    pub direction: Direction,
    pub payload: Value,
    pub context: Option<InvocationContext>,
}

impl ChainRequest {
    /// A message whose direction follows its phase (requests sent, responses received).
    pub fn new(event: impl Into<String>, phase: Phase, payload: Value) -> Self {
        ChainRequest {
            event: event.into(),
            phase,
            direction: Direction::of_phase(phase),
            payload,
            context: None,
        }
    }

    /// Set the direction explicitly (a server-side chain receives requests, for instance).
    pub fn with_direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }

    /// Pass who and where to every interceptor.
    pub fn with_context(mut self, context: InvocationContext) -> Self {
        self.context = Some(context);
        self
    }
}

impl Default for Chain {
    fn default() -> Self {
        Chain {
            members: Vec::new(),
            timeout: DEFAULT_CHAIN_TIMEOUT,
        }
    }
}

impl Chain {
    /// An empty chain with the default whole-chain timeout.
    pub fn new() -> Self {
        Chain::default()
    }

    /// The whole-chain timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Add a member; its config must match its `configSchema` and its name must be unique.
    pub fn push(&mut self, member: Member) -> Result<(), Error> {
        let name = &member.descriptor().name;
        if self.members.iter().any(|m| &m.descriptor().name == name) {
            return Err(Error::DuplicateName(name.clone()));
        }
        ConfigSchema::compile(member.descriptor())?.check(member.config.as_ref())?;
        self.members.push(member);
        Ok(())
    }

    /// Add an interceptor with no config.
    pub fn with(mut self, interceptor: Arc<dyn Interceptor>) -> Result<Self, Error> {
        self.push(Member::new(interceptor))?;
        Ok(self)
    }

    /// Whether any member intercepts `event` in `phase` (callers can skip the run when not).
    pub fn intercepts(&self, event: &str, phase: Phase) -> bool {
        self.members
            .iter()
            .any(|m| m.descriptor().intercepts(event, phase))
    }

    /// Run one message through every matching member.
    pub async fn execute(&self, request: ChainRequest) -> ChainExecutionResult {
        run::execute(&self.members, self.timeout, request).await
    }
}
