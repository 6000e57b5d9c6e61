//! Undoing a session: compensations in reverse order of completion, each step recorded. The
//! decisions are the core's (`core::undo`); this runs them, one transaction per step.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use undolog_store::{Effect, Lease};
use undolog_types::{EffectId, OrgId, SessionId, SessionState};

use crate::{
    Engine, Error, Event,
    core::{self, CompensationFailure, UndoNext, UndoStart},
};

/// Runs one compensation. The gateway calls the compensating tool upstream; the SDK a local
/// function. It must tolerate being asked to undo something already undone. When it does not
/// compensate, it says whether the compensation may have run: only one that did not is tried
/// again ([`core::retry_compensation`]).
#[async_trait]
pub trait Compensator: Send + Sync {
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, CompensationFailure>;
}

/// A compensation that succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Compensated {
    /// The compensating action ran; this is what it returned.
    Done { result: Value },
    /// There was nothing left to undo; counts as success.
    AlreadyUndone,
}

/// What an undo did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UndoReport {
    pub session: SessionId,
    /// `compensated`, or `compensation_failed` with the failing step in `steps`.
    pub state: SessionState,
    /// The steps tried, in the order they ran.
    pub steps: Vec<UndoStep>,
    /// Irreversible effects that ran and cannot be undone.
    pub not_undoable: Vec<EffectId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UndoStep {
    pub effect_id: EffectId,
    pub tool: String,
    pub attempts: u32,
    pub outcome: StepOutcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepOutcome {
    Compensated {
        detail: Compensated,
    },
    /// It did not run, however often it was tried; an undo tries it again.
    Failed {
        error: String,
    },
    /// It may or may not have run; an admin records which before any undo goes on.
    InDoubt {
        error: String,
    },
}

/// An undo's three moves, which [`run_undo`] strings together: this engine's own, or those of an
/// engine in another process asked one request each (a gateway in front of it then runs each
/// compensation itself, through its own upstreams and interceptors).
#[async_trait]
pub trait UndoSteps: Send + Sync {
    type Error: From<Error> + Send;

    /// Claims the session for a new undo: its holder, and what cannot be undone.
    async fn open_undo(&self, org: &OrgId, id: &SessionId) -> Result<UndoRun, Self::Error>;

    /// The next effect to compensate, marked as being compensated (so that an undo cut off
    /// here keeps it for a person rather than running it twice), or `None` once the session is
    /// compensated. Renews the claim.
    async fn next_undo_step(
        &self,
        org: &OrgId,
        id: &SessionId,
        holder: &str,
    ) -> Result<Option<Effect>, Self::Error>;

    /// Records how that compensation went; the state the session ended in, if it did.
    async fn record_undo_try(
        &self,
        org: &OrgId,
        id: &SessionId,
        holder: &str,
        tried: &UndoStep,
    ) -> Result<Option<SessionState>, Self::Error>;

    /// How many times, and how far apart, a failing compensation is tried.
    fn retries(&self) -> (u32, Duration);
}

/// An undo that holds its session's claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UndoRun {
    pub holder: String,
    pub not_undoable: Vec<EffectId>,
}

/// Undoes a session through `steps`: claims it (one undo at a time), runs each compensation
/// (newest first, with retries and backoff), and ends `compensated`, or `compensation_failed`
/// at the first step that keeps failing — that step is kept for a person, and the rest are left
/// untouched.
pub async fn run_undo<S: UndoSteps + ?Sized>(
    steps: &S,
    org: &OrgId,
    id: &SessionId,
    compensator: &dyn Compensator,
) -> Result<UndoReport, S::Error> {
    let run = steps.open_undo(org, id).await?;
    let mut tried = Vec::new();
    loop {
        let Some(effect) = steps.next_undo_step(org, id, &run.holder).await? else {
            return Ok(report(
                id,
                SessionState::Compensated,
                tried,
                run.not_undoable,
            ));
        };
        let (outcome, attempts) =
            compensate_with_retries(steps.retries(), &effect, compensator).await;
        let step = UndoStep {
            effect_id: effect.id,
            tool: effect.tool.clone(),
            attempts,
            outcome,
        };
        let ended = steps.record_undo_try(org, id, &run.holder, &step).await?;
        tried.push(step);
        if let Some(ended) = ended {
            return Ok(report(id, ended, tried, run.not_undoable));
        }
    }
}

impl Engine {
    /// Undoes a session ([`run_undo`] on this engine). An undo already running answers
    /// [`Error::UndoRunning`]; one that stopped mid-step answers [`Error::UndoInterrupted`]
    /// after keeping that step for a person.
    pub async fn undo(
        &self,
        org: &OrgId,
        id: &SessionId,
        compensator: &dyn Compensator,
    ) -> Result<UndoReport, Error> {
        run_undo(self, org, id, compensator).await
    }

    /// A name for one undo run, unique across processes: the holder of its claim.
    pub(crate) fn undo_holder(&self, kind: &str) -> String {
        format!(
            "{}/{kind}-{}",
            self.config().executor_id,
            uuid::Uuid::now_v7()
        )
    }

    /// The session and everything an undo decides on, in a transaction that holds the session.
    pub(crate) async fn undo_view(
        &self,
        org: &OrgId,
        id: &SessionId,
    ) -> Result<(Box<dyn undolog_store::Tx>, core::UndoView), Error> {
        let mut tx = self.begin(org).await?;
        let session = tx
            .session(id)
            .await?
            .ok_or_else(|| Error::UnknownSession(id.clone()))?;
        let effects = tx.session_effects(id).await?;
        let undo_stack = tx.undo_stack(id).await?;
        let view = core::UndoView {
            session,
            effects,
            undo_stack,
            now: self.now(),
        };
        Ok((tx, view))
    }

