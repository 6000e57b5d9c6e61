//! Deciding what happens to an intercepted call.

use undolog_store::{Approval, Effect, Lease, Session};
use undolog_types::{
    ApprovalId, ApprovalState, EffectId, EffectState, LeaseToken, SessionState, Timestamp,
};

use super::Write;
use crate::{Call, Error, Intercept, Rejection};

/// What the store holds about a call, read under the call's lock.
#[derive(Debug, Clone)]
pub struct InterceptView {
    pub session: Option<Session>,
    /// The newest effect with the call's idempotency key, or else with its signature.
    pub existing: Option<Effect>,
    /// The approval request of `existing`, if it has one.
    pub approval: Option<Approval>,
    pub now: Timestamp,
    /// Who would hold the lease, and until when.
    pub lease: Lease,
    /// The token an `Execute` answer hands its executor: the one credential that settles the
    /// call (drawn fresh by the executor for every decision).
    pub token: LeaseToken,
    pub approval_expires_at: Timestamp,
    /// The ids a new effect, and its approval request, would get (drawn by the executor: the
    /// core draws nothing).
    pub new_ids: NewIds,
}

/// Ids drawn for records a decision may create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewIds {
    pub effect: EffectId,
    pub approval: ApprovalId,
}

/// What to answer, what to write, and whether to wait for an identical call in flight.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Answer(Intercept, Vec<Write>),
    /// An identical call is running: wait for it to finish, then decide again.
    Wait(EffectId),
}

/// Decides an intercepted call. Pure: the same view always gives the same decision.
pub fn decide_intercept(call: &Call, view: InterceptView) -> Result<Decision, Error> {
    let mut writes = Vec::new();
    let mut session = match view.session.clone() {
        Some(s) if !s.belongs_to(call.caller.as_deref()) => {
            let reason = Rejection::SessionOfAnother;
            return Ok(Decision::Answer(
                Intercept::Rejected {
                    effect_id: None,
                    reason,
                },
                writes,
            ));
        }
        Some(s) if s.state != SessionState::Active => {
            let reason = Rejection::SessionClosed { state: s.state };
            return Ok(Decision::Answer(
                Intercept::Rejected {
                    effect_id: None,
                    reason,
                },
                writes,
            ));
        }
        Some(s) => s,
        None => new_session(call, view.now),
    };
    let signature = call.signature();

    if let Some(existing) = &view.existing {
        if let Some(key) = &call.idempotency_key
            && existing.signature != signature
        {
            return Err(Error::KeyReused {
                key: key.clone(),
                effect: existing.id,
            });
        }
        if let Some(decision) = decide_on_existing(call, &view, existing, &mut writes)? {
            return Ok(decision);
        }
    }

    // No usable earlier call: record a new effect, before anything runs.
    let mut effect = Effect {
        id: view.new_ids.effect,
        org: call.org.clone(),
        session: call.session.clone(),
        seq: session.next_seq,
        tool: call.tool.clone(),
        args: call.args.clone(),
        step: call.step,
        signature,
        idempotency_key: call.idempotency_key.clone(),
        tier: call.policy.tier,
        compensation: call.policy.compensation.clone(),
        state: EffectState::Pending,
        result: None,
        error: None,
        verdicts: None,
        approval: None,
        lease: None,
        lease_token: None,
        created_at: view.now,
        updated_at: view.now,
        completed_at: None,
        resolved_by: None,
    };
    session.next_seq += 1;
    session.updated_at = view.now;
    writes.push(Write::PutSession(session));

    if call.policy.needs_approval() {
        let approval = Approval {
            id: view.new_ids.approval,
            org: call.org.clone(),
            session: call.session.clone(),
            effect: effect.id,
            signature: effect.signature.clone(),
            state: ApprovalState::Pending,
            requested_at: view.now,
            expires_at: view.approval_expires_at,
            requested_by: call.caller.clone(),
            decided_by: None,
            decided_via: None,
            decided_at: None,
            reason: None,
        };
        effect.state = EffectState::AwaitingApproval;
        effect.approval = Some(approval.id);
        let answer = Intercept::AwaitingApproval {
            effect_id: effect.id,
            approval_id: approval.id,
            expires_at: approval.expires_at,
        };
        writes.push(Write::InsertEffect(effect));
        writes.push(Write::InsertApproval(approval));
        return Ok(Decision::Answer(answer, writes));
    }

    let answer = hand_over(&mut effect, &view);
    writes.push(Write::InsertEffect(effect));
    Ok(Decision::Answer(answer, writes))
}

