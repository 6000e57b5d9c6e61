//! How a call ended, as every surface reports it.

use super::*;

/// How a call ended, as every surface reports it.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// The tool ran now; `result` is the upstream's `CallToolResult` as JSON.
    Executed { effect_id: EffectId, result: Value },
    /// An identical call ran before; this is its recorded result.
    Replayed { effect_id: EffectId, result: Value },
    /// The call goes on as a task (the tasks extension): its id is the effect's.
    Task {
        effect_id: EffectId,
        created_at: Timestamp,
        /// How long the task stays known from its creation.
        ttl: Duration,
    },
    /// A person must decide first.
    AwaitingApproval {
        effect_id: EffectId,
        approval_id: ApprovalId,
        expires_at: Timestamp,
    },
    /// The upstream made the call a task of its own (the tasks extension): the client gets a
    /// task of the gateway's that follows it. Never answered as it is.
    UpstreamTask {
        effect_id: EffectId,
        /// The effect's lease token: whoever follows the task settles the effect with it.
        lease_token: undolog_types::LeaseToken,
        upstream: usize,
        /// The upstream's task id.
        task_id: String,
        /// How often the upstream asks to be polled.
        poll: Duration,
    },
    /// The tool may or may not have run: its answer was lost after the call was sent (now), or
    /// an identical call's was (`replayed`). An operator resolves it; it is never run again on
    /// a guess.
    InDoubt {
        effect_id: EffectId,
        message: String,
        replayed: bool,
    },
    /// Refused: denied by a person, a closed session.
    Rejected {
        effect_id: Option<EffectId>,
        message: String,
    },
    /// The upstream needs the client's input first (a 2026-07-28 `input_required` round):
    /// `result` is its `InputRequiredResult`, passed to the client; the client's retry with the
    /// responses is a new call. Recorded as an `input_required` effect whose result is that.
    InputRequired { effect_id: EffectId, result: Value },
    /// The upstream answered the call with a JSON-RPC error, passed to the client as it is.
    /// Recorded as a failed effect.
    Refused {
        effect_id: EffectId,
        error: ErrorData,
    },
    /// The tool failed, now or (replayed) before. `result` is the upstream's own error result when
    /// it gave one.
    Failed {
        effect_id: EffectId,
        error: String,
        result: Option<Value>,
        replayed: bool,
    },
}

impl Outcome {
    /// The effect that records the call, when one does.
    pub(super) fn effect_id(&self) -> Option<EffectId> {
        match self {
            Outcome::Executed { effect_id, .. }
            | Outcome::Replayed { effect_id, .. }
            | Outcome::Task { effect_id, .. }
            | Outcome::AwaitingApproval { effect_id, .. }
            | Outcome::UpstreamTask { effect_id, .. }
            | Outcome::InDoubt { effect_id, .. }
            | Outcome::InputRequired { effect_id, .. }
            | Outcome::Refused { effect_id, .. }
            | Outcome::Failed { effect_id, .. } => Some(*effect_id),
            Outcome::Rejected { effect_id, .. } => *effect_id,
        }
    }
}
