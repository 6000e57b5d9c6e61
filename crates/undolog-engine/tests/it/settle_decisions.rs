//! Who may settle a call, in the sans-IO core, as a table: only whoever presents the lease token
//! its `Execute` answer gave, for every way a call can be settled. No store, no clock.

use serde_json::json;
use undolog_engine::{
    Error,
    core::{self, Decision, InterceptView, Write},
};
use undolog_store::{Effect, Lease};
use undolog_types::{EffectState, LeaseToken, Timestamp};

use crate::*;

const NOW: Timestamp = Timestamp(10_000);
const LEASE_ENDS: Timestamp = Timestamp(20_000);

/// The core's view of a new call, with the lease and token this executor would hand out.
fn view(existing: Option<Effect>, now: Timestamp, token: &LeaseToken) -> InterceptView {
    InterceptView {
        session: None,
        existing,
        approval: None,
        now,
        lease: Lease {
            holder: "gateway-1".into(),
            expires_at: Timestamp(now.as_millis() + 10_000),
        },
        token: token.clone(),
        approval_expires_at: Timestamp(now.as_millis() + 60_000),
        new_ids: core::NewIds {
            effect: undolog_types::EffectId::generate(),
            approval: undolog_types::ApprovalId::generate(),
        },
    }
}

/// Decides `call` on `view`: the effect it hands over and the token the answer carried.
fn handed_over(call: &Call, view: InterceptView) -> (Effect, LeaseToken) {
    let Decision::Answer(
        Intercept::Execute {
            lease_token,
            lease_expires_at,
            ..
        },
        writes,
    ) = core::decide_intercept(call, view).unwrap()
    else {
        panic!("a new call executes");
    };
    let effect = writes
        .into_iter()
        .find_map(|w| match w {
            Write::InsertEffect(e) | Write::UpdateEffect(e) => Some(e),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        effect.lease.as_ref().map(|l| l.expires_at),
        Some(lease_expires_at)
    );
    (effect, lease_token)
}

/// Every way a call is settled, each asked of the core with `token` at `now`.
fn settle_every_way(
    effect: &Effect,
    token: &LeaseToken,
    now: Timestamp,
) -> Vec<(&'static str, Result<Vec<Write>, Error>)> {
    let e = || effect.clone();
    let renewal = Lease {
        holder: "gateway-1".into(),
        expires_at: Timestamp(now.as_millis() + 10_000),
    };
    vec![
        (
            "commit",
            core::commit(e(), token, json!({"ok": true}), None, now),
        ),
        ("fail", core::fail(e(), token, "no".into(), None, None, now)),
        (
            "await_input",
            core::await_input(e(), token, json!({}), None, now),
        ),
        (
            "not_sent",
            core::not_sent(e(), token, "down".into(), None, now),
        ),
        ("doubt", core::doubt(e(), token, "lost".into(), None, now)),
        ("renew_lease", core::renew_lease(e(), token, renewal)),
    ]
}

#[test]
fn only_the_owners_token_settles_a_call_whatever_else_is_presented() {
    let call = transfer("s1", 10);
    let (effect, owner) = handed_over(&call, view(None, NOW, &LeaseToken::generate()));

    // Taken over: the idempotent call's lease ran out, and another executor runs it again.
    let mut idempotent = call.clone();
    idempotent.policy.idempotent = true;
    let (taken_over, new_owner) = handed_over(
        &idempotent,
        view(Some(effect.clone()), LEASE_ENDS, &LeaseToken::generate()),
    );
    assert_eq!(taken_over.id, effect.id, "the same effect, a new owner");

    let mut from_before_tokens = effect.clone();
    from_before_tokens.lease_token = None;

    let (its_own, made_up) = (LeaseToken::generate(), LeaseToken::from_bytes([0; 32]));
    let mut ended = effect.clone();
    ended.state = EffectState::Committed;

    // (who presents what, on which record, when, whether the core takes it)
    type Case<'a> = (
        &'a str,
        &'a Effect,
        &'a LeaseToken,
        Timestamp,
        Result<(), &'a str>,
    );
    let cases: Vec<Case> = vec![
        ("the owner, within its lease", &effect, &owner, NOW, Ok(())),
        (
            "the owner, after its lease ran out and nobody took over",
            &effect,
            &owner,
            LEASE_ENDS,
            Ok(()),
        ),
        (
            "another key of the org, with a token of its own",
            &effect,
            &its_own,
            NOW,
            Err("not_owner"),
        ),
        (
            "a made-up token of the right shape",
            &effect,
            &made_up,
            NOW,
            Err("not_owner"),
        ),
        (
            "the first owner, after another took the call over",
            &taken_over,
            &owner,
            LEASE_ENDS,
            Err("not_owner"),
        ),
        (
            "the executor that took it over",
            &taken_over,
            &new_owner,
            LEASE_ENDS,
            Ok(()),
        ),
        (
            "anyone, on a call recorded before tokens existed",
            &from_before_tokens,
            &owner,
            NOW,
            Err("not_owner"),
        ),
        (
            "the owner, once the call has ended",
            &ended,
            &owner,
            NOW,
            Err("not_pending"),
        ),
    ];
    for (who, record, token, now, expected) in cases {
        for (how, settled) in settle_every_way(record, token, now) {
            let got = match settled {
                Ok(writes) => {
                    assert!(!writes.is_empty(), "{who} / {how}: settled with no write");
                    Ok(())
                }
                Err(Error::NotOwner(id)) => {
                    assert_eq!(id, record.id);
                    Err("not_owner")
                }
                Err(Error::NotPending { .. }) => Err("not_pending"),
                Err(other) => panic!("{who} / {how}: {other:?}"),
            };
            assert_eq!(got, expected, "{who} / {how}");
        }
    }
}

#[test]
fn the_log_keeps_only_the_digest_of_a_token_and_each_execution_gets_its_own() {
    let call = transfer("s1", 10);
    let (first, token) = handed_over(&call, view(None, NOW, &LeaseToken::generate()));
    let (second, other) = handed_over(&call, view(None, NOW, &LeaseToken::generate()));
    assert_ne!(token, other);
    assert_eq!(first.lease_token, Some(token.digest()));
    let stored = serde_json::to_string(&first).unwrap();
    assert!(!stored.contains(token.as_str()), "{stored}");
    assert_ne!(first.lease_token, second.lease_token);
}
