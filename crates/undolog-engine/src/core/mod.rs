//! The sans-IO core: pure functions that look at what the store holds and say what should happen,
//! as data. The executor ([`crate::Engine`]) reads, calls these, and writes the result in one
//! transaction. Nothing here awaits, locks, reads a clock or draws a random number: the executor
//! hands in the time, lease tokens and new ids (tests/it/core_is_pure.rs checks).

mod intercept;
mod lifecycle;
mod runs;
mod undo;

pub use intercept::{
    Decision, InterceptView, NewIds, ReadOutcome, decide_intercept, record_read, reject,
};
pub use lifecycle::{
    Decider, Resolution, approve, await_input, commit, deny, doubt, expire, fail, not_sent,
    renew_lease, resolve_in_doubt, withdraw,
};
pub use runs::{RunChoice, current_run};
pub use undo::{
    CompensationFailure, StepRecorded, StepResult, UndoNext, UndoPlan, UndoStart, UndoView,
    complete_empty, finish_step, next_step, plan_undo, record_step, retry_compensation, start_undo,
};

use undolog_store::{Approval, Effect, Session};
use undolog_types::{EffectId, SessionId, Timestamp};

/// One write the executor must make, in order, inside the operation's transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    PutSession(Session),
    InsertEffect(Effect),
    UpdateEffect(Effect),
    InsertApproval(Approval),
    UpdateApproval(Approval),
    PushUndo {
        session: SessionId,
        effect: EffectId,
        at: Timestamp,
    },
}
