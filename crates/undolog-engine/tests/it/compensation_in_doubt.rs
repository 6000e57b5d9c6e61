//! What may have run is never run again without a person. A compensator says how it failed:
//! it did not run (tried again, while tries are left) or it may have run (its answer was lost:
//! never retried). The second leaves the step `compensation_in_doubt`; no undo goes on until an
//! admin records whether it ran.

use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::json;
use undolog_engine::{
    Compensated, CompensationFailure, Compensator, Error, Resolution, StepOutcome,
    core::retry_compensation,
};
use undolog_store::Effect;
use undolog_types::{EffectId, EffectState, SessionState};

use crate::*;

#[test]
fn only_a_compensation_that_did_not_run_is_tried_again_and_only_while_tries_are_left() {
    let not_run = CompensationFailure::NotRun("the bank refused".into());
    let may_have_run = CompensationFailure::MayHaveRun("timed out after sending".into());
    // (failure, attempts so far, attempts allowed, tried again)
    let rows = [
        (&not_run, 1, 3, true),
        (&not_run, 2, 3, true),
        (&not_run, 3, 3, false),
        (&not_run, 1, 0, false),
        (&may_have_run, 1, 3, false),
        (&may_have_run, 1, 100, false),
    ];
    for (failure, attempts, allowed, again) in rows {
        assert_eq!(
            retry_compensation(failure, attempts, allowed),
            again,
            "{failure:?} after {attempts} of {allowed}"
        );
    }
}

/// Refunds, then loses its answer once (as a refund that outlasts the gateway's timeout does);
/// counts every refund it made.
#[derive(Default)]
struct LosesItsAnswer {
    refunds: Mutex<Vec<EffectId>>,
    lose: Mutex<Option<EffectId>>,
}

#[async_trait]
impl Compensator for LosesItsAnswer {
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, CompensationFailure> {
        self.refunds.lock().unwrap().push(effect.id);
        if *self.lose.lock().unwrap() == Some(effect.id) {
            return Err(CompensationFailure::MayHaveRun(
                "the upstream took longer than 3 s to answer".into(),
            ));
        }
        Ok(Compensated::AlreadyUndone)
    }
}

#[tokio::test]
async fn a_compensation_whose_answer_was_lost_runs_once_and_waits_for_an_admin() {
    let (engine, _) = engine().await;
    let older = run(&engine, transfer("s1", 1), json!("ok")).await;
    let lost = run(&engine, transfer("s1", 2), json!("ok")).await;
    let compensator = LosesItsAnswer {
        lose: Mutex::new(Some(lost)),
        ..LosesItsAnswer::default()
    };

    let report = engine
        .undo(&org(), &session("s1"), &compensator)
        .await
        .unwrap();
    assert_eq!(report.state, SessionState::CompensationFailed);
    let step = report.steps.last().unwrap();
    assert_eq!((step.effect_id, step.attempts), (lost, 1), "{step:?}");
    assert!(
        matches!(step.outcome, StepOutcome::InDoubt { .. }),
        "{step:?}"
    );
    assert_eq!(
        *compensator.refunds.lock().unwrap(),
        vec![lost],
        "one refund"
    );
    let effect = engine.effect(&org(), lost).await.unwrap();
    assert_eq!(effect.state, EffectState::CompensationInDoubt);
    assert!(effect.error.unwrap().contains("resolve"), "says what to do");
    let listed = engine.in_doubt(&org()).await.unwrap();
    assert_eq!(listed.iter().map(|e| e.id).collect::<Vec<_>>(), vec![lost]);

    // A second undo runs nothing until a person says what happened.
    let again = engine.undo(&org(), &session("s1"), &compensator).await;
    assert!(
        matches!(&again, Err(Error::CompensationInDoubt { effect, .. }) if *effect == lost),
        "{again:?}"
    );
    assert_eq!(
        compensator.refunds.lock().unwrap().len(),
        1,
        "still one refund"
    );

    // The verdict of a forward call does not fit; "it ran" does.
    let wrong =
        (engine.resolve_in_doubt(&org(), lost, Resolution::Committed(json!({})), "ops")).await;
    assert!(
        matches!(wrong, Err(Error::WrongVerdict { .. })),
        "{wrong:?}"
    );
    (engine.resolve_in_doubt(&org(), lost, Resolution::Compensated, "ops"))
        .await
        .unwrap();
    let resolved = engine.effect(&org(), lost).await.unwrap();
    assert_eq!(
        (resolved.state, resolved.resolved_by.as_deref()),
        (EffectState::Compensated, Some("ops"))
    );
    assert!(engine.in_doubt(&org()).await.unwrap().is_empty());

    // The undo goes on past it, and never refunds it again.
    let finished = engine
        .undo(&org(), &session("s1"), &compensator)
        .await
        .unwrap();
    assert_eq!(finished.state, SessionState::Compensated);
    assert_eq!(*compensator.refunds.lock().unwrap(), vec![lost, older]);
}

#[tokio::test]
async fn a_compensation_found_not_to_have_run_is_tried_by_the_next_undo() {
    let (engine, _) = engine().await;
    let lost = run(&engine, transfer("s1", 2), json!("ok")).await;
    let compensator = LosesItsAnswer {
        lose: Mutex::new(Some(lost)),
        ..LosesItsAnswer::default()
    };
    engine
        .undo(&org(), &session("s1"), &compensator)
        .await
        .unwrap();
    let verdict = Resolution::NotCompensated("the bank shows no refund".into());
    (engine.resolve_in_doubt(&org(), lost, verdict, "ops"))
        .await
        .unwrap();
    assert_eq!(
        engine.effect(&org(), lost).await.unwrap().state,
        EffectState::CompensationFailed
    );
    *compensator.lose.lock().unwrap() = None;
    let report = engine
        .undo(&org(), &session("s1"), &compensator)
        .await
        .unwrap();
    assert_eq!(report.state, SessionState::Compensated);
    assert_eq!(compensator.refunds.lock().unwrap().len(), 2);
}