    /// Claims the session for the undo `holder` names and answers its plan. A step cut off by
    /// an earlier undo is kept for a person instead ([`Error::UndoInterrupted`]).
    pub(crate) async fn start_undo(
        &self,
        org: &OrgId,
        id: &SessionId,
        holder: &str,
    ) -> Result<core::UndoPlan, Error> {
        let (tx, view) = self.undo_view(org, id).await?;
        let claim = Lease {
            holder: holder.to_owned(),
            expires_at: view.now.plus(self.config().undo_claim),
        };
        match core::start_undo(view, claim)? {
            UndoStart::Run { plan, writes } => {
                self.commit_writes(tx, &writes).await?;
                self.session_changed(org, id, SessionState::Compensating);
                Ok(plan)
            }
            UndoStart::Interrupted {
                effect,
                tool,
                writes,
            } => {
                self.commit_writes(tx, &writes).await?;
                self.session_changed(org, id, SessionState::CompensationFailed);
                Err(Error::UndoInterrupted {
                    session: id.clone(),
                    effect,
                    tool,
                })
            }
        }
    }

    /// Commits one recorded step and tells the world.
    pub(crate) async fn commit_step(
        &self,
        tx: Box<dyn undolog_store::Tx>,
        org: &OrgId,
        id: &SessionId,
        effect_id: EffectId,
        recorded: core::StepRecorded,
    ) -> Result<(), Error> {
        self.commit_writes(tx, &recorded.writes).await?;
        self.published(vec![Event::CompensationStep {
            org: org.clone(),
            session: id.clone(),
            effect_id,
            compensated: recorded.session_ended != Some(SessionState::CompensationFailed),
        }]);
        if let Some(ended) = recorded.session_ended {
            self.session_changed(org, id, ended);
        }
        Ok(())
    }

    pub(crate) fn session_changed(&self, org: &OrgId, id: &SessionId, state: SessionState) {
        self.published(vec![Event::SessionChanged {
            org: org.clone(),
            session: id.clone(),
            state,
        }]);
    }
}

/// Runs one compensation, trying again with backoff, up to `attempts` times, while the core
/// says it may ([`core::retry_compensation`]: only one that did not run).
async fn compensate_with_retries(
    (attempts_allowed, first_backoff): (u32, Duration),
    effect: &Effect,
    compensator: &dyn Compensator,
) -> (StepOutcome, u32) {
    let mut attempts = 0;
    let mut backoff = first_backoff;
    loop {
        attempts += 1;
        let failure = match compensator.compensate(effect).await {
            Ok(done) => return (StepOutcome::Compensated { detail: done }, attempts),
            Err(failure) => failure,
        };
        if !core::retry_compensation(&failure, attempts, attempts_allowed) {
            let outcome = match failure {
                CompensationFailure::NotRun(error) => StepOutcome::Failed { error },
                CompensationFailure::MayHaveRun(error) => StepOutcome::InDoubt { error },
            };
            return (outcome, attempts);
        }
        let error = failure.message();
        tracing::warn!(effect = %effect.id, attempts, %error, "compensation did not run; retrying");
        tokio::time::sleep(backoff).await;
        backoff = backoff.saturating_mul(2).min(Duration::from_secs(30));
    }
}

#[async_trait]
impl UndoSteps for Engine {
    type Error = Error;

    async fn open_undo(&self, org: &OrgId, id: &SessionId) -> Result<UndoRun, Error> {
        let holder = self.undo_holder("undo");
        let plan = self.start_undo(org, id, &holder).await?;
        Ok(UndoRun {
            holder,
            not_undoable: plan.not_undoable,
        })
    }

    async fn next_undo_step(
        &self,
        org: &OrgId,
        id: &SessionId,
        holder: &str,
    ) -> Result<Option<Effect>, Error> {
        let (tx, view) = self.undo_view(org, id).await?;
        let claim_until = view.now.plus(self.config().undo_claim);
        match core::next_step(view, holder, claim_until)? {
            UndoNext::Done { writes } => {
                self.commit_writes(tx, &writes).await?;
                self.session_changed(org, id, SessionState::Compensated);
                Ok(None)
            }
            UndoNext::Compensate { effect, writes } => {
                self.commit_writes(tx, &writes).await?;
                Ok(Some(*effect))
            }
        }
    }

    async fn record_undo_try(
        &self,
        org: &OrgId,
        id: &SessionId,
        holder: &str,
        tried: &UndoStep,
    ) -> Result<Option<SessionState>, Error> {
        let result = match &tried.outcome {
            StepOutcome::Compensated { .. } => core::StepResult::Compensated,
            StepOutcome::Failed { error } => core::StepResult::Failed {
                error: format!("after {} attempts: {error}", tried.attempts),
            },
            StepOutcome::InDoubt { error } => core::StepResult::InDoubt {
                error: error.clone(),
            },
        };
        let (tx, view) = self.undo_view(org, id).await?;
        let recorded = core::finish_step(view, holder, tried.effect_id, &result)?;
        let ended = recorded.session_ended;
        self.commit_step(tx, org, id, tried.effect_id, recorded)
            .await?;
        Ok(ended)
    }

    fn retries(&self) -> (u32, Duration) {
        let config = self.config();
        (config.compensation_attempts, config.compensation_backoff)
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
