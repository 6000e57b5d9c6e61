//! What `intercept` answers.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use undolog_types::{ApprovalId, EffectId, LeaseToken, SessionState, Timestamp};

/// The engine's answer to one intercepted call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Intercept {
    /// Run the tool now, then `commit` or `fail` this effect before the lease runs out,
    /// presenting `lease_token`: nobody else can settle the call.
    Execute {
        effect_id: EffectId,
        lease_expires_at: Timestamp,
        lease_token: LeaseToken,
    },
    /// The identical call already ran: here is its stored result; do not run the tool.
    Replay { effect_id: EffectId, result: Value },
    /// The identical call ran and failed: here is its recorded failure, with what the tool
    /// answered when it answered (`result`); do not run the tool. The first outcome is kept,
    /// failures included.
    Failed {
        effect_id: EffectId,
        error: String,
        result: Option<Value>,
    },
    /// A person must decide first; retry the identical call once they approve.
    AwaitingApproval {
        effect_id: EffectId,
        approval_id: ApprovalId,
        expires_at: Timestamp,
    },
    /// The call will not run.
    Rejected {
        effect_id: Option<EffectId>,
        reason: Rejection,
    },
}

/// Why a call will not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Rejection {
    /// A person denied this exact call.
    Denied {
        approval_id: Option<ApprovalId>,
        decided_by: Option<String>,
        reason: Option<String>,
    },
    /// The session no longer takes calls.
    SessionClosed { state: SessionState },
    /// The session belongs to another caller (the credential that opened it): nobody else calls
    /// in it or replays from it.
    SessionOfAnother,
    /// An identical call started but its executor vanished before recording the outcome: it may or
    /// may not have run, and running it again could do it twice.
    InDoubt,
}

impl Rejection {
    /// A sentence for the agent, saying what happened and what to do.
    pub fn message(&self) -> String {
        match self {
            Rejection::Denied { decided_by, reason, .. } => format!(
                "denied by {}: {}",
                decided_by.as_deref().unwrap_or("an operator"),
                reason.as_deref().unwrap_or("no reason given")
            ),
            Rejection::SessionClosed { state } => {
                format!("the session is {state} and takes no more calls; start a new session")
            }
            Rejection::SessionOfAnother => "the session was opened by another credential, and \
                only it calls in it; name a session of your own, or none (your calls then join \
                your own run)"
                .to_owned(),
            Rejection::InDoubt => "an identical earlier call may or may not have run (its executor \
                stopped before recording the outcome); an operator must resolve it before it can run again"
                .to_owned(),
        }
    }
}
