//! Typed events, published after the transaction that caused them commits.

use serde::{Deserialize, Serialize};
use undolog_types::{ApprovalId, EffectId, OrgId, SessionId, SessionState};

/// Something that happened in the log, for live views (the gateway streams them as SSE).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    EffectIntercepted {
        org: OrgId,
        session: SessionId,
        effect_id: EffectId,
        tool: String,
    },
    EffectCommitted {
        org: OrgId,
        session: SessionId,
        effect_id: EffectId,
    },
    EffectFailed {
        org: OrgId,
        session: SessionId,
        effect_id: EffectId,
        error: String,
    },
    EffectReplayed {
        org: OrgId,
        session: SessionId,
        effect_id: EffectId,
    },
    /// Refused before it was sent (an interceptor blocked it); the tool did not run.
    EffectRejected {
        org: OrgId,
        session: SessionId,
        effect_id: EffectId,
        reason: String,
    },
    ApprovalRequired {
        org: OrgId,
        session: SessionId,
        effect_id: EffectId,
        approval_id: ApprovalId,
    },
    ApprovalDecided {
        org: OrgId,
        session: SessionId,
        approval_id: ApprovalId,
        approved: bool,
    },
    CompensationStep {
        org: OrgId,
        session: SessionId,
        effect_id: EffectId,
        compensated: bool,
    },
    SessionChanged {
        org: OrgId,
        session: SessionId,
        state: SessionState,
    },
}

impl Event {
    /// The org the event belongs to: subscribers see only their own org's events.
    pub fn org(&self) -> &OrgId {
        match self {
            Event::EffectIntercepted { org, .. }
            | Event::EffectCommitted { org, .. }
            | Event::EffectFailed { org, .. }
            | Event::EffectReplayed { org, .. }
            | Event::EffectRejected { org, .. }
            | Event::ApprovalRequired { org, .. }
            | Event::ApprovalDecided { org, .. }
            | Event::CompensationStep { org, .. }
            | Event::SessionChanged { org, .. } => org,
        }
    }
}
