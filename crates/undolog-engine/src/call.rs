//! What a caller hands the engine: one tool call and the policy that governs its tool.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use undolog_store::Compensation;
use undolog_types::{Args, CallIdentity, OrgId, SessionId, Signature, Tier};

/// How the engine treats one tool. The gateway derives it from configuration and MCP annotations;
/// the SDK from its decorator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolPolicy {
    pub tier: Tier,
    /// How to undo the tool; recorded with the effect before the tool runs.
    pub compensation: Option<Compensation>,
    /// Running the tool twice is harmless, so an in-doubt call may simply run again.
    pub idempotent: bool,
    /// Ask a person even though the tier alone would not.
    pub requires_approval: bool,
}

impl ToolPolicy {
    pub fn new(tier: Tier) -> ToolPolicy {
        ToolPolicy {
            tier,
            compensation: None,
            idempotent: false,
            requires_approval: false,
        }
    }

    #[must_use]
    pub fn with_compensation(mut self, compensation: Compensation) -> ToolPolicy {
        self.compensation = Some(compensation);
        self
    }

    /// Whether calls of this tool wait for a person before they run.
    pub fn needs_approval(&self) -> bool {
        self.requires_approval || self.tier == Tier::Irreversible
    }
}

/// One tool call on its way to a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub org: OrgId,
    pub session: SessionId,
    pub tool: String,
    pub args: Args,
    /// The caller's step index, part of the signature when given.
    pub step: Option<u64>,
    /// A client-supplied key that replaces signature matching.
    pub idempotency_key: Option<String>,
    /// Who made the call (`api-key:ID`, or the local operator), recorded with its approval so
    /// that this principal cannot decide it. Not part of the signature.
    pub caller: Option<String>,
    pub policy: ToolPolicy,
    /// How long the caller may run the tool before it counts as gone, when it cannot renew the
    /// lease as it runs (an SDK caller runs its tools out of the engine's sight); the engine's
    /// `lease` otherwise.
    pub lease: Option<Duration>,
    /// How long this caller waits for an identical call in flight, at most the engine's
    /// `wait_timeout` (a client that says how long it waits gets its answer before it gives up).
    pub wait: Option<Duration>,
}

impl Call {
    pub fn new(
        org: OrgId,
        session: SessionId,
        tool: impl Into<String>,
        args: Args,
        policy: ToolPolicy,
    ) -> Call {
        Call {
            org,
            session,
            tool: tool.into(),
            args,
            step: None,
            idempotency_key: None,
            caller: None,
            policy,
            lease: None,
            wait: None,
        }
    }

    #[must_use]
    pub fn with_step(mut self, step: u64) -> Call {
        self.step = Some(step);
        self
    }

    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Call {
        self.idempotency_key = Some(key.into());
        self
    }

    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Call {
        self.lease = Some(lease);
        self
    }

    #[must_use]
    pub fn with_wait(mut self, wait: Duration) -> Call {
        self.wait = Some(wait);
        self
    }

    #[must_use]
    pub fn with_caller(mut self, caller: impl Into<String>) -> Call {
        self.caller = Some(caller.into());
        self
    }

    pub fn signature(&self) -> Signature {
        CallIdentity {
            org: &self.org,
            session: &self.session,
            tool: &self.tool,
            args: &self.args,
            step: self.step,
        }
        .signature()
    }
}
