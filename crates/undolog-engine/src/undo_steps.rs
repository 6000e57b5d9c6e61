//! Undo run by the caller, step by step: the SDK runs its compensations in its own process and
//! reports each one. [`Engine::begin_undo`] claims the session and plans the saga;
//! [`Engine::record_undo_step`] records one step's outcome under that claim, newest first, each
//! in one transaction, and closes the session after the last step (or at the first failure).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use undolog_store::{Compensation, Effect};
use undolog_types::{EffectId, OrgId, SessionId, SessionState};

use crate::{Engine, Error, StepOutcome, core};

/// The saga a caller is to run: compensate `steps` in this order, then nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UndoPlanned {
    pub session: SessionId,
    /// `compensating`, or `compensated` at once when there is nothing to compensate.
    pub state: SessionState,
    /// The claim this undo holds on the session: every step report names it.
    pub claim: String,
    /// The effects to compensate, newest completion first.
    pub steps: Vec<PlannedStep>,
    /// Irreversible effects that ran and cannot be undone.
    pub not_undoable: Vec<EffectId>,
}

/// One compensation to run: the original call and what it returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedStep {
    pub effect_id: EffectId,
    pub tool: String,
    pub args: Value,
    pub result: Option<Value>,
    pub compensation: Option<Compensation>,
}

/// Where an undo run by the caller stands after one recorded step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UndoProgress {
    pub session: SessionId,
    /// `compensating` while steps remain; then `compensated`, or `compensation_failed`.
    pub state: SessionState,
    pub effect_id: EffectId,
    /// The steps still to report, in order.
    pub remaining: Vec<EffectId>,
}

impl Engine {
    /// Starts an undo whose compensations the caller runs: checks nothing is in flight, claims
    /// the session (one undo at a time) and answers the plan with the claim. Calling it again
    /// after the claim ran out resumes from the step still to do.
    pub async fn begin_undo(&self, org: &OrgId, id: &SessionId) -> Result<UndoPlanned, Error> {
        let claim = self.undo_holder("caller-undo");
        let plan = self.start_undo(org, id, &claim).await?;
        let mut state = SessionState::Compensating;
        if plan.steps.is_empty() {
            let (tx, view) = self.undo_view(org, id).await?;
            let writes = core::complete_empty(view, &claim)?;
            self.commit_writes(tx, &writes).await?;
            state = SessionState::Compensated;
            self.session_changed(org, id, state);
        }
        Ok(UndoPlanned {
            session: id.clone(),
            state,
            claim,
            steps: plan.steps.into_iter().map(planned).collect(),
            not_undoable: plan.not_undoable,
        })
    }

    /// Records the outcome of one compensation the caller ran under `claim`. Steps are reported
    /// in plan order (newest first); the session ends `compensated` after the last one, or
    /// `compensation_failed` at a failure, which is kept for a person. One transaction.
    pub async fn record_undo_step(
        &self,
        org: &OrgId,
        id: &SessionId,
        claim: &str,
        effect_id: EffectId,
        outcome: StepOutcome,
    ) -> Result<UndoProgress, Error> {
        let (tx, view) = self.undo_view(org, id).await?;
        let result = match outcome {
            StepOutcome::Compensated { .. } => core::StepResult::Compensated,
            StepOutcome::Failed { error } => core::StepResult::Failed { error },
            StepOutcome::InDoubt { error } => core::StepResult::InDoubt { error },
        };
        let recorded = core::record_step(view, claim, effect_id, &result)?;
        let state = recorded.session_ended.unwrap_or(SessionState::Compensating);
        let remaining = recorded.remaining.clone();
        self.commit_step(tx, org, id, effect_id, recorded).await?;
        Ok(UndoProgress {
            session: id.clone(),
            state,
            effect_id,
            remaining,
        })
    }
}

fn planned(effect: Effect) -> PlannedStep {
    PlannedStep {
        effect_id: effect.id,
        tool: effect.tool,
        args: Value::from(effect.args),
        result: effect.result,
        compensation: effect.compensation,
    }
}
