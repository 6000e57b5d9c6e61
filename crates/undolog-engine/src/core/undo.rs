//! Undoing a session as a saga: every decision of it, as data.
//!
//! An undo first claims its session ([`start_undo`]): one claim at a time, held by the undo that
//! made it until it ends or the claim runs out, so concurrent undo requests cannot run the same
//! compensation twice. The claimant then asks for one step at a time ([`next_step`]), which marks
//! the step's effect `compensating` before its compensation runs, and records how it went
//! ([`finish_step`]). A caller that runs compensations itself (the SDK) reports each step after
//! running it ([`record_step`]). A step found `compensating` by a later undo was cut off while
//! its compensation ran: it may have run, so it is kept for a person, never run again unasked.

use undolog_store::{Effect, Lease, Session};
use undolog_types::{EffectId, EffectState, SessionState, Tier, Timestamp};

use super::Write;
use crate::Error;

/// What undoing a session will do.
#[derive(Debug, Clone, PartialEq)]
pub struct UndoPlan {
    /// Effects to compensate, last completed first.
    pub steps: Vec<Effect>,
    /// Irreversible effects that ran: they cannot be undone and are reported.
    pub not_undoable: Vec<EffectId>,
}

/// Orders the compensations of a session: the undo stack from the top, skipping what is already
/// compensated; a step whose compensation failed before is tried again.
pub fn plan_undo(undo_stack: &[EffectId], effects: &[Effect]) -> UndoPlan {
    // One pass to index the effects: a session's undo is planned again at every step.
    let by_id: std::collections::HashMap<&EffectId, &Effect> =
        effects.iter().map(|e| (&e.id, e)).collect();
    let steps = undo_stack
        .iter()
        .rev()
        .filter_map(|id| by_id.get(id).copied())
        .filter(|e| {
            matches!(
                e.state,
                EffectState::Committed
                    | EffectState::Compensating
                    | EffectState::CompensationFailed
            )
        })
        .cloned()
        .collect();
    let not_undoable = effects
        .iter()
        .filter(|e| e.tier == Tier::Irreversible && e.state == EffectState::Committed)
        .map(|e| e.id)
        .collect();
    UndoPlan {
        steps,
        not_undoable,
    }
}

/// What the log holds of one session, read in the undo's transaction.
#[derive(Debug, Clone)]
pub struct UndoView {
    pub session: Session,
    pub effects: Vec<Effect>,
    pub undo_stack: Vec<EffectId>,
    pub now: Timestamp,
}

impl UndoView {
    fn plan(&self) -> UndoPlan {
        plan_undo(&self.undo_stack, &self.effects)
    }

    /// The claim the session holds now, if it has not run out.
    fn live_claim(&self) -> Option<&Lease> {
        self.session
            .undo_claim
            .as_ref()
            .filter(|claim| self.now < claim.expires_at)
    }

    /// Fails unless `holder` owns the session's undo: it is compensating under its claim.
    fn ensure_claimed_by(&self, holder: &str) -> Result<(), Error> {
        let session = &self.session;
        if session.state != SessionState::Compensating {
            return Err(Error::NotUndoing {
                session: session.id.clone(),
                state: session.state,
            });
        }
        if session
            .undo_claim
            .as_ref()
            .is_some_and(|c| c.holder == holder)
        {
            Ok(())
        } else {
            Err(Error::UndoLost {
                session: session.id.clone(),
            })
        }
    }
}

/// How an undo begins.
#[derive(Debug, Clone, PartialEq)]
pub enum UndoStart {
    /// The session is claimed and compensating: run `plan` step by step.
    Run { plan: UndoPlan, writes: Vec<Write> },
    /// An earlier undo stopped while this effect's compensation ran, so it may or may not have
    /// run. The step is recorded `compensation_failed` and the session with it, for a person
    /// to check; undoing again afterwards retries it.
    Interrupted {
        effect: EffectId,
        tool: String,
        writes: Vec<Write>,
    },
}

