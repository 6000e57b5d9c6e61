//! Typed events, published after the transaction that caused them commits.

use std::{collections::HashMap, sync::Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use undolog_types::{ApprovalId, EffectId, OrgId, SessionId, SessionState, Tier};

/// Something that happened in the log, for live views (the gateway streams them as SSE).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    EffectIntercepted {
        org: OrgId,
        session: SessionId,
        effect_id: EffectId,
        tool: String,
        tier: Tier,
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
        /// How many times this process has replayed the effect, this time included (counted
        /// since it started; each gateway of a fleet counts its own).
        replays: u64,
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
        tool: String,
        arguments: Value,
        tier: Tier,
        /// Why the call waits for a person, in words.
        reason: String,
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

    /// The session the event is about.
    pub fn session(&self) -> &SessionId {
        match self {
            Event::EffectIntercepted { session, .. }
            | Event::EffectCommitted { session, .. }
            | Event::EffectFailed { session, .. }
            | Event::EffectReplayed { session, .. }
            | Event::EffectRejected { session, .. }
            | Event::ApprovalRequired { session, .. }
            | Event::ApprovalDecided { session, .. }
            | Event::CompensationStep { session, .. }
            | Event::SessionChanged { session, .. } => session,
        }
    }
}

/// Why a call of `tier` waits for a person (`None`: the call is not known here).
pub fn hold_reason(tier: Option<Tier>) -> &'static str {
    match tier {
        Some(Tier::Irreversible) | None => "the tool is irreversible: its effect cannot be undone",
        Some(_) => "the configuration says this tool requires approval",
    }
}

/// Replays per effect, counted in this process. Bounded: past [`ReplayCounts::AT_MOST`]
/// effects, counting starts over.
#[derive(Debug, Default)]
pub(crate) struct ReplayCounts(Mutex<HashMap<EffectId, u64>>);

impl ReplayCounts {
    const AT_MOST: usize = 65_536;

    /// Counts one more replay of `effect`; the count so far.
    pub(crate) fn count(&self, effect: EffectId) -> u64 {
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if counts.len() >= Self::AT_MOST && !counts.contains_key(&effect) {
            counts.clear();
        }
        let count = counts.entry(effect).or_default();
        *count += 1;
        *count
    }
}