/// How a read-only call that ran without an intent record ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadOutcome {
    /// The tool answered; this is its result.
    Answered(serde_json::Value),
    /// The tool failed; `details` is what it answered, when it did.
    Failed {
        error: String,
        details: Option<serde_json::Value>,
    },
    /// The upstream asked the client for input first (its `input_required` answer).
    InputRequired(serde_json::Value),
    /// It could not be sent (its upstream was unreachable); this says why.
    NotSent(String),
}

/// Records a read-only call after it ran, as one finished effect (`committed` or `failed`): a
/// read-only call changes nothing, so nothing about it can be in doubt and it needs no record
/// before it runs. `effect` is the id its caller chose when it sent the call at `started`.
/// Refused when the session no longer takes calls (nothing is recorded then; the caller refuses
/// the call).
pub fn record_read(
    call: &Call,
    effect: EffectId,
    started: Timestamp,
    session: Option<Session>,
    outcome: ReadOutcome,
    verdicts: Option<serde_json::Value>,
    now: Timestamp,
) -> Result<Vec<Write>, Rejection> {
    let ended = match outcome {
        ReadOutcome::Answered(result) => (EffectState::Committed, Some(result), None),
        ReadOutcome::Failed { error, details } => (EffectState::Failed, details, Some(error)),
        ReadOutcome::InputRequired(request) => (EffectState::InputRequired, Some(request), None),
        ReadOutcome::NotSent(why) => (EffectState::Rejected, None, Some(why)),
    };
    finished(call, effect, session, ended, verdicts, started, now)
}

/// How a call that is over ended: its state, result and error.
type Ended = (EffectState, Option<serde_json::Value>, Option<String>);

/// Records a call that is already over (refused before it was sent, or read-only and run) as one
/// effect at the next seq of its session, a new session if needed; refused when the session no
/// longer takes calls.
fn finished(
    call: &Call,
    id: EffectId,
    session: Option<Session>,
    (state, result, error): Ended,
    verdicts: Option<serde_json::Value>,
    started: Timestamp,
    now: Timestamp,
) -> Result<Vec<Write>, Rejection> {
    let mut session = match session {
        Some(s) if !s.belongs_to(call.caller.as_deref()) => {
            return Err(Rejection::SessionOfAnother);
        }
        Some(s) if s.state != SessionState::Active => {
            return Err(Rejection::SessionClosed { state: s.state });
        }
        Some(s) => s,
        None => new_session(call, now),
    };
    let effect = Effect {
        id,
        org: call.org.clone(),
        session: call.session.clone(),
        seq: session.next_seq,
        tool: call.tool.clone(),
        args: call.args.clone(),
        step: call.step,
        signature: call.signature(),
        idempotency_key: call.idempotency_key.clone(),
        tier: call.policy.tier,
        compensation: call.policy.compensation.clone(),
        state,
        result,
        error,
        verdicts,
        approval: None,
        lease: None,
        lease_token: None,
        created_at: started,
        updated_at: now,
        completed_at: Some(now),
        resolved_by: None,
    };
    session.next_seq += 1;
    session.updated_at = now;
    Ok(vec![
        Write::PutSession(session),
        Write::InsertEffect(effect),
    ])
}

/// Records a call refused before it was sent as effect `id`, `rejected` (the next seq of its
/// session, a new session if needed). `None` when the session no longer takes calls.
pub fn reject(
    call: &Call,
    id: EffectId,
    session: Option<Session>,
    reason: String,
    verdicts: Option<serde_json::Value>,
    now: Timestamp,
) -> Option<(EffectId, Vec<Write>)> {
    let ended = (EffectState::Rejected, None, Some(reason));
    let writes = finished(call, id, session, ended, verdicts, now, now).ok()?;
    Some((id, writes))
}

