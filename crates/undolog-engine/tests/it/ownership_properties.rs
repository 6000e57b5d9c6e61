//! Random interleavings of calls, settles, undos, verdicts and retries by several principals:
//! no effect is settled by anyone but its owner, no tool runs twice for one effect (nor a
//! compensation that may have run), and every effect whose tool ran ends committed, in doubt,
//! or compensated (or kept for a person, its compensation failed or in doubt).

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use async_trait::async_trait;
use proptest::prelude::*;
use serde_json::json;
use undolog_engine::{
    Call, Compensated, CompensationFailure, Compensator, Engine, EngineConfig, Error, Intercept,
    ManualClock, Resolution,
};
use undolog_store::{Effect, SqliteStore};
use undolog_types::{EffectId, EffectState, LeaseToken, Timestamp};

use crate::*;

const PRINCIPALS: [&str; 3] = ["api-key:a", "api-key:b", "api-key:c"];

#[derive(Debug, Clone, Copy)]
enum Act {
    Commit,
    Fail,
    NotSent,
    Doubt,
    AwaitInput,
    Renew,
}

/// Which token a settle presents.
#[derive(Debug, Clone, Copy)]
enum Presented {
    /// The effect's own, when the presenter is its owner (else one made up).
    Own,
    /// The token of another effect handed out.
    Another,
    MadeUp,
}

#[derive(Debug, Clone)]
enum Op {
    Call {
        who: usize,
        read_only: bool,
        amount: u8,
        session: u8,
        keyed: bool,
    },
    Settle {
        who: usize,
        pick: usize,
        act: Act,
        token: Presented,
    },
    Undo(u8),
    Resolve {
        pick: usize,
        ran: bool,
    },
    Advance,
}

fn op() -> impl Strategy<Value = Op> {
    let act = prop_oneof![
        4 => Just(Act::Commit),
        1 => Just(Act::Fail),
        1 => Just(Act::NotSent),
        1 => Just(Act::Doubt),
        1 => Just(Act::AwaitInput),
        1 => Just(Act::Renew),
    ];
    let token = prop_oneof![
        3 => Just(Presented::Own),
        1 => Just(Presented::Another),
        1 => Just(Presented::MadeUp),
    ];
    prop_oneof![
        6 => (0..PRINCIPALS.len(), prop::bool::weighted(0.2), 0u8..3, 0u8..2, prop::bool::weighted(0.2))
            .prop_map(|(who, read_only, amount, session, keyed)| Op::Call { who, read_only, amount, session, keyed }),
        6 => (0..PRINCIPALS.len(), any::<usize>(), act, token)
            .prop_map(|(who, pick, act, token)| Op::Settle { who, pick, act, token }),
        2 => (0u8..2).prop_map(Op::Undo),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(pick, ran)| Op::Resolve { pick, ran }),
        1 => Just(Op::Advance),
    ]
}

fn call(who: usize, read_only: bool, amount: u8, session_no: u8, keyed: bool) -> Call {
    let name = format!("s{session_no}");
    let mut call = match read_only {
        true => get_balance(&name),
        false => transfer(&name, i64::from(amount)),
    };
    call.args = args(json!({"amount": amount, "read_only": read_only}));
    if keyed {
        call = call.with_idempotency_key(format!("key-{amount}-{session_no}"));
    }
    call.with_caller(PRINCIPALS[who])
}

/// A compensator that answers done, did not run, or may have run, in turn, and remembers what
/// it was asked: a compensation it ran, or that may have run, must not be asked again.
#[derive(Default)]
struct Compensations {
    asked: Mutex<u32>,
    /// Compensated, or may have been: no undo may run these again.
    ran: Mutex<HashSet<EffectId>>,
    violations: Mutex<Vec<String>>,
}

#[async_trait]
impl Compensator for Compensations {
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, CompensationFailure> {
        let turn = {
            let mut asked = self.asked.lock().unwrap();
            *asked += 1;
            *asked % 3
        };
        let mut ran = self.ran.lock().unwrap();
        if ran.contains(&effect.id) {
            let seen = format!("the compensation of {} ran again", effect.id);
            self.violations.lock().unwrap().push(seen);
        }
        match turn {
            0 => {
                ran.insert(effect.id);
                Ok(Compensated::AlreadyUndone)
            }
            1 => Err(CompensationFailure::NotRun("the bank refused".into())),
            _ => {
                ran.insert(effect.id);
                Err(CompensationFailure::MayHaveRun("timed out".into()))
            }
        }
    }
}

/// Errors that correct use meets; anything else is a bug.
fn expected(err: &Error) -> bool {
    matches!(
        err,
        Error::NotOwner(_)
            | Error::NotPending { .. }
            | Error::NotInDoubt(_)
            | Error::WrongVerdict { .. }
            | Error::StillRunning { .. }
            | Error::KeyReused { .. }
            | Error::SessionBusy { .. }
            | Error::NothingToUndo { .. }
            | Error::UnknownSession(_)
            | Error::CompensationInDoubt { .. }
    )
}

/// One effect handed out for execution: its token, and its owner.
struct Handed {
    effect: EffectId,
    token: LeaseToken,
    owner: usize,
}

