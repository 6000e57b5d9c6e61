//! Undo as a saga: reverse order of completion, each step recorded, failures kept for a person.

use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::json;
use undolog_engine::{Compensated, CompensationFailure, Compensator, Error, StepOutcome};
use undolog_store::Effect;
use undolog_types::{EffectId, EffectState, SessionState};

use crate::*;

/// Records what it was asked to undo; fails the first `failures` times for one effect.
#[derive(Default)]
struct Ledger {
    undone: Mutex<Vec<EffectId>>,
    failing: Mutex<Option<(EffectId, u32)>>,
}

#[async_trait]
impl Compensator for Ledger {
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, CompensationFailure> {
        if let Some((id, left)) = self.failing.lock().unwrap().as_mut()
            && *id == effect.id
            && *left > 0
        {
            *left -= 1;
            return Err(CompensationFailure::NotRun("bank is down".into()));
        }
        self.undone.lock().unwrap().push(effect.id);
        Ok(Compensated::Done {
            result: json!({"reversed": effect.args.as_map()["amount"]}),
        })
    }
}

#[tokio::test]
async fn undo_runs_compensations_in_reverse_order_of_completion() {
    let (engine, _) = engine().await;
    // Intercepted 1, 2, 3 but completed 2, 1, 3.
    let (one, one_token) = must_own(&engine, transfer("s1", 1)).await;
    let (two, two_token) = must_own(&engine, transfer("s1", 2)).await;
    engine
        .commit(&org(), two, &two_token, json!("ok"))
        .await
        .unwrap();
    engine
        .commit(&org(), one, &one_token, json!("ok"))
        .await
        .unwrap();
    let three = run(&engine, transfer("s1", 3), json!("ok")).await;
    run(&engine, get_balance("s1"), json!(5)).await; // nothing to undo

    let ledger = Ledger::default();
    let report = engine.undo(&org(), &session("s1"), &ledger).await.unwrap();
    assert_eq!(*ledger.undone.lock().unwrap(), vec![three, one, two]);
    assert_eq!(report.state, SessionState::Compensated);
    assert_eq!(
        report.steps.iter().map(|s| s.effect_id).collect::<Vec<_>>(),
        vec![three, one, two]
    );
    for id in [one, two, three] {
        assert_eq!(
            engine.effect(&org(), id).await.unwrap().state,
            EffectState::Compensated
        );
    }
    let sessions = engine.sessions(&org()).await.unwrap();
    assert_eq!(sessions[0].state, SessionState::Compensated);
}

#[tokio::test]
async fn a_compensation_that_keeps_failing_stops_the_undo_for_a_person() {
    let (engine, _) = engine().await;
    let one = run(&engine, transfer("s1", 1), json!("ok")).await;
    let two = run(&engine, transfer("s1", 2), json!("ok")).await;
    let three = run(&engine, transfer("s1", 3), json!("ok")).await;
    let ledger = Ledger {
        failing: Mutex::new(Some((two, 100))),
        ..Ledger::default()
    };

    let report = engine.undo(&org(), &session("s1"), &ledger).await.unwrap();
    assert_eq!(report.state, SessionState::CompensationFailed);
    assert_eq!(
        *ledger.undone.lock().unwrap(),
        vec![three],
        "nothing after the failing step ran"
    );
    let failed = report.steps.last().unwrap();
    assert_eq!(
        (failed.effect_id, failed.attempts),
        (two, engine.config().compensation_attempts)
    );
    assert!(matches!(&failed.outcome, StepOutcome::Failed { error } if error == "bank is down"));
    let effect = engine.effect(&org(), two).await.unwrap();
    assert_eq!(effect.state, EffectState::CompensationFailed);
    assert!(effect.error.unwrap().contains("bank is down"));
    assert_eq!(
        engine.effect(&org(), one).await.unwrap().state,
        EffectState::Committed
    );
    let s = &engine.sessions(&org()).await.unwrap()[0];
    assert_eq!(
        (s.state, s.failed_effect),
        (SessionState::CompensationFailed, Some(two))
    );

    // Once the bank is back, undo again finishes the job without redoing step three.
    *ledger.failing.lock().unwrap() = None;
    let report = engine.undo(&org(), &session("s1"), &ledger).await.unwrap();
    assert_eq!(report.state, SessionState::Compensated);
    assert_eq!(*ledger.undone.lock().unwrap(), vec![three, two, one]);
}

#[tokio::test]
async fn a_flaky_compensation_is_retried() {
    let (engine, _) = engine().await;
    let one = run(&engine, transfer("s1", 1), json!("ok")).await;
    let ledger = Ledger {
        failing: Mutex::new(Some((one, 2))),
        ..Ledger::default()
    };
    let report = engine.undo(&org(), &session("s1"), &ledger).await.unwrap();
    assert_eq!(report.state, SessionState::Compensated);
    assert_eq!(report.steps[0].attempts, 3);
}

#[tokio::test]
async fn irreversible_effects_are_reported_as_not_undoable() {
    let (engine, _) = engine().await;
    let approval = match engine.intercept(send_email("s1")).await.unwrap() {
        undolog_engine::Intercept::AwaitingApproval { approval_id, .. } => approval_id,
        other => panic!("{other:?}"),
    };
    engine
        .approve(&org(), approval, &person("alice"), None)
        .await
        .unwrap();
    let email = run(&engine, send_email("s1"), json!("sent")).await;
    let report = engine
        .undo(&org(), &session("s1"), &Ledger::default())
        .await
        .unwrap();
    assert_eq!(report.not_undoable, vec![email]);
    assert_eq!(report.state, SessionState::Compensated);
}

