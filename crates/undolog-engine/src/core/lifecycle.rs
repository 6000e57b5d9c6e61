//! Completing effects and deciding approvals.
//!
//! A call is settled (committed, failed, renewed, not sent, awaiting input, in doubt) only by its
//! owner: whoever presents the lease token its `Execute` answer handed out. Every surface settles
//! through these functions, so none can let anyone else do it, whatever the credential's role.
//! Only an operator's verdict on a call in doubt needs no token: the owner is gone by then.

use serde_json::Value;
use undolog_store::{Approval, Effect, Lease};
use undolog_types::{ApprovalState, EffectState, LeaseToken, Tier, Timestamp};

use super::Write;
use crate::Error;

/// An operator's verdict on an in-doubt effect.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// The tool did run; this is its result.
    Committed(Value),
    /// The tool did not run (or failed); this says why.
    Failed(String),
    /// A compensation in doubt did run.
    Compensated,
    /// A compensation in doubt did not run; this says why. An undo tries it again.
    NotCompensated(String),
}

/// Refuses anyone but the call's owner: the token must be the one its `Execute` answer gave,
/// and no other executor may have taken the call over since (that gave it a new token). A call
/// recorded before tokens existed has none, so nobody can settle it: it ends in doubt.
fn ensure_owner(effect: &Effect, token: &LeaseToken) -> Result<(), Error> {
    match &effect.lease_token {
        Some(digest) if digest.matches(token) => Ok(()),
        _ => Err(Error::NotOwner(effect.id)),
    }
}

/// Records the tool's result; a compensable effect goes onto its session's undo stack.
/// `verdicts` (what the interceptor chains decided) is kept apart, when given.
pub fn commit(
    effect: Effect,
    token: &LeaseToken,
    result: Value,
    verdicts: Option<Value>,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    ensure_owner(&effect, token)?;
    record_result(effect, result, verdicts, now)
}

fn record_result(
    mut effect: Effect,
    result: Value,
    verdicts: Option<Value>,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    effect.result = Some(result);
    let effect = end(effect, EffectState::Committed, verdicts, now)?;
    let mut writes = Vec::with_capacity(2);
    if effect.tier == Tier::Compensable && effect.compensation.is_some() {
        writes.push(Write::PushUndo {
            session: effect.session.clone(),
            effect: effect.id,
            at: now,
        });
    }
    writes.insert(0, Write::UpdateEffect(effect));
    Ok(writes)
}

/// Records that the tool reported failure; `details` (what the tool answered, notes on the call)
/// is kept as the effect's result, and `verdicts` apart, when given.
pub fn fail(
    effect: Effect,
    token: &LeaseToken,
    error: String,
    details: Option<Value>,
    verdicts: Option<Value>,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    ensure_owner(&effect, token)?;
    record_failure(effect, error, details, verdicts, now)
}

fn record_failure(
    mut effect: Effect,
    error: String,
    details: Option<Value>,
    verdicts: Option<Value>,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    effect.error = Some(error);
    if details.is_some() {
        effect.result = details;
    }
    Ok(vec![Write::UpdateEffect(end(
        effect,
        EffectState::Failed,
        verdicts,
        now,
    )?)])
}

/// The upstream asked the client for input before it can finish: the effect is not done (so
/// never undone), and `request` (the upstream's `input_required` answer) is kept as its result.
pub fn await_input(
    mut effect: Effect,
    token: &LeaseToken,
    request: Value,
    verdicts: Option<Value>,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    ensure_owner(&effect, token)?;
    effect.result = Some(request);
    Ok(vec![Write::UpdateEffect(end(
        effect,
        EffectState::InputRequired,
        verdicts,
        now,
    )?)])
}

/// The call could not be sent (its upstream was unreachable): the tool never ran, the effect is
/// `rejected` with `reason`, and an identical call later is decided afresh.
pub fn not_sent(
    mut effect: Effect,
    token: &LeaseToken,
    reason: String,
    verdicts: Option<Value>,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    ensure_owner(&effect, token)?;
    effect.error = Some(reason);
    Ok(vec![Write::UpdateEffect(end(
        effect,
        EffectState::Rejected,
        verdicts,
        now,
    )?)])
}

/// Ends a pending effect in `state`: no lease any more, completed now, and what the interceptor
/// chains decided kept when given. One that has ended already is refused as such.
fn end(
    mut effect: Effect,
    state: EffectState,
    verdicts: Option<Value>,
    now: Timestamp,
) -> Result<Effect, Error> {
    ensure_pending(&effect)?;
    effect.state = effect.state.transition(state)?;
    if verdicts.is_some() {
        effect.verdicts = verdicts;
    }
    effect.lease = None;
    effect.updated_at = now;
    effect.completed_at = Some(now);
    Ok(effect)
}

/// The executor lost the answer of a call it sent: the effect stays pending, its lease ends now
/// (so it is in doubt at once), and `error` says what is known.
pub fn doubt(
    mut effect: Effect,
    token: &LeaseToken,
    error: String,
    verdicts: Option<Value>,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    ensure_owner(&effect, token)?;
    ensure_pending(&effect)?;
    if let Some(lease) = effect.lease.as_mut() {
        lease.expires_at = now;
    }
    effect.error = Some(error);
    if verdicts.is_some() {
        effect.verdicts = verdicts;
    }
    effect.updated_at = now;
    Ok(vec![Write::UpdateEffect(effect)])
}

/// The owner's tool is still running: its lease goes on as `lease` says.
pub fn renew_lease(effect: Effect, token: &LeaseToken, lease: Lease) -> Result<Vec<Write>, Error> {
    ensure_owner(&effect, token)?;
    ensure_pending(&effect)?;
    let mut effect = effect;
    effect.lease = Some(lease);
    Ok(vec![Write::UpdateEffect(effect)])
}