/// Claims the session for the undo `claim` names, or says why it cannot be undone now.
pub fn start_undo(view: UndoView, claim: Lease) -> Result<UndoStart, Error> {
    let busy: Vec<EffectId> = view
        .effects
        .iter()
        .filter(|e| matches!(e.state, EffectState::Pending | EffectState::Approved))
        .map(|e| e.id)
        .collect();
    if !busy.is_empty() {
        return Err(Error::SessionBusy {
            session: view.session.id.clone(),
            effects: busy,
        });
    }
    if view.session.state == SessionState::Compensating
        && let Some(running) = view.live_claim()
    {
        return Err(Error::UndoRunning {
            session: view.session.id.clone(),
            until: running.expires_at,
        });
    }
    if let Some(doubtful) = view
        .effects
        .iter()
        .find(|e| e.state == EffectState::CompensationInDoubt)
    {
        return Err(Error::CompensationInDoubt {
            session: view.session.id.clone(),
            effect: doubtful.id,
            tool: doubtful.tool.clone(),
        });
    }
    let now = view.now;
    let mut session = view.session.clone();
    if let Some(cut_off) = view
        .effects
        .iter()
        .find(|e| e.state == EffectState::Compensating)
    {
        let mut effect = cut_off.clone();
        effect.state = effect.state.transition(EffectState::CompensationFailed)?;
        effect.error = Some(
            "the undo stopped while this compensation ran, so it may or may not have run; check \
             its target, then undo again to retry it"
                .into(),
        );
        effect.lease = None;
        effect.updated_at = now;
        session.state = session.state.transition(SessionState::CompensationFailed)?;
        session.failed_effect = Some(effect.id);
        session.undo_claim = None;
        session.updated_at = now;
        return Ok(UndoStart::Interrupted {
            effect: effect.id,
            tool: effect.tool.clone(),
            writes: vec![Write::UpdateEffect(effect), Write::PutSession(session)],
        });
    }
    let path: &[SessionState] = match session.state {
        SessionState::Active => &[SessionState::Failed, SessionState::Compensating],
        SessionState::Completed | SessionState::Failed | SessionState::CompensationFailed => {
            &[SessionState::Compensating]
        }
        // An undo whose claim ran out, with no step cut off: taken over where it stopped.
        SessionState::Compensating => &[],
        SessionState::Compensated => {
            return Err(Error::NothingToUndo {
                session: session.id.clone(),
                state: session.state,
            });
        }
    };
    for &to in path {
        session.state = session.state.transition(to)?;
    }
    session.failed_effect = None;
    session.undo_claim = Some(claim);
    session.updated_at = now;
    Ok(UndoStart::Run {
        plan: view.plan(),
        writes: vec![Write::PutSession(session)],
    })
}

/// What the claimant does next.
#[derive(Debug, Clone, PartialEq)]
pub enum UndoNext {
    /// Compensate this effect now: it is marked `compensating` (and the claim renewed) by
    /// `writes`, which must commit before the compensation runs.
    Compensate {
        effect: Box<Effect>,
        writes: Vec<Write>,
    },
    /// Every step is done: the session is compensated and its claim released.
    Done { writes: Vec<Write> },
}

/// The next step of the undo `holder` runs, its claim renewed until `claim_until`.
pub fn next_step(view: UndoView, holder: &str, claim_until: Timestamp) -> Result<UndoNext, Error> {
    view.ensure_claimed_by(holder)?;
    let now = view.now;
    let mut session = view.session.clone();
    let Some(mut effect) = view.plan().steps.into_iter().next() else {
        return Ok(UndoNext::Done {
            writes: vec![Write::PutSession(completed(session, now)?)],
        });
    };
    effect = begun(effect, holder, claim_until, now)?;
    if let Some(claim) = session.undo_claim.as_mut() {
        claim.expires_at = claim_until;
    }
    session.updated_at = now;
    Ok(UndoNext::Compensate {
        effect: Box::new(effect.clone()),
        writes: vec![Write::UpdateEffect(effect), Write::PutSession(session)],
    })
}

/// How one compensation went.
#[derive(Debug, Clone, PartialEq)]
pub enum StepResult {
    /// It ran (with what it returned), or found nothing left to undo.
    Compensated,
    /// It kept failing; the error is kept on the effect for a person.
    Failed { error: String },
    /// It may or may not have run: the effect is `compensation_in_doubt` until an admin says.
    InDoubt { error: String },
}

/// Why a compensator did not compensate, as it knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompensationFailure {
    /// It did not run: refused before it was sent (the upstream unreachable, the request
    /// refused), or it answered that it failed. Trying again is safe.
    NotRun(String),
    /// It may have run: it was sent and its answer was lost (a timeout after sending, a broken
    /// connection). Running it again could undo twice (refund a payment twice).
    MayHaveRun(String),
}

impl CompensationFailure {
    pub fn message(&self) -> &str {
        match self {
            CompensationFailure::NotRun(message) | CompensationFailure::MayHaveRun(message) => {
                message
            }
        }
    }
}

/// Whether a compensation that failed so on its `attempts`-th try is tried again, of `allowed`:
/// only one that did not run, and only while tries are left. What may have run is never run
/// again without a person.
pub fn retry_compensation(failure: &CompensationFailure, attempts: u32, allowed: u32) -> bool {
    matches!(failure, CompensationFailure::NotRun(_)) && attempts < allowed.max(1)
}

