//! The store conformance suite: the cases every backend must pass, written once.
//!
//! A backend's test crate runs them all with [`store_conformance_tests!`], giving an async function
//! that returns a fresh, empty store:
//!
//! ```text
//! undolog_store::store_conformance_tests!(fresh_sqlite);
//! ```
//!
//! The cases live by what they test (`records`, `transactions`, `keys`, `leases`, `remembered`);
//! the records they build and seed, here.

use std::{sync::Arc, time::Duration};

use serde_json::json;
use undolog_types::{
    ApprovalId, ApprovalState, Args, EffectId, EffectState, LeaseToken, LockKey, OrgId, Role,
    SessionId, SessionState, Tier, Timestamp,
};

use crate::{
    ApiKey, Approval, Beat, Compensation, Effect, EffectLookup, Error, Lease, Result, Session,
    Snapshot, Store, Tx,
};

mod keys;
mod leases;
mod records;
mod remembered;
mod transactions;

pub use keys::*;
pub use leases::*;
pub use records::*;
pub use remembered::*;
pub use transactions::*;

/// Generates one `#[tokio::test]` per conformance case, each on a fresh store from `$fresh`.
#[macro_export]
macro_rules! store_conformance_tests {
    ($fresh:path) => {
        $crate::store_conformance_tests!(@cases $fresh;
            sessions_round_trip, effects_round_trip, duplicate_effect_is_refused,
            updating_a_missing_row_is_not_found, latest_effect_by_signature_is_the_newest,
            latest_effect_by_key_is_the_newest, reads_made_together_match_reads_made_alone,
            session_effects_come_in_order,
            expired_leases_are_only_pending_effects_past_their_lease,
            a_lease_token_is_kept_by_every_write_of_an_effect, approvals_round_trip_and_filter,
            undo_stack_keeps_completion_order, snapshots_round_trip, dropped_transaction_rolls_back,
            a_refused_write_leaves_nothing_of_its_transaction,
            orgs_see_only_their_own_rows, same_lock_key_serializes_transactions,
            a_session_read_then_written_loses_no_update, api_keys_are_found_by_hash_only,
            api_keys_are_listed_and_revoked, compensations_of_both_kinds_round_trip,
            the_latest_run_is_the_newest_of_that_principal,
            a_callers_sessions_are_those_it_opened_and_no_others,
            a_dead_executors_leases_and_claims_end_when_it_is_taken_for_dead,
            an_unsynced_transaction_keeps_all_its_writes_or_none,
            a_session_is_replaced_only_while_it_is_as_remembered,
            an_effect_is_replaced_only_while_it_is_as_remembered,
            no_earlier_effect_is_expected_of_a_new_call,
            calls_and_outcomes_written_together_are_all_kept_or_none);
    };
    (@cases $fresh:path; $($case:ident),+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store = $fresh().await;
                $crate::conformance::$case(store).await;
            }
        )+
    };
}

fn org(name: &str) -> OrgId {
    OrgId::new(name).unwrap()
}

fn sid(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

fn session(org_name: &str, id: &str) -> Session {
    Session {
        org: org(org_name),
        id: sid(id),
        state: SessionState::Active,
        next_seq: 0,
        failed_effect: None,
        undo_claim: None,
        run_of: None,
        opened_by: None,
        created_at: Timestamp(1_000),
        updated_at: Timestamp(1_000),
    }
}

fn effect(org_name: &str, session_id: &str, seq: i64) -> Effect {
    let args = Args::try_from(json!({"to": "bøb 😀", "amount": 10.5, "n": seq})).unwrap();
    let signature = undolog_types::CallIdentity {
        org: &org(org_name),
        session: &sid(session_id),
        tool: "transfer",
        args: &args,
        step: None,
    }
    .signature();
    Effect {
        id: EffectId::generate(),
        org: org(org_name),
        session: sid(session_id),
        seq,
        tool: "transfer".into(),
        args,
        step: None,
        signature,
        idempotency_key: None,
        tier: Tier::Compensable,
        compensation: Some(Compensation::Upstream {
            tool: "transfer".into(),
            args: json!({"amount": "{{args.amount}}"}),
        }),
        state: EffectState::Pending,
        result: None,
        error: None,
        verdicts: None,
        approval: None,
        lease: Some(Lease {
            holder: "gateway-1".into(),
            expires_at: Timestamp(5_000),
        }),
        lease_token: Some(LeaseToken::from_bytes([seq as u8; 32]).digest()),
        created_at: Timestamp(1_000 + seq),
        updated_at: Timestamp(1_000 + seq),
        completed_at: None,
        resolved_by: None,
    }
}

fn approval(org_name: &str, effect: &Effect, requested_at: i64) -> Approval {
    Approval {
        id: ApprovalId::generate(),
        org: org(org_name),
        session: effect.session.clone(),
        effect: effect.id,
        signature: effect.signature.clone(),
        state: ApprovalState::Pending,
        requested_at: Timestamp(requested_at),
        expires_at: Timestamp(requested_at + 60_000),
        requested_by: Some("api-key:agent-1".into()),
        decided_by: None,
        decided_via: None,
        decided_at: None,
        reason: None,
    }
}

/// Writes a session and its effects in one committed transaction.
async fn seed(store: &dyn Store, org_name: &str, session_id: &str, effects: &[&Effect]) {
    let mut tx = store.begin(&org(org_name)).await.unwrap();
    tx.put_session(&session(org_name, session_id))
        .await
        .unwrap();
    for e in effects {
        tx.insert_effect(e).await.unwrap();
    }
    tx.commit().await.unwrap();
}

/// The error of a write that must fail: from the write itself or, for a backend that sends
/// writes later, from the commit that carries it.
async fn write_error(tx: Box<dyn Tx>, written: Result<()>) -> Error {
    match written {
        Err(e) => e,
        Ok(()) => tx
            .commit()
            .await
            .expect_err("the write, or at the latest its commit, fails"),
    }
}
