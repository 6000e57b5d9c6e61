//! Undoing a session: compensations in reverse order of completion, each step recorded.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use undolog_store::{Effect, Lease};
use undolog_types::{EffectId, EffectState, OrgId, SessionId, SessionState};

use crate::{
    Engine, Error, Event,
    core::{self, Write},
};

/// Runs one compensation. The gateway calls the compensating tool upstream; the SDK a local
/// function. It must tolerate being asked to undo something already undone.
#[async_trait]
pub trait Compensator: Send + Sync {
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, String>;
}

/// A compensation that succeeded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Compensated {
    /// The compensating action ran; this is what it returned.
    Done { result: Value },
    /// There was nothing left to undo; counts as success.
    AlreadyUndone,
}

/// What an undo did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UndoReport {
    pub session: SessionId,
    /// `compensated`, or `compensation_failed` with the failing step in `steps`.
    pub state: SessionState,
    /// The steps tried, in the order they ran.
    pub steps: Vec<UndoStep>,
    /// Irreversible effects that ran and cannot be undone.
    pub not_undoable: Vec<EffectId>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UndoStep {
    pub effect_id: EffectId,
    pub tool: String,
    pub attempts: u32,
    pub outcome: StepOutcome,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepOutcome {
    Compensated { detail: Compensated },
    Failed { error: String },
}

impl Engine {
    /// Undoes a session: marks it compensating, runs each compensation (newest first, with
    /// retries and backoff), and ends `compensated`, or `compensation_failed` at the first step
    /// that keeps failing — that step is kept for a person, and the rest are left untouched.
    pub async fn undo(
        &self,
        org: &OrgId,
        id: &SessionId,
        compensator: &dyn Compensator,
    ) -> Result<UndoReport, Error> {
        let plan = self.start_undo(org, id).await?;
        let mut steps = Vec::with_capacity(plan.steps.len());
        for effect in plan.steps {
            let step = self.compensate_step(org, effect, compensator).await?;
            let failed = matches!(step.outcome, StepOutcome::Failed { .. });
            let failed_effect = step.effect_id;
            steps.push(step);
            if failed {
                let mut tx = self.begin(org).await?;
                let mut session = tx
                    .session(id)
                    .await?
                    .ok_or_else(|| Error::UnknownSession(id.clone()))?;
                session.state = session.state.transition(SessionState::CompensationFailed)?;
                session.failed_effect = Some(failed_effect);
                session.updated_at = self.now();
                self.commit_writes(tx, &[Write::PutSession(session)])
                    .await?;
                self.published(vec![Event::SessionChanged {
                    org: org.clone(),
                    session: id.clone(),
                    state: SessionState::CompensationFailed,
                }]);
                return Ok(report(
                    id,
                    SessionState::CompensationFailed,
                    steps,
                    plan.not_undoable,
                ));
            }
        }
        self.set_session_state(org, id, &[SessionState::Compensated])
            .await?;
        Ok(report(
            id,
            SessionState::Compensated,
            steps,
            plan.not_undoable,
        ))
    }

    /// Checks the session can be undone, moves it to `compensating`, and plans the steps.
    pub(crate) async fn start_undo(
        &self,
        org: &OrgId,
        id: &SessionId,
    ) -> Result<core::UndoPlan, Error> {
        let mut tx = self.begin(org).await?;
        let mut session = tx
            .session(id)
            .await?
            .ok_or_else(|| Error::UnknownSession(id.clone()))?;
        let effects = tx.session_effects(id).await?;
        let now = self.now();
        let busy: Vec<EffectId> = effects
            .iter()
            .filter(|e| match e.state {
                EffectState::Pending | EffectState::Approved => true,
                // A step of an undo whose process is still alive.
                EffectState::Compensating => e.lease.as_ref().is_some_and(|l| now < l.expires_at),
                _ => false,
            })
            .map(|e| e.id)
            .collect();
        if !busy.is_empty() {
            return Err(Error::SessionBusy {
                session: id.clone(),
                effects: busy,
            });
        }
        let path: &[SessionState] = match session.state {
            SessionState::Active => &[SessionState::Failed, SessionState::Compensating],
            SessionState::Completed | SessionState::Failed | SessionState::CompensationFailed => {
                &[SessionState::Compensating]
            }
            SessionState::Compensating => &[], // resuming an undo whose process stopped
            SessionState::Compensated => {
                return Err(Error::NothingToUndo {
                    session: id.clone(),
                    state: session.state,
                });
            }
        };
        for &to in path {
            session.state = session.state.transition(to)?;
        }
        session.failed_effect = None;
        session.updated_at = now;
        let plan = core::plan_undo(&tx.undo_stack(id).await?, &effects);
        self.commit_writes(tx, &[Write::PutSession(session)])
            .await?;
        self.published(vec![Event::SessionChanged {
            org: org.clone(),
            session: id.clone(),
            state: SessionState::Compensating,
        }]);
        Ok(plan)
    }

    /// Runs one compensation with retries, recording the step before and after.
    async fn compensate_step(
        &self,
        org: &OrgId,
        effect: Effect,
        compensator: &dyn Compensator,
    ) -> Result<UndoStep, Error> {
        let config = self.config().clone();
        let lease = Lease {
            holder: config.executor_id.clone(),
            expires_at: self.now().plus(config.lease),
        };
        let mut effect = effect;
        if effect.state != EffectState::Compensating {
            effect.state = effect.state.transition(EffectState::Compensating)?;
        }
        effect.lease = Some(lease);
        effect.updated_at = self.now();
        self.commit_writes(
            self.begin(org).await?,
            &[Write::UpdateEffect(effect.clone())],
        )
        .await?;

        let mut attempts = 0;
        let mut backoff = config.compensation_backoff;
        let outcome = loop {
            attempts += 1;
            match compensator.compensate(&effect).await {
                Ok(done) => break StepOutcome::Compensated { detail: done },
                Err(error) if attempts >= config.compensation_attempts.max(1) => {
                    break StepOutcome::Failed { error };
                }
                Err(error) => {
                    tracing::warn!(effect = %effect.id, attempts, %error, "compensation failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = backoff.saturating_mul(2).min(Duration::from_secs(30));
                }
            }
        };

        let compensated = matches!(outcome, StepOutcome::Compensated { .. });
        effect.state = effect.state.transition(if compensated {
            EffectState::Compensated
        } else {
            EffectState::CompensationFailed
        })?;
        if let StepOutcome::Failed { error } = &outcome {
            effect.error = Some(format!(
                "compensation failed after {attempts} attempts: {error}"
            ));
        }
        effect.lease = None;
        effect.updated_at = self.now();
        self.commit_writes(
            self.begin(org).await?,
            &[Write::UpdateEffect(effect.clone())],
        )
        .await?;
        self.published(vec![Event::CompensationStep {
            org: org.clone(),
            session: effect.session.clone(),
            effect_id: effect.id,
            compensated,
        }]);
        Ok(UndoStep {
            effect_id: effect.id,
            tool: effect.tool.clone(),
            attempts,
            outcome,
        })
    }
}

fn report(
    id: &SessionId,
    state: SessionState,
    steps: Vec<UndoStep>,
    not_undoable: Vec<EffectId>,
) -> UndoReport {
    UndoReport {
        session: id.clone(),
        state,
        steps,
        not_undoable,
    }
}