/// The writes that record one step, and how the session ends with it (if it does).
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecorded {
    pub writes: Vec<Write>,
    pub session_ended: Option<SessionState>,
    /// The steps still to run, in order (none after a failure).
    pub remaining: Vec<EffectId>,
}

/// Records the outcome of the step [`next_step`] began: the effect is compensated, or it and
/// the session are `compensation_failed` (the claim released).
pub fn finish_step(
    view: UndoView,
    holder: &str,
    effect: EffectId,
    result: &StepResult,
) -> Result<StepRecorded, Error> {
    view.ensure_claimed_by(holder)?;
    let effect = view
        .effects
        .iter()
        .find(|e| e.id == effect && e.state == EffectState::Compensating)
        .cloned()
        .ok_or(Error::StepNotBegun(effect))?;
    recorded(view, effect, result, false)
}

/// Records a step that the caller (the SDK) ran itself: it must be the next one of the plan,
/// and the session ends `compensated` with the last one.
pub fn record_step(
    view: UndoView,
    holder: &str,
    effect: EffectId,
    result: &StepResult,
) -> Result<StepRecorded, Error> {
    view.ensure_claimed_by(holder)?;
    let next = view.plan().steps.into_iter().next();
    let step = match next {
        Some(next) if next.id == effect => next,
        next => {
            return Err(Error::OutOfOrder {
                session: view.session.id.clone(),
                expected: next.map(|e| e.id),
                got: effect,
            });
        }
    };
    let claim_until = view
        .session
        .undo_claim
        .as_ref()
        .map_or(view.now, |c| c.expires_at);
    let step = begun(step, holder, claim_until, view.now)?;
    recorded(view, step, result, true)
}

/// The step's effect recorded, and the session ended when this was its failure or (when
/// `completes`) its last step.
fn recorded(
    view: UndoView,
    effect: Effect,
    result: &StepResult,
    completes: bool,
) -> Result<StepRecorded, Error> {
    let now = view.now;
    let mut effect = effect;
    let mut session = view.session.clone();
    let remaining: Vec<EffectId> = view
        .plan()
        .steps
        .iter()
        .map(|e| e.id)
        .filter(|id| *id != effect.id)
        .collect();
    let (effect_to, session_to) = match result {
        StepResult::Compensated => (
            EffectState::Compensated,
            (completes && remaining.is_empty()).then_some(SessionState::Compensated),
        ),
        StepResult::Failed { error } => {
            effect.error = Some(format!("compensation failed: {error}"));
            session.failed_effect = Some(effect.id);
            (
                EffectState::CompensationFailed,
                Some(SessionState::CompensationFailed),
            )
        }
        StepResult::InDoubt { error } => {
            effect.error = Some(format!(
                "the compensation may or may not have run ({error}); it is not run again on a \
                 guess: check its target, then record what happened (POST \
                 /v1/effects/{}/resolve, compensated or not_compensated)",
                effect.id
            ));
            session.failed_effect = Some(effect.id);
            (
                EffectState::CompensationInDoubt,
                Some(SessionState::CompensationFailed),
            )
        }
    };
    effect.state = effect.state.transition(effect_to)?;
    effect.lease = None;
    effect.updated_at = now;
    let mut writes = vec![Write::UpdateEffect(effect)];
    if let Some(to) = session_to {
        session.state = session.state.transition(to)?;
        session.undo_claim = None;
        session.updated_at = now;
        writes.push(Write::PutSession(session));
    }
    Ok(StepRecorded {
        writes,
        session_ended: session_to,
        remaining: if session_to == Some(SessionState::CompensationFailed) {
            Vec::new()
        } else {
            remaining
        },
    })
}

/// The effect marked as being compensated by `holder`.
fn begun(
    mut effect: Effect,
    holder: &str,
    until: Timestamp,
    now: Timestamp,
) -> Result<Effect, Error> {
    if effect.state != EffectState::Compensating {
        effect.state = effect.state.transition(EffectState::Compensating)?;
    }
    effect.lease = Some(Lease {
        holder: holder.to_owned(),
        expires_at: until,
    });
    effect.updated_at = now;
    Ok(effect)
}

/// The session with every step done: compensated, its claim released.
fn completed(mut session: Session, now: Timestamp) -> Result<Session, Error> {
    session.state = session.state.transition(SessionState::Compensated)?;
    session.undo_claim = None;
    session.updated_at = now;
    Ok(session)
}

/// Ends an undo that had nothing to compensate (the SDK's begin with an empty plan).
pub fn complete_empty(view: UndoView, holder: &str) -> Result<Vec<Write>, Error> {
    view.ensure_claimed_by(holder)?;
    let now = view.now;
    Ok(vec![Write::PutSession(completed(view.session, now)?)])
}