/// Records an operator's verdict on an in-doubt effect: whether the tool did run, and who said so.
pub fn resolve_in_doubt(
    mut effect: Effect,
    resolution: Resolution,
    by: String,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    if effect.state == EffectState::CompensationInDoubt {
        return resolve_compensation(effect, resolution, by, now);
    }
    let in_doubt = effect.state == EffectState::Pending
        && effect
            .lease
            .as_ref()
            .is_none_or(|lease| lease.expires_at <= now);
    if !in_doubt {
        return Err(Error::NotInDoubt(effect.id));
    }
    effect.resolved_by = Some(by);
    match resolution {
        Resolution::Committed(result) => record_result(effect, result, None, now),
        Resolution::Failed(reason) => record_failure(effect, reason, None, None, now),
        Resolution::Compensated | Resolution::NotCompensated(_) => Err(Error::WrongVerdict {
            effect: effect.id,
            expected: "the call is in doubt, not a compensation: record whether it ran with \
                       committed (and its result) or failed (and why)",
        }),
    }
}

/// An operator's verdict on a compensation in doubt: it ran (`Committed`: the effect is
/// compensated, and an undo goes on past it), or it did not (`Failed`: compensation_failed, so
/// the next undo tries it again). The call's own result is kept either way.
fn resolve_compensation(
    mut effect: Effect,
    resolution: Resolution,
    by: String,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    let (to, error) = match resolution {
        Resolution::Compensated => (EffectState::Compensated, None),
        Resolution::NotCompensated(reason) => (
            EffectState::CompensationFailed,
            Some(format!("the compensation did not run: {reason}")),
        ),
        Resolution::Committed(_) | Resolution::Failed(_) => {
            return Err(Error::WrongVerdict {
                effect: effect.id,
                expected: "its compensation is in doubt: record whether it ran with \
                           compensated or not_compensated",
            });
        }
    };
    effect.state = effect.state.transition(to)?;
    effect.error = error;
    effect.resolved_by = Some(by);
    effect.updated_at = now;
    Ok(vec![Write::UpdateEffect(effect)])
}

fn ensure_pending(effect: &Effect) -> Result<(), Error> {
    if effect.state == EffectState::Pending {
        Ok(())
    } else {
        Err(Error::NotPending {
            effect: effect.id,
            state: effect.state,
        })
    }
}

/// Who decides an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decider {
    /// The principal, recorded as the approval's `decided_by` (`api-key:ID`, a token's subject).
    pub id: String,
    /// May decide a call this same principal made: a single-person setup that allows it, or the
    /// one local operator of a gateway without keys. Otherwise four eyes: never one's own call.
    pub may_decide_own: bool,
    /// Where the decision is made, recorded as the approval's `decided_via`: `api`, or
    /// `link:CHANNEL` for a signed link a notification carried.
    pub via: String,
}

/// A person's yes. The caller has checked that the request has not expired.
pub fn approve(
    effect: Effect,
    approval: Approval,
    by: &Decider,
    reason: Option<String>,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    let decided = decide(
        effect,
        approval,
        (EffectState::Approved, ApprovalState::Approved),
        Some(by),
        reason,
        now,
    )?;
    Ok(as_writes(decided))
}

/// A person's no, with the reason the agent will see.
pub fn deny(
    effect: Effect,
    approval: Approval,
    by: &Decider,
    reason: String,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    let decided = decide(
        effect,
        approval,
        (EffectState::Denied, ApprovalState::Denied),
        Some(by),
        Some(reason),
        now,
    )?;
    Ok(as_writes(decided))
}

/// The caller takes its request back (it cancelled the task waiting on it): nobody is asked
/// any more, and the call never runs. Not a decision, so four eyes do not apply.
pub fn withdraw(
    effect: Effect,
    approval: Approval,
    by: String,
    now: Timestamp,
) -> Result<Vec<Write>, Error> {
    let withdrawn = decide(
        effect,
        approval,
        (EffectState::Denied, ApprovalState::Withdrawn),
        None,
        Some(format!("withdrawn by {by}: the caller cancelled the call")),
        now,
    )?;
    let (effect, mut approval) = withdrawn;
    approval.decided_by = Some(by);
    Ok(as_writes((effect, approval)))
}

/// Nobody decided in time.
pub fn expire(
    effect: Effect,
    approval: Approval,
    now: Timestamp,
) -> Result<(Effect, Approval), Error> {
    decide(
        effect,
        approval,
        (EffectState::Expired, ApprovalState::Expired),
        None,
        None,
        now,
    )
}

fn as_writes((effect, approval): (Effect, Approval)) -> Vec<Write> {
    vec![Write::UpdateEffect(effect), Write::UpdateApproval(approval)]
}

fn decide(
    mut effect: Effect,
    mut approval: Approval,
    (effect_to, approval_to): (EffectState, ApprovalState),
    by: Option<&Decider>,
    reason: Option<String>,
    now: Timestamp,
) -> Result<(Effect, Approval), Error> {
    if approval.state != ApprovalState::Pending {
        return Err(Error::AlreadyDecided {
            approval: approval.id,
            state: approval.state,
        });
    }
    if let Some(by) = by
        && !by.may_decide_own
        && approval.requested_by.as_deref() == Some(by.id.as_str())
    {
        return Err(Error::OwnCall {
            approval: approval.id,
            principal: by.id.clone(),
        });
    }
    approval.state = approval.state.transition(approval_to)?;
    approval.decided_by = by.map(|by| by.id.clone());
    approval.decided_via = by.map(|by| by.via.clone());
    approval.decided_at = Some(now);
    approval.reason = reason;
    effect.state = effect.state.transition(effect_to)?;
    effect.updated_at = now;
    Ok((effect, approval))
}
