//! Undo run by the caller (the SDK's local compensations): begin, then one recorded step at a
//! time, newest first; a failure stops the saga for a person, and beginning again resumes.

use serde_json::json;
use undolog_engine::{Compensated, Error, Event, Intercept, StepOutcome};
use undolog_types::{EffectState, SessionState};

use crate::*;

fn done(result: serde_json::Value) -> StepOutcome {
    StepOutcome::Compensated {
        detail: Compensated::Done { result },
    }
}

fn failed(error: &str) -> StepOutcome {
    StepOutcome::Failed {
        error: error.into(),
    }
}

#[tokio::test]
async fn begin_plans_newest_first_and_the_last_recorded_step_closes_the_session() {
    let (engine, _) = engine().await;
    let one = run(&engine, transfer("s1", 1), json!({"moved": 1})).await;
    let two = run(&engine, transfer("s1", 2), json!({"moved": 2})).await;
    run(&engine, get_balance("s1"), json!(5)).await;

    let plan = engine.begin_undo(&org(), &session("s1")).await.unwrap();
    let claim = plan.claim.as_str();
    assert_eq!(plan.state, SessionState::Compensating);
    let ids: Vec<_> = plan.steps.iter().map(|s| s.effect_id).collect();
    assert_eq!(ids, vec![two, one]);
    assert_eq!(plan.steps[0].tool, "transfer");
    assert_eq!(plan.steps[0].args["amount"], 2);
    assert_eq!(plan.steps[0].result, Some(json!({"moved": 2})));
    assert!(plan.steps[0].compensation.is_some());

    let progress = engine
        .record_undo_step(
            &org(),
            &session("s1"),
            claim,
            two,
            done(json!("refunded 2")),
        )
        .await
        .unwrap();
    assert_eq!(progress.state, SessionState::Compensating);
    assert_eq!(progress.remaining, vec![one]);
    let progress = engine
        .record_undo_step(
            &org(),
            &session("s1"),
            claim,
            one,
            StepOutcome::Compensated {
                detail: Compensated::AlreadyUndone,
            },
        )
        .await
        .unwrap();
    assert_eq!(progress.state, SessionState::Compensated);
    assert!(progress.remaining.is_empty());
    for id in [one, two] {
        assert_eq!(
            engine.effect(&org(), id).await.unwrap().state,
            EffectState::Compensated
        );
    }
    assert_eq!(
        engine.sessions(&org()).await.unwrap()[0].state,
        SessionState::Compensated
    );
}

#[tokio::test]
async fn steps_are_recorded_only_in_order_and_only_during_an_undo() {
    let (engine, _) = engine().await;
    let one = run(&engine, transfer("s1", 1), json!("ok")).await;
    let two = run(&engine, transfer("s1", 2), json!("ok")).await;

    let err = engine
        .record_undo_step(&org(), &session("s1"), "made-up", two, done(json!(null)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotUndoing { .. }), "{err:?}");

    let plan = engine.begin_undo(&org(), &session("s1")).await.unwrap();
    let err = engine
        .record_undo_step(&org(), &session("s1"), "made-up", two, done(json!(null)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UndoLost { .. }), "{err:?}");
    let err = engine
        .record_undo_step(&org(), &session("s1"), &plan.claim, one, done(json!(null)))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::OutOfOrder { expected, got, .. } if *expected == Some(two) && *got == one),
        "{err:?}"
    );
    assert!(err.to_string().contains("newest first"), "{err}");
    assert_eq!(
        engine.effect(&org(), one).await.unwrap().state,
        EffectState::Committed,
        "nothing changed"
    );
}

