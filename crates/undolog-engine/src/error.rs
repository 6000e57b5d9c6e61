use std::time::Duration;

use undolog_types::{
    ApprovalId, ApprovalState, EffectId, EffectState, IllegalTransition, SessionId, SessionState,
};

/// What an engine operation can fail with. Each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid input: {0}")]
    InvalidInput(#[from] undolog_types::Error),
    #[error("the tool name is empty; name the tool to call")]
    EmptyToolName,
    #[error("the idempotency key is empty; omit it or send a non-empty key")]
    EmptyIdempotencyKey,
    #[error(
        "the arguments are {len} bytes, over the limit of {limit}; send less or raise max_args_bytes"
    )]
    ArgsTooLarge { len: usize, limit: usize },
    #[error(
        "idempotency key {key:?} was first used for a different call (effect {effect}); \
         use a new key for a different call"
    )]
    KeyReused { key: String, effect: EffectId },
    #[error("no effect {0} in this org; check the id")]
    UnknownEffect(EffectId),
    #[error("no approval {0} in this org; check the id")]
    UnknownApproval(ApprovalId),
    #[error("no session {0} in this org; check the id")]
    UnknownSession(SessionId),
    #[error(
        "effect {0} is settled only by the executor it was handed to, with the lease token its \
         `execute` answer gave; this request carried no such token. Settle the calls you were \
         told to execute, and no others"
    )]
    NotOwner(EffectId),
    #[error(
        "session {session} cannot be undone now: the compensation of effect {effect} ({tool}) \
         may or may not have run, and it is not run again on a guess. Check its target, then \
         record what happened: POST /v1/effects/{effect}/resolve with {{\"outcome\": \
         \"compensated\"}} or {{\"outcome\": \"not_compensated\", \"error\": \"…\"}}"
    )]
    CompensationInDoubt {
        session: SessionId,
        effect: EffectId,
        tool: String,
    },
    #[error("effect {effect}: {expected}")]
    WrongVerdict {
        effect: EffectId,
        expected: &'static str,
    },
    #[error("effect {effect} is {state}, not pending: its outcome is recorded once")]
    NotPending {
        effect: EffectId,
        state: EffectState,
    },
    #[error("approval {approval} is already {state}; a decision is made once")]
    AlreadyDecided {
        approval: ApprovalId,
        state: ApprovalState,
    },
    #[error(
        "approval {approval} is for a call that {principal} made itself; another approver must \
         decide it (four eyes), or set approvals.allow_self_approval for a single-person setup"
    )]
    OwnCall {
        approval: ApprovalId,
        principal: String,
    },
    #[error("approval {0} expired before the decision; the agent must ask again")]
    ApprovalExpired(ApprovalId),
    #[error(
        "the identical call (effect {effect}) is still running after waiting {waited:?} for it; \
         retry later (it is replayed once it ends), or raise `limits.identical_call_wait_secs`"
    )]
    StillRunning { effect: EffectId, waited: Duration },
    #[error("still waiting for a decision on approval {0} after the wait limit")]
    ApprovalWaitTimedOut(ApprovalId),
    #[error(
        "effect {0} is not in doubt (it is not pending, or its executor's lease is still live); \
         only in-doubt effects can be resolved by hand"
    )]
    NotInDoubt(EffectId),
    #[error(
        "session {session} has calls still in flight ({effects:?}); wait for them to finish, or \
         resolve in-doubt ones, then undo"
    )]
    SessionBusy {
        session: SessionId,
        effects: Vec<EffectId>,
    },
    #[error("session {session} is {state}; nothing to undo there")]
    NothingToUndo {
        session: SessionId,
        state: SessionState,
    },
    #[error(
        "an undo of session {session} is already running (its claim holds until {until}); watch \
         it on GET /events or GET /v1/sessions/{session}, and undo again only if it stops"
    )]
    UndoRunning {
        session: SessionId,
        until: undolog_types::Timestamp,
    },
    #[error(
        "an earlier undo of session {session} stopped while compensating effect {effect} ({tool}): \
         that compensation may or may not have run. It is now compensation_failed; check its \
         target, then undo again to retry it"
    )]
    UndoInterrupted {
        session: SessionId,
        effect: EffectId,
        tool: String,
    },
    #[error(
        "this undo does not hold session {session}: its claim ran out and another undo took \
         over, or the claim sent is not the one begin_undo gave; it stops here. Begin the undo \
         again to resume"
    )]
    UndoLost { session: SessionId },
    #[error("effect {0} is not being compensated by this undo; ask for the next step first")]
    StepNotBegun(EffectId),
    #[error("session {session} is {state}, not being undone; begin the undo first")]
    NotUndoing {
        session: SessionId,
        state: SessionState,
    },
    #[error(
        "compensations run newest first: the next step of session {session} is {}, not effect \
         {got}; report that step first",
        expected.map_or_else(|| "none (every step is recorded)".to_owned(), |e| format!("effect {e}"))
    )]
    OutOfOrder {
        session: SessionId,
        expected: Option<EffectId>,
        got: EffectId,
    },
    #[error(transparent)]
    IllegalTransition(#[from] IllegalTransition),
    #[error(transparent)]
    Store(#[from] undolog_store::Error),
    #[error("the engine stopped before the change was recorded; retry")]
    Stopped,
}

impl Error {
    /// The store refused a write made on a remembered row: the row changed since (see
    /// `remembered`), and nothing was written.
    pub(crate) fn is_changed(&self) -> bool {
        matches!(self, Error::Store(undolog_store::Error::Changed { .. }))
    }
}