async fn settle(engine: &Engine, act: Act, id: EffectId, token: &LeaseToken) -> Result<(), Error> {
    let org = org();
    match act {
        Act::Commit => engine.commit(&org, id, token, json!({"ok": true})).await,
        Act::Fail => engine.fail(&org, id, token, "the tool failed").await,
        Act::NotSent => engine.not_sent(&org, id, token, "not sent", None).await,
        Act::Doubt => {
            engine
                .doubt(&org, id, token, "the answer was lost", None)
                .await
        }
        Act::AwaitInput => (engine.await_input(&org, id, token, json!({"ask": 1}), None)).await,
        Act::Renew => engine.renew_lease(&org, id, token).await.map(drop),
    }
}

async fn play(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = ManualClock::starting_at(Timestamp(1_000_000));
    let config = EngineConfig {
        wait_timeout: Duration::from_millis(5),
        poll_interval: Duration::from_millis(1),
        compensation_backoff: Duration::from_millis(1),
        ..EngineConfig::default()
    };
    let engine = Engine::with_clock(
        Arc::new(SqliteStore::in_memory().await.unwrap()),
        config,
        Arc::new(clock.clone()),
    );
    let compensations = Compensations::default();
    let mut handed: Vec<Handed> = Vec::new();
    let mut executions: HashMap<EffectId, u32> = HashMap::new();
    // Effects whose owner last said the tool ran (committed), or may have (in doubt).
    let mut ran: HashSet<EffectId> = HashSet::new();
    let mut last_said: HashMap<EffectId, Act> = HashMap::new();

    for op in ops {
        let outcome = match op {
            Op::Call {
                who,
                read_only,
                amount,
                session,
                keyed,
            } => match engine
                .intercept(call(who, read_only, amount, session, keyed))
                .await
            {
                Ok(Intercept::Execute {
                    effect_id,
                    lease_token,
                    ..
                }) => {
                    *executions.entry(effect_id).or_default() += 1;
                    handed.push(Handed {
                        effect: effect_id,
                        token: lease_token,
                        owner: who,
                    });
                    Ok(())
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            },
            Op::Settle {
                who,
                pick,
                act,
                token,
            } if !handed.is_empty() => {
                let target = &handed[pick % handed.len()];
                let presented = match token {
                    Presented::Own if who == target.owner => target.token.clone(),
                    Presented::Another if handed.len() > 1 => {
                        handed[(pick + 1) % handed.len()].token.clone()
                    }
                    _ => LeaseToken::generate(),
                };
                let settled = settle(&engine, act, target.effect, &presented).await;
                if settled.is_ok() {
                    prop_assert!(
                        presented == target.token,
                        "{} settled {} ({act:?}) without its token",
                        PRINCIPALS[who],
                        target.effect
                    );
                    // The owner's last word stands: it ran (or may have), or it did not.
                    match act {
                        Act::Commit | Act::Doubt => ran.insert(target.effect),
                        Act::Fail | Act::NotSent | Act::AwaitInput => ran.remove(&target.effect),
                        Act::Renew => false,
                    };
                    last_said.insert(target.effect, act);
                }
                settled
            }
            Op::Settle { .. } => Ok(()),
            Op::Undo(s) => engine
                .undo(&org(), &session(&format!("s{s}")), &compensations)
                .await
                .map(drop),
            Op::Resolve { pick, ran: it_ran } if !handed.is_empty() => {
                let id = handed[pick % handed.len()].effect;
                let verdict = match it_ran {
                    true => Resolution::Compensated,
                    false => Resolution::NotCompensated("not at the bank".into()),
                };
                let resolved = engine.resolve_in_doubt(&org(), id, verdict, "ops").await;
                if resolved.is_ok() && !it_ran {
                    // A person found it did not run: an undo may run it again.
                    compensations.ran.lock().unwrap().remove(&id);
                }
                resolved
            }
            Op::Resolve { .. } => Ok(()),
            Op::Advance => {
                clock.advance(Duration::from_secs(3600));
                Ok(())
            }
        };
        if let Err(e) = outcome {
            prop_assert!(expected(&e), "unexpected error: {e:?}");
        }
    }

    prop_assert!(
        executions.values().all(|&n| n == 1),
        "an effect was handed out to run twice: {executions:?}"
    );
    let violations = compensations.violations.lock().unwrap().clone();
    prop_assert!(violations.is_empty(), "{violations:?}");
    let now = engine.now();
    for id in ran {
        let effect = engine.effect(&org(), id).await.unwrap();
        let kept = match effect.state {
            EffectState::Committed
            | EffectState::Compensated
            | EffectState::CompensationFailed
            | EffectState::CompensationInDoubt => true,
            // In doubt (its lease over), or still running: its owner renewed the lease since.
            EffectState::Pending => {
                effect.lease.as_ref().is_none_or(|l| l.expires_at <= now)
                    || matches!(last_said.get(&id), Some(Act::Renew))
            }
            _ => false,
        };
        prop_assert!(
            kept,
            "an effect whose tool ran ended {}: {effect:?}",
            effect.state
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn interleavings_of_several_principals_keep_ownership_and_run_nothing_twice(
        ops in prop::collection::vec(op(), 1..48)
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(play(ops))?;
    }
}