#[tokio::test]
async fn a_failed_step_stops_the_saga_and_beginning_again_resumes_there() {
    let (engine, _) = engine().await;
    let one = run(&engine, transfer("s1", 1), json!("ok")).await;
    let two = run(&engine, transfer("s1", 2), json!("ok")).await;
    let three = run(&engine, transfer("s1", 3), json!("ok")).await;
    let plan = engine.begin_undo(&org(), &session("s1")).await.unwrap();
    engine
        .record_undo_step(
            &org(),
            &session("s1"),
            &plan.claim,
            three,
            done(json!(null)),
        )
        .await
        .unwrap();
    let progress = engine
        .record_undo_step(
            &org(),
            &session("s1"),
            &plan.claim,
            two,
            failed("bank is down"),
        )
        .await
        .unwrap();
    assert_eq!(progress.state, SessionState::CompensationFailed);
    let s = &engine.sessions(&org()).await.unwrap()[0];
    assert_eq!(
        (s.state, s.failed_effect),
        (SessionState::CompensationFailed, Some(two))
    );
    let effect = engine.effect(&org(), two).await.unwrap();
    assert_eq!(effect.state, EffectState::CompensationFailed);
    assert!(effect.error.unwrap().contains("bank is down"));
    assert_eq!(
        engine.effect(&org(), one).await.unwrap().state,
        EffectState::Committed,
        "the step after the failure is left for later"
    );

    let plan = engine.begin_undo(&org(), &session("s1")).await.unwrap();
    let ids: Vec<_> = plan.steps.iter().map(|s| s.effect_id).collect();
    assert_eq!(ids, vec![two, one], "step three is not redone");
    for id in ids {
        engine
            .record_undo_step(&org(), &session("s1"), &plan.claim, id, done(json!(null)))
            .await
            .unwrap();
    }
    let s = &engine.sessions(&org()).await.unwrap()[0];
    assert_eq!(
        (s.state, s.failed_effect),
        (SessionState::Compensated, None)
    );
}

#[tokio::test]
async fn nothing_to_compensate_ends_at_once_and_lists_what_cannot_be_undone() {
    let (engine, _) = engine().await;
    let approval = match engine.intercept(send_email("s1")).await.unwrap() {
        Intercept::AwaitingApproval { approval_id, .. } => approval_id,
        other => panic!("{other:?}"),
    };
    engine
        .approve(&org(), approval, &person("alice"), None)
        .await
        .unwrap();
    let email = run(&engine, send_email("s1"), json!("sent")).await;
    let mut events = engine.subscribe();
    let plan = engine.begin_undo(&org(), &session("s1")).await.unwrap();
    assert_eq!(plan.state, SessionState::Compensated);
    assert!(plan.steps.is_empty());
    assert_eq!(plan.not_undoable, vec![email]);
    let mut states = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let Event::SessionChanged { state, .. } = event {
            states.push(state);
        }
    }
    assert_eq!(
        states,
        vec![SessionState::Compensating, SessionState::Compensated]
    );
}

#[tokio::test]
async fn a_session_with_calls_in_flight_cannot_begin_an_undo() {
    let (engine, _) = engine().await;
    let running = must_execute(&engine, transfer("s1", 1)).await;
    let err = engine.begin_undo(&org(), &session("s1")).await.unwrap_err();
    assert!(
        matches!(&err, Error::SessionBusy { effects, .. } if effects == &vec![running]),
        "{err:?}"
    );
}

#[tokio::test]
async fn one_caller_undo_at_a_time_until_its_claim_runs_out() {
    let (engine, clock) = engine().await;
    let one = run(&engine, transfer("s1", 1), json!("ok")).await;
    let two = run(&engine, transfer("s1", 2), json!("ok")).await;
    let first = engine.begin_undo(&org(), &session("s1")).await.unwrap();
    let err = engine.begin_undo(&org(), &session("s1")).await.unwrap_err();
    assert!(matches!(err, Error::UndoRunning { .. }), "{err:?}");
    assert!(err.to_string().contains("GET /events"), "{err}");
    engine
        .record_undo_step(&org(), &session("s1"), &first.claim, two, done(json!(null)))
        .await
        .unwrap();

    // The first caller went quiet: once its claim runs out, another takes over where it stopped.
    clock.advance(engine.config().undo_claim + std::time::Duration::from_secs(1));
    let second = engine.begin_undo(&org(), &session("s1")).await.unwrap();
    assert_ne!(second.claim, first.claim);
    let ids: Vec<_> = second.steps.iter().map(|s| s.effect_id).collect();
    assert_eq!(
        ids,
        vec![one],
        "the step already reported is not handed out again"
    );
    let err = engine
        .record_undo_step(&org(), &session("s1"), &first.claim, one, done(json!(null)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UndoLost { .. }), "{err:?}");
    let progress = engine
        .record_undo_step(
            &org(),
            &session("s1"),
            &second.claim,
            one,
            done(json!(null)),
        )
        .await
        .unwrap();
    assert_eq!(progress.state, SessionState::Compensated);
}