#[tokio::test]
async fn a_session_with_calls_in_flight_cannot_be_undone_yet() {
    let (engine, _) = engine().await;
    let running = must_execute(&engine, transfer("s1", 1)).await;
    let err = engine
        .undo(&org(), &session("s1"), &Ledger::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::SessionBusy { effects, .. } if effects == &vec![running]),
        "{err:?}"
    );
    assert_eq!(
        engine.sessions(&org()).await.unwrap()[0].state,
        SessionState::Active,
        "nothing changed"
    );
}

#[tokio::test]
async fn undoing_twice_or_an_unknown_session_says_why() {
    let (engine, _) = engine().await;
    run(&engine, transfer("s1", 1), json!("ok")).await;
    engine
        .undo(&org(), &session("s1"), &Ledger::default())
        .await
        .unwrap();
    let err = engine
        .undo(&org(), &session("s1"), &Ledger::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NothingToUndo { .. }), "{err:?}");
    let err = engine
        .undo(&org(), &session("nope"), &Ledger::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownSession(_)), "{err:?}");
}

#[tokio::test]
async fn an_undo_announces_each_session_change_once() {
    let (engine, _) = engine().await;
    run(&engine, transfer("s1", 1), json!("ok")).await;
    let mut events = engine.subscribe();
    engine
        .undo(&org(), &session("s1"), &Ledger::default())
        .await
        .unwrap();
    let mut states = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let undolog_engine::Event::SessionChanged { state, .. } = event {
            states.push(state);
        }
    }
    assert_eq!(
        states,
        vec![SessionState::Compensating, SessionState::Compensated]
    );
}

/// Counts every compensation it runs, taking a moment over each (so undos overlap).
#[derive(Default)]
struct SlowCounter {
    runs: Mutex<Vec<EffectId>>,
}

#[async_trait]
impl Compensator for SlowCounter {
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, CompensationFailure> {
        self.runs.lock().unwrap().push(effect.id);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        Ok(Compensated::AlreadyUndone)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_undos_at_once_run_each_compensation_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let engine = file_engine(&dir).await;
    let mut effects = Vec::new();
    for amount in 1..=4 {
        effects.push(run(&engine, transfer("s1", amount), json!("ok")).await);
    }
    let counter = std::sync::Arc::new(SlowCounter::default());
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(4));
    let undos: Vec<_> = (0..4)
        .map(|_| {
            let (engine, counter, barrier) = (engine.clone(), counter.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                engine.undo(&org(), &session("s1"), &*counter).await
            })
        })
        .collect();
    let (mut done, mut refused) = (0, 0);
    for undo in undos {
        match undo.await.unwrap() {
            Ok(report) => {
                assert_eq!(report.state, SessionState::Compensated);
                done += 1;
            }
            Err(Error::UndoRunning { .. } | Error::NothingToUndo { .. }) => refused += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((done, refused), (1, 3));
    let mut runs = counter.runs.lock().unwrap().clone();
    runs.sort();
    effects.sort();
    assert_eq!(runs, effects, "each compensation ran exactly once");
}

/// Never finishes: the undo running it is cut off, as if its process died.
struct Stuck;

#[async_trait]
impl Compensator for Stuck {
    async fn compensate(&self, _effect: &Effect) -> Result<Compensated, CompensationFailure> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_step_cut_off_mid_compensation_is_kept_for_a_person_not_run_again() {
    let (engine, clock) = engine().await;
    let one = run(&engine, transfer("s1", 1), json!("ok")).await;
    let two = run(&engine, transfer("s1", 2), json!("ok")).await;
    let cut_off = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.undo(&org(), &session("s1"), &Stuck).await })
    };
    for _ in 0..200 {
        if engine.effect(&org(), two).await.unwrap().state == EffectState::Compensating {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    cut_off.abort();

    // While its claim holds, nobody else may undo; after it runs out, the cut-off step may or
    // may not have run, so it is kept for a person instead of being compensated again.
    let ledger = Ledger::default();
    let err = engine
        .undo(&org(), &session("s1"), &ledger)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UndoRunning { .. }), "{err:?}");
    clock.advance(engine.config().undo_claim + std::time::Duration::from_secs(1));
    let err = engine
        .undo(&org(), &session("s1"), &ledger)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::UndoInterrupted { effect, .. } if *effect == two),
        "{err:?}"
    );
    assert!(
        ledger.undone.lock().unwrap().is_empty(),
        "nothing ran again"
    );
    let effect = engine.effect(&org(), two).await.unwrap();
    assert_eq!(effect.state, EffectState::CompensationFailed);
    assert!(effect.error.unwrap().contains("may or may not have run"));
    let s = &engine.sessions(&org()).await.unwrap()[0];
    assert_eq!(
        (s.state, s.failed_effect),
        (SessionState::CompensationFailed, Some(two))
    );

    // The person checked: undoing again retries the step, then the rest.
    let report = engine.undo(&org(), &session("s1"), &ledger).await.unwrap();
    assert_eq!(report.state, SessionState::Compensated);
    assert_eq!(*ledger.undone.lock().unwrap(), vec![two, one]);
}
