//! Undo run by the caller, step by step: the SDK runs its compensations in its own process and
//! reports each one. [`Engine::begin_undo`] plans the saga and marks the session compensating;
//! [`Engine::record_undo_step`] records one step's outcome, newest first, each in one
//! transaction, and closes the session after the last step (or at the first failure).

use serde::Serialize;
use serde_json::Value;
use undolog_store::{Compensation, Effect};
use undolog_types::{EffectId, EffectState, OrgId, SessionId, SessionState};

use crate::{Engine, Error, Event, StepOutcome, core, core::Write};

/// The saga a caller is to run: compensate `steps` in this order, then nothing else.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UndoPlanned {
    pub session: SessionId,
    /// `compensating`, or `compensated` at once when there is nothing to compensate.
    pub state: SessionState,
    /// The effects to compensate, newest completion first.
    pub steps: Vec<PlannedStep>,
    /// Irreversible effects that ran and cannot be undone.
    pub not_undoable: Vec<EffectId>,
}

/// One compensation to run: the original call and what it returned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedStep {
    pub effect_id: EffectId,
    pub tool: String,
    pub args: Value,
    pub result: Option<Value>,
    pub compensation: Option<Compensation>,
}

/// Where an undo run by the caller stands after one recorded step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UndoProgress {
    pub session: SessionId,
    /// `compensating` while steps remain; then `compensated`, or `compensation_failed`.
    pub state: SessionState,
    pub effect_id: EffectId,
    /// The steps still to report, in order.
    pub remaining: Vec<EffectId>,
}

impl Engine {
    /// Starts an undo whose compensations the caller runs: checks nothing is in flight, marks
    /// the session compensating, and answers the plan. Calling it again resumes an interrupted
    /// undo (or one that stopped at a failed step) from the step still to do.
    pub async fn begin_undo(&self, org: &OrgId, id: &SessionId) -> Result<UndoPlanned, Error> {
        let plan = self.start_undo(org, id).await?;
        let mut state = SessionState::Compensating;
        if plan.steps.is_empty() {
            state = self
                .set_session_state(org, id, &[SessionState::Compensated])
                .await?
                .state;
        }
        Ok(UndoPlanned {
            session: id.clone(),
            state,
            steps: plan.steps.into_iter().map(planned).collect(),
            not_undoable: plan.not_undoable,
        })
    }

    /// Records the outcome of one compensation the caller ran. Steps are reported in plan order
    /// (newest first); the session ends `compensated` after the last one, or
    /// `compensation_failed` at a failure, which is kept for a person. One transaction.
    pub async fn record_undo_step(
        &self,
        org: &OrgId,
        id: &SessionId,
        effect_id: EffectId,
        outcome: StepOutcome,
    ) -> Result<UndoProgress, Error> {
        let mut tx = self.begin(org).await?;
        let mut session = tx
            .session(id)
            .await?
            .ok_or_else(|| Error::UnknownSession(id.clone()))?;
        if session.state != SessionState::Compensating {
            return Err(Error::NotUndoing {
                session: id.clone(),
                state: session.state,
            });
        }
        let effects = tx.session_effects(id).await?;
        let plan = core::plan_undo(&tx.undo_stack(id).await?, &effects);
        let mut remaining = plan.steps.into_iter();
        let effect = match remaining.next() {
            Some(next) if next.id == effect_id => next,
            next => {
                return Err(Error::OutOfOrder {
                    session: id.clone(),
                    expected: next.map(|e| e.id),
                    got: effect_id,
                });
            }
        };
        let remaining: Vec<EffectId> = remaining.map(|e| e.id).collect();
        let now = self.now();
        let compensated = matches!(outcome, StepOutcome::Compensated { .. });
        let effect = step_done(effect, &outcome, now)?;
        let ending = match (compensated, remaining.is_empty()) {
            (false, _) => Some(SessionState::CompensationFailed),
            (true, true) => Some(SessionState::Compensated),
            (true, false) => None,
        };
        let mut writes = vec![Write::UpdateEffect(effect)];
        if let Some(to) = ending {
            session.state = session.state.transition(to)?;
            session.failed_effect = (!compensated).then_some(effect_id);
            session.updated_at = now;
            writes.push(Write::PutSession(session.clone()));
        }
        self.commit_writes(tx, &writes).await?;
        let mut events = vec![Event::CompensationStep {
            org: org.clone(),
            session: id.clone(),
            effect_id,
            compensated,
        }];
        if ending.is_some() {
            events.push(Event::SessionChanged {
                org: org.clone(),
                session: id.clone(),
                state: session.state,
            });
        }
        self.published(events);
        Ok(UndoProgress {
            session: id.clone(),
            state: session.state,
            effect_id,
            remaining: if compensated { remaining } else { Vec::new() },
        })
    }
}

/// The effect after its compensation ran: `compensated`, or `compensation_failed` with the error.
fn step_done(
    mut effect: Effect,
    outcome: &StepOutcome,
    now: undolog_types::Timestamp,
) -> Result<Effect, Error> {
    if effect.state != EffectState::Compensating {
        effect.state = effect.state.transition(EffectState::Compensating)?;
    }
    effect.state = effect.state.transition(match outcome {
        StepOutcome::Compensated { .. } => EffectState::Compensated,
        StepOutcome::Failed { .. } => EffectState::CompensationFailed,
    })?;
    if let StepOutcome::Failed { error } = outcome {
        effect.error = Some(format!("compensation failed: {error}"));
    }
    effect.lease = None;
    effect.updated_at = now;
    Ok(effect)
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
