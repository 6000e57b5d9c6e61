//! The state machines allow exactly the listed transitions; anything else is an error.

use undolog_types::{ApprovalState, EffectState, SessionState};

#[test]
fn effect_lifecycle_follows_the_design() {
    use EffectState::*;
    let allowed = [
        (AwaitingApproval, Approved),
        (AwaitingApproval, Denied),
        (AwaitingApproval, Expired),
        (Approved, Pending),
        (Pending, Committed),
        (Pending, Failed),
        (Pending, InputRequired),
        // Not sent: its upstream could not be reached.
        (Pending, Rejected),
        (Committed, Compensating),
        (Compensating, Compensated),
        (Compensating, CompensationFailed),
        // Its answer was lost: it may have run, and a person says whether it did.
        (Compensating, CompensationInDoubt),
        (CompensationInDoubt, Compensated),
        (CompensationInDoubt, CompensationFailed),
        (CompensationFailed, Compensating),
    ];
    for &from in EffectState::ALL {
        for &to in EffectState::ALL {
            let expected = allowed.contains(&(from, to));
            assert_eq!(from.transition(to).is_ok(), expected, "{from} -> {to}");
        }
    }
    let err = Committed.transition(Pending).unwrap_err();
    assert_eq!(
        err.to_string(),
        "an effect cannot go from committed to pending"
    );
    assert!(Failed.is_terminal() && Denied.is_terminal() && Compensated.is_terminal());
    assert!(Rejected.is_terminal() && InputRequired.is_terminal());
    assert!(!Pending.is_terminal() && !CompensationInDoubt.is_terminal());
}

#[test]
fn session_lifecycle_follows_the_design() {
    use SessionState::*;
    let allowed = [
        (Active, Completed),
        (Active, Failed),
        (Failed, Compensating),
        (Completed, Compensating),
        (Compensating, Compensated),
        (Compensating, CompensationFailed),
        (CompensationFailed, Compensating),
    ];
    for &from in SessionState::ALL {
        for &to in SessionState::ALL {
            assert_eq!(
                from.can_become(to),
                allowed.contains(&(from, to)),
                "{from} -> {to}"
            );
        }
    }
}

#[test]
fn approvals_are_decided_once() {
    use ApprovalState::*;
    for &to in [Approved, Denied, Expired, Withdrawn].iter() {
        assert!(Pending.transition(to).is_ok());
        for &again in ApprovalState::ALL {
            assert!(to.transition(again).is_err(), "{to} -> {again}");
        }
    }
}

#[test]
fn states_parse_from_their_text() {
    for &state in EffectState::ALL {
        assert_eq!(state.as_str().parse::<EffectState>().unwrap(), state);
    }
    let err = "running".parse::<EffectState>().unwrap_err().to_string();
    assert!(err.contains("awaiting_approval"), "{err}");
}

#[test]
fn each_role_includes_exactly_the_roles_below_it() {
    use undolog_types::Role::{self, *};
    let table = [
        (Agent, [true, false, false]),
        (Approver, [true, true, false]),
        (Admin, [true, true, true]),
    ];
    for (role, expected) in table {
        for (needed, allowed) in [Agent, Approver, Admin].into_iter().zip(expected) {
            assert_eq!(role.includes(needed), allowed, "{role} includes {needed}");
        }
    }
    assert_eq!("approver".parse::<Role>().unwrap(), Approver);
    let err = "root".parse::<Role>().unwrap_err().to_string();
    assert!(err.contains("agent approver admin"), "{err}");
}
