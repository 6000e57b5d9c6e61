//! Random sequences of engine operations never reach an illegal state and never run a call twice.

use std::{collections::HashMap, sync::Arc, time::Duration};

use async_trait::async_trait;
use proptest::prelude::*;
use serde_json::json;
use undolog_engine::{
    Call, Compensated, CompensationFailure, Compensator, Engine, EngineConfig, Error, Intercept,
    ManualClock,
};
use undolog_store::{Effect, SqliteStore};
use undolog_types::{
    ApprovalId, ApprovalState, EffectId, EffectState, LeaseToken, Tier, Timestamp,
};

use crate::*;

#[derive(Debug, Clone)]
enum Op {
    Intercept {
        tool: u8,
        amount: u8,
        session: u8,
        keyed: bool,
    },
    Commit(usize),
    Fail(usize),
    Approve(usize),
    Deny(usize),
    Undo(u8),
    Close(u8),
    Advance,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, 0u8..3, 0u8..2, prop::bool::weighted(0.2))
            .prop_map(|(tool, amount, session, keyed)| Op::Intercept { tool, amount, session, keyed }),
        3 => any::<usize>().prop_map(Op::Commit),
        1 => any::<usize>().prop_map(Op::Fail),
        2 => any::<usize>().prop_map(Op::Approve),
        1 => any::<usize>().prop_map(Op::Deny),
        1 => (0u8..2).prop_map(Op::Undo),
        1 => (0u8..2).prop_map(Op::Close),
        1 => Just(Op::Advance),
    ]
}

fn call(tool: u8, amount: u8, session_no: u8, keyed: bool) -> Call {
    let name = format!("s{session_no}");
    let mut call = match tool {
        0 => get_balance(&name),
        1 => transfer(&name, i64::from(amount)),
        _ => send_email(&name),
    };
    call.args = args(json!({"amount": amount, "tool": tool}));
    if keyed {
        call = call.with_idempotency_key(format!("key-{tool}-{amount}-{session_no}"));
    }
    call
}

/// Undoes everything except amounts of 2, which it refuses.
struct Picky;

#[async_trait]
impl Compensator for Picky {
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, CompensationFailure> {
        if effect.args.as_map()["amount"] == 2 {
            Err(CompensationFailure::NotRun("refused".into()))
        } else {
            Ok(Compensated::AlreadyUndone)
        }
    }
}

/// Errors that correct use can meet; anything else (a store error, say) is a bug.
fn expected(err: &Error) -> bool {
    matches!(
        err,
        Error::NotPending { .. }
            | Error::AlreadyDecided { .. }
            | Error::ApprovalExpired(_)
            | Error::StillRunning { .. }
            | Error::KeyReused { .. }
            | Error::SessionBusy { .. }
            | Error::NothingToUndo { .. }
            | Error::UnknownSession(_)
            | Error::IllegalTransition(_)
    )
}

async fn play(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = ManualClock::starting_at(Timestamp(1_000_000));
    let config = EngineConfig {
        wait_timeout: Duration::from_millis(5),
        poll_interval: Duration::from_millis(1),
        compensation_attempts: 1,
        ..EngineConfig::default()
    };
    let engine = Engine::with_clock(
        Arc::new(SqliteStore::in_memory().await.unwrap()),
        config,
        Arc::new(clock.clone()),
    );
    let mut executing: Vec<(EffectId, LeaseToken)> = Vec::new();
    let mut approvals: Vec<ApprovalId> = Vec::new();
    let mut executions: HashMap<EffectId, u32> = HashMap::new();
    let pick = |n: usize, len: usize| (len > 0).then(|| n % len);

    for op in ops {
        let outcome = match op {
            Op::Intercept {
                tool,
                amount,
                session,
                keyed,
            } => match engine.intercept(call(tool, amount, session, keyed)).await {
                Ok(Intercept::Execute {
                    effect_id,
                    lease_token,
                    ..
                }) => {
                    *executions.entry(effect_id).or_default() += 1;
                    executing.push((effect_id, lease_token));
                    Ok(())
                }
                Ok(Intercept::AwaitingApproval { approval_id, .. }) => {
                    approvals.push(approval_id);
                    Ok(())
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            },
            Op::Commit(n) => match pick(n, executing.len()) {
                Some(i) => {
                    let (id, token) = executing.remove(i);
                    engine.commit(&org(), id, &token, json!({"ok": n})).await
                }
                None => Ok(()),
            },
            Op::Fail(n) => match pick(n, executing.len()) {
                Some(i) => {
                    let (id, token) = executing.remove(i);
                    engine.fail(&org(), id, &token, "tool failed").await
                }
                None => Ok(()),
            },
            Op::Approve(n) => match pick(n, approvals.len()) {
                Some(i) => engine
                    .approve(&org(), approvals[i], &person("op"), None)
                    .await
                    .map(drop),
                None => Ok(()),
            },
            Op::Deny(n) => match pick(n, approvals.len()) {
                Some(i) => engine
                    .deny(&org(), approvals[i], &person("op"), "no")
                    .await
                    .map(drop),
                None => Ok(()),
            },
            Op::Undo(s) => engine
                .undo(&org(), &session(&format!("s{s}")), &Picky)
                .await
                .map(drop),
            Op::Close(s) => engine
                .close_session(&org(), &session(&format!("s{s}")))
                .await
                .map(drop),
            Op::Advance => {
                clock.advance(Duration::from_secs(3600));
                Ok(())
            }
        };
        if let Err(e) = outcome {
            prop_assert!(expected(&e), "unexpected error: {e:?}");
        }
    }

    // No effect was handed out for execution twice.
    prop_assert!(
        executions.values().all(|&n| n == 1),
        "an effect executed twice: {executions:?}"
    );
    let mut done_per_signature: HashMap<String, u32> = HashMap::new();
    for s in engine.sessions(&org()).await.unwrap() {
        for e in engine.session_effects(&org(), &s.id).await.unwrap() {
            check_effect(&engine, &e).await?;
            let took_effect = matches!(
                e.state,
                EffectState::Pending
                    | EffectState::Committed
                    | EffectState::Compensating
                    | EffectState::Compensated
                    | EffectState::CompensationFailed
                    | EffectState::CompensationInDoubt
            );
            if took_effect && e.tier != Tier::ReadOnly && e.idempotency_key.is_none() {
                *done_per_signature
                    .entry(e.signature.to_string())
                    .or_default() += 1;
            }
        }
    }
    prop_assert!(
        done_per_signature.values().all(|&n| n == 1),
        "a call took effect twice: {done_per_signature:?}"
    );
    Ok(())
}

/// Each stored effect is consistent with its state.
async fn check_effect(engine: &Engine, e: &Effect) -> Result<(), TestCaseError> {
    match e.state {
        EffectState::Committed | EffectState::Compensated => {
            prop_assert!(e.result.is_some(), "{e:?}")
        }
        EffectState::Failed => prop_assert!(e.error.is_some(), "{e:?}"),
        EffectState::Pending => prop_assert!(e.lease.is_some(), "{e:?}"),
        _ => {}
    }
    if e.tier == Tier::Irreversible && e.state != EffectState::AwaitingApproval {
        let approval = engine
            .approval(
                &org(),
                e.approval.expect("irreversible calls have a request"),
            )
            .await
            .unwrap();
        let ran = !matches!(e.state, EffectState::Denied | EffectState::Expired);
        if ran {
            prop_assert_eq!(
                approval.state,
                ApprovalState::Approved,
                "ran without approval: {:?}",
                e
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_keep_every_invariant(ops in prop::collection::vec(op(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(play(ops))?;
    }
}
