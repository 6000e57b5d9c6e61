//! The three state machines of the log. A transition not listed here is an
//! [`IllegalTransition`], never a panic.

use crate::strings::string_enum;

/// An attempted state change that the state machine does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{machine} cannot go from {from} to {to}")]
pub struct IllegalTransition {
    pub machine: &'static str,
    pub from: &'static str,
    pub to: &'static str,
}

macro_rules! transitions {
    ($name:ident, $machine:literal, |$from:ident, $to:ident| $allowed:expr) => {
        impl $name {
            /// Whether the machine may go from `self` to `to`.
            pub fn can_become(self, to: $name) -> bool {
                let ($from, $to) = (self, to);
                $allowed
            }

            /// The new state, or the error that names the illegal step.
            pub fn transition(self, to: $name) -> Result<$name, IllegalTransition> {
                if self.can_become(to) {
                    Ok(to)
                } else {
                    Err(IllegalTransition {
                        machine: $machine,
                        from: self.as_str(),
                        to: to.as_str(),
                    })
                }
            }

            /// Whether no transition leaves this state.
            pub fn is_terminal(self) -> bool {
                $name::ALL.iter().all(|&to| !self.can_become(to))
            }
        }
    };
}

string_enum!(
    /// Where one tool call is in its life.
    EffectState, "effect state" {
        /// Held until a person approves or denies it.
        AwaitingApproval => "awaiting_approval",
        /// Approved, not yet started.
        Approved => "approved",
        /// A person said no; the tool never runs.
        Denied => "denied",
        /// Nobody decided in time; the tool never runs.
        Expired => "expired",
        /// Written before the tool runs; the executor holds a lease on it.
        Pending => "pending",
        /// The tool ran and its result is recorded.
        Committed => "committed",
        /// The tool ran and reported failure.
        Failed => "failed",
        /// The upstream asked the client for input before it can finish (a 2026-07-28
        /// `input_required` round): not done, so never undone; the client's answer is a call
        /// of its own.
        InputRequired => "input_required",
        /// Its compensation is running.
        Compensating => "compensating",
        /// Its compensation succeeded (or found nothing to undo).
        Compensated => "compensated",
        /// Its compensation failed; a person has to look.
        CompensationFailed => "compensation_failed",
        /// Its compensation may or may not have run (its answer was lost: a timeout after it was
        /// sent, a broken connection). It is never run again on a guess: an admin records
        /// whether it ran (compensated) or not (compensation_failed, which an undo retries).
        CompensationInDoubt => "compensation_in_doubt",
        /// Refused before it was sent (an interceptor blocked it, or its upstream could not be
        /// reached); the tool never ran, and an identical call is decided afresh.
        Rejected => "rejected",
    }
);

transitions!(EffectState, "an effect", |from, to| {
    use EffectState::*;
    matches!(
        (from, to),
        (AwaitingApproval, Approved | Denied | Expired)
            | (Approved, Pending)
            // Rejected: it could not be sent (its upstream was unreachable), so it never ran.
            | (Pending, Committed | Failed | InputRequired | Rejected)
            | (Committed, Compensating)
            | (Compensating, Compensated | CompensationFailed | CompensationInDoubt)
            // Undo retried after a person looked at the failure.
            | (CompensationFailed, Compensating)
            // A person's verdict on a compensation in doubt: it ran, or it did not.
            | (CompensationInDoubt, Compensated | CompensationFailed)
    )
});

string_enum!(
    /// Where an agent session is in its life.
    SessionState, "session state" {
        /// Taking calls.
        Active => "active",
        /// Closed normally.
        Completed => "completed",
        /// Closed because something went wrong; may be undone.
        Failed => "failed",
        /// Its compensations are running.
        Compensating => "compensating",
        /// Every compensable effect was undone.
        Compensated => "compensated",
        /// A compensation failed; the failing step is kept for a person.
        CompensationFailed => "compensation_failed",
    }
);

transitions!(SessionState, "a session", |from, to| {
    use SessionState::*;
    matches!(
        (from, to),
        (Active, Completed | Failed)
            | (Failed | Completed, Compensating)
            | (Compensating, Compensated | CompensationFailed)
            | (CompensationFailed, Compensating)
    )
});

string_enum!(
    /// Where a request for a person's decision is.
    ApprovalState, "approval state" {
        Pending => "pending",
        Approved => "approved",
        Denied => "denied",
        Expired => "expired",
        /// The caller took the request back (it cancelled its task); nobody is asked any more.
        Withdrawn => "withdrawn",
    }
);

transitions!(ApprovalState, "an approval", |from, to| {
    use ApprovalState::*;
    matches!(
        (from, to),
        (Pending, Approved | Denied | Expired | Withdrawn)
    )
});