/// The decision when an earlier effect matches, or `None` when a new effect should be recorded.
fn decide_on_existing(
    call: &Call,
    view: &InterceptView,
    existing: &Effect,
    writes: &mut Vec<Write>,
) -> Result<Option<Decision>, Error> {
    // Without a key, read-only calls always run again (fresh data).
    if call.idempotency_key.is_none() && !existing.tier.replays() {
        return Ok(None);
    }
    match existing.state {
        EffectState::AwaitingApproval => {
            let Some(approval) = view.approval.clone() else {
                return Err(undolog_store::Error::Corrupt(format!(
                    "effect {} awaits an approval that does not exist",
                    existing.id
                ))
                .into());
            };
            if view.now < approval.expires_at {
                let intercept = Intercept::AwaitingApproval {
                    effect_id: existing.id,
                    approval_id: approval.id,
                    expires_at: approval.expires_at,
                };
                return answer(intercept, writes);
            }
            // Nobody decided in time: close the old request and ask again.
            let (effect, approval) = super::expire(existing.clone(), approval, view.now)?;
            writes.push(Write::UpdateEffect(effect));
            writes.push(Write::UpdateApproval(approval));
            Ok(None)
        }
        EffectState::Approved => {
            let mut effect = existing.clone();
            effect.state = effect.state.transition(EffectState::Pending)?;
            execute_under_lease(effect, view, writes)
        }
        // Withdrawn by its caller: nobody decided, so the call is decided afresh.
        EffectState::Denied
            if view
                .approval
                .as_ref()
                .is_some_and(|a| a.state == ApprovalState::Withdrawn) =>
        {
            Ok(None)
        }
        EffectState::Denied => {
            let reason = Rejection::Denied {
                approval_id: existing.approval,
                decided_by: view.approval.as_ref().and_then(|a| a.decided_by.clone()),
                reason: view.approval.as_ref().and_then(|a| a.reason.clone()),
            };
            answer(
                Intercept::Rejected {
                    effect_id: Some(existing.id),
                    reason,
                },
                writes,
            )
        }
        // Refused before it was sent, expired unanswered, or stopped to ask the client for
        // input (a round is never replayed): decide this call afresh.
        EffectState::Expired | EffectState::Rejected | EffectState::InputRequired => Ok(None),
        EffectState::Pending => {
            let lease_live = existing
                .lease
                .as_ref()
                .is_some_and(|l| view.now < l.expires_at);
            if lease_live {
                return Ok(Some(Decision::Wait(existing.id)));
            }
            if call.policy.idempotent {
                // Running it again is harmless: take over the effect under a new lease.
                return execute_under_lease(existing.clone(), view, writes);
            }
            let reason = Rejection::InDoubt;
            answer(
                Intercept::Rejected {
                    effect_id: Some(existing.id),
                    reason,
                },
                writes,
            )
        }
        // The first outcome is kept, failures included (as with idempotency keys): the caller
        // that ran it and every identical caller get the same answer.
        EffectState::Failed => answer(
            Intercept::Failed {
                effect_id: existing.id,
                error: existing.error.clone().unwrap_or_default(),
                result: existing.result.clone(),
            },
            writes,
        ),
        EffectState::Committed
        | EffectState::Compensating
        | EffectState::Compensated
        | EffectState::CompensationFailed
        | EffectState::CompensationInDoubt => {
            let result = existing.result.clone().unwrap_or(serde_json::Value::Null);
            answer(
                Intercept::Replay {
                    effect_id: existing.id,
                    result,
                },
                writes,
            )
        }
    }
}

/// Hands an existing effect to this executor: it runs the tool under a fresh lease.
fn execute_under_lease(
    mut effect: Effect,
    view: &InterceptView,
    writes: &mut Vec<Write>,
) -> Result<Option<Decision>, Error> {
    effect.updated_at = view.now;
    let intercept = hand_over(&mut effect, view);
    writes.push(Write::UpdateEffect(effect));
    answer(intercept, writes)
}

/// Makes this executor the effect's owner: its lease, and the digest of the token that alone
/// settles the call from now on (an earlier owner's token no longer does).
fn hand_over(effect: &mut Effect, view: &InterceptView) -> Intercept {
    effect.lease = Some(view.lease.clone());
    effect.lease_token = Some(view.token.digest());
    Intercept::Execute {
        effect_id: effect.id,
        lease_expires_at: view.lease.expires_at,
        lease_token: view.token.clone(),
    }
}

fn answer(intercept: Intercept, writes: &mut Vec<Write>) -> Result<Option<Decision>, Error> {
    Ok(Some(Decision::Answer(intercept, std::mem::take(writes))))
}

fn new_session(call: &Call, now: Timestamp) -> Session {
    Session {
        org: call.org.clone(),
        id: call.session.clone(),
        state: SessionState::Active,
        next_seq: 0,
        failed_effect: None,
        undo_claim: None,
        run_of: None,
        opened_by: call.caller.clone(),
        created_at: now,
        updated_at: now,
    }
}
