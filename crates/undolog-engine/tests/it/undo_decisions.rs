//! The undo's decisions in the sans-IO core, as tables: who may start, what runs next, and how a
//! step ends. No store, no clock: records in, records and writes out.

use serde_json::json;
use undolog_engine::{
    Error,
    core::{self, StepResult, UndoNext, UndoStart, UndoView, Write},
};
use undolog_store::{Effect, Lease, Session};
use undolog_types::{EffectId, EffectState, SessionState, Timestamp};

use crate::*;

const NOW: Timestamp = Timestamp(10_000);

fn claim(holder: &str, expires_at: i64) -> Lease {
    Lease {
        holder: holder.into(),
        expires_at: Timestamp(expires_at),
    }
}

fn record(state: EffectState, seq: i64) -> Effect {
    let call = transfer("s1", seq);
    Effect {
        id: EffectId::generate(),
        org: org(),
        session: session("s1"),
        seq,
        tool: call.tool.clone(),
        args: call.args.clone(),
        step: None,
        signature: call.signature(),
        idempotency_key: None,
        tier: call.policy.tier,
        compensation: call.policy.compensation.clone(),
        state,
        result: Some(json!("ok")),
        error: None,
        verdicts: None,
        approval: None,
        lease: None,
        lease_token: None,
        created_at: Timestamp(seq),
        updated_at: Timestamp(seq),
        completed_at: Some(Timestamp(seq)),
        resolved_by: None,
    }
}

/// A session in `state` with `claim`, whose effects (all on the undo stack, oldest first) are
/// in `states`.
fn view(state: SessionState, claim: Option<Lease>, states: &[EffectState]) -> UndoView {
    let effects: Vec<Effect> = states
        .iter()
        .enumerate()
        .map(|(i, s)| record(*s, i as i64))
        .collect();
    UndoView {
        session: Session {
            org: org(),
            id: session("s1"),
            state,
            next_seq: effects.len() as i64,
            failed_effect: None,
            undo_claim: claim,
            run_of: None,
            opened_by: None,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        },
        undo_stack: effects.iter().map(|e| e.id).collect(),
        effects,
        now: NOW,
    }
}

fn session_written(writes: &[Write]) -> Option<&Session> {
    writes.iter().find_map(|w| match w {
        Write::PutSession(s) => Some(s),
        _ => None,
    })
}

#[test]
fn who_may_start_an_undo() {
    use EffectState::*;
    use SessionState as S;
    #[derive(Debug, PartialEq)]
    enum Expect {
        Run(usize),
        Running,
        Interrupted,
        Busy,
        NothingToDo,
    }
    let cases = [
        (S::Active, None, vec![Committed], Expect::Run(1)),
        (
            S::Completed,
            None,
            vec![Committed, Committed],
            Expect::Run(2),
        ),
        (S::Active, None, vec![Pending, Committed], Expect::Busy),
        (S::Active, None, vec![Approved], Expect::Busy),
        (
            S::Compensating,
            Some(claim("other", 20_000)),
            vec![Committed],
            Expect::Running,
        ),
        // Its claim ran out with no step cut off: taken over where it stopped.
        (
            S::Compensating,
            Some(claim("other", 9_000)),
            vec![Compensated, Committed],
            Expect::Run(1),
        ),
        (
            S::Compensating,
            Some(claim("other", 9_000)),
            vec![Committed, Compensating],
            Expect::Interrupted,
        ),
        (
            S::Compensating,
            None,
            vec![Compensating],
            Expect::Interrupted,
        ),
        (
            S::CompensationFailed,
            None,
            vec![Committed, CompensationFailed],
            Expect::Run(2),
        ),
        (S::Compensated, None, vec![Compensated], Expect::NothingToDo),
    ];
    for (state, held, effects, expected) in cases {
        let case = format!("{state} {held:?} {effects:?}");
        let got = core::start_undo(view(state, held, &effects), claim("me", 40_000));
        let seen = match got {
            Ok(UndoStart::Run { plan, writes }) => {
                let s = session_written(&writes).unwrap();
                assert_eq!(s.state, S::Compensating, "{case}");
                assert_eq!(s.undo_claim, Some(claim("me", 40_000)), "{case}");
                Expect::Run(plan.steps.len())
            }
            Ok(UndoStart::Interrupted { writes, effect, .. }) => {
                let s = session_written(&writes).unwrap();
                assert_eq!(
                    (s.state, s.failed_effect),
                    (S::CompensationFailed, Some(effect)),
                    "{case}"
                );
                assert_eq!(s.undo_claim, None, "{case}");
                Expect::Interrupted
            }
            Err(Error::UndoRunning { until, .. }) => {
                assert_eq!(until, Timestamp(20_000), "{case}");
                Expect::Running
            }
            Err(Error::SessionBusy { .. }) => Expect::Busy,
            Err(Error::NothingToUndo { .. }) => Expect::NothingToDo,
            Err(other) => panic!("{case}: {other:?}"),
        };
        assert_eq!(seen, expected, "{case}");
    }
}

#[test]
fn only_the_claimant_runs_steps_and_the_last_one_closes_the_session() {
    use EffectState::*;
    let mine = Some(claim("me", 20_000));
    // Another claimant, or no undo at all, is refused.
    let err = core::next_step(
        view(
            SessionState::Compensating,
            Some(claim("other", 20_000)),
            &[Committed],
        ),
        "me",
        Timestamp(50_000),
    )
    .unwrap_err();
    assert!(matches!(err, Error::UndoLost { .. }), "{err:?}");
    let err = core::next_step(
        view(SessionState::Failed, None, &[Committed]),
        "me",
        Timestamp(50_000),
    )
    .unwrap_err();
    assert!(matches!(err, Error::NotUndoing { .. }), "{err:?}");

    // The newest step first, marked as ours, with the claim renewed.
    let v = view(
        SessionState::Compensating,
        mine.clone(),
        &[Committed, Committed],
    );
    let newest = v.effects[1].id;
    let UndoNext::Compensate { effect, writes } =
        core::next_step(v, "me", Timestamp(50_000)).unwrap()
    else {
        panic!("a step is left");
    };
    assert_eq!((effect.id, effect.state), (newest, Compensating));
    assert_eq!(effect.lease, Some(claim("me", 50_000)));
    assert_eq!(
        session_written(&writes).unwrap().undo_claim,
        Some(claim("me", 50_000))
    );

    // Nothing left: compensated, the claim released.
    let v = view(SessionState::Compensating, mine, &[Compensated]);
    let UndoNext::Done { writes } = core::next_step(v, "me", Timestamp(50_000)).unwrap() else {
        panic!("nothing is left");
    };
    let s = session_written(&writes).unwrap();
    assert_eq!(
        (s.state, s.undo_claim.clone()),
        (SessionState::Compensated, None)
    );
}

#[test]
fn how_a_step_ends() {
    use EffectState::*;
    let cases = [
        (StepResult::Compensated, Compensated, None),
        (
            StepResult::Failed {
                error: "bank down".into(),
            },
            CompensationFailed,
            Some(SessionState::CompensationFailed),
        ),
    ];
    for (result, effect_state, ended) in cases {
        let v = view(
            SessionState::Compensating,
            Some(claim("me", 20_000)),
            &[Committed, Compensating],
        );
        let step = v.effects[1].id;
        // Only a step that was begun can end.
        let err = core::finish_step(v.clone(), "me", v.effects[0].id, &result).unwrap_err();
        assert!(matches!(err, Error::StepNotBegun(_)), "{err:?}");
        let recorded = core::finish_step(v, "me", step, &result).unwrap();
        assert_eq!(recorded.session_ended, ended, "{result:?}");
        let Write::UpdateEffect(effect) = &recorded.writes[0] else {
            panic!("the effect is written first");
        };
        assert_eq!((effect.state, effect.lease.clone()), (effect_state, None));
        if let Some(s) = session_written(&recorded.writes) {
            assert_eq!(
                (s.state, s.failed_effect, s.undo_claim.clone()),
                (SessionState::CompensationFailed, Some(step), None)
            );
        }
    }
}
