//! Turning stored rows into records, for every backend. A backend only says how to read a text or
//! an integer column ([`Columns`]); a row that does not parse is [`crate::Error::Corrupt`].

use std::str::FromStr;

use serde_json::Value;
use undolog_types::{Args, Signature, Timestamp, TokenDigest};

use crate::{ApiKey, Approval, Effect, Lease, Result, Session, Snapshot};

pub(crate) const SESSION_COLUMNS: &str = "org, id, state, next_seq, failed_effect, undo_holder, \
    undo_expires_at, run_of, opened_by, created_at, updated_at";

pub(crate) const EFFECT_COLUMNS: &str = "id, org, session, seq, tool, args, step, signature, \
    idempotency_key, tier, compensation, state, result, error, approval, lease_holder, \
    lease_expires_at, lease_token, created_at, updated_at, completed_at, resolved_by, verdicts";

pub(crate) const APPROVAL_COLUMNS: &str = "id, org, session, effect_id, signature, state, \
    requested_at, expires_at, requested_by, decided_by, decided_via, decided_at, reason";

pub(crate) const API_KEY_COLUMNS: &str = "id, org, hash, role, label, created_at, revoked_at";

pub(crate) const SNAPSHOT_COLUMNS: &str = "org, session, taken_at, body";

/// The two kinds of column the log stores: text (ids, states, JSON) and 64-bit integers.
pub(crate) trait Columns {
    fn text_opt(&self, column: &str) -> Result<Option<String>>;
    fn int_opt(&self, column: &str) -> Result<Option<i64>>;

    fn text(&self, column: &str) -> Result<String> {
        self.text_opt(column)?
            .ok_or_else(|| crate::Error::Corrupt(format!("{column} is null")))
    }

    fn int(&self, column: &str) -> Result<i64> {
        self.int_opt(column)?
            .ok_or_else(|| crate::Error::Corrupt(format!("{column} is null")))
    }
}

pub(crate) fn parsed<T: FromStr>(row: &impl Columns, column: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    let text = row.text(column)?;
    text.parse()
        .map_err(|e: T::Err| crate::Error::Corrupt(format!("{column} {text:?}: {e}")))
}

fn parsed_opt<T: FromStr>(row: &impl Columns, column: &str) -> Result<Option<T>>
where
    T::Err: std::fmt::Display,
{
    row.text_opt(column)?
        .map(|t| {
            t.parse()
                .map_err(|e: T::Err| crate::Error::Corrupt(format!("{column} {t:?}: {e}")))
        })
        .transpose()
}

fn json_opt(row: &impl Columns, column: &str) -> Result<Option<Value>> {
    Ok(row
        .text_opt(column)?
        .map(|t| serde_json::from_str(&t))
        .transpose()?)
}

fn timestamp(row: &impl Columns, column: &str) -> Result<Timestamp> {
    Ok(Timestamp(row.int(column)?))
}

fn timestamp_opt(row: &impl Columns, column: &str) -> Result<Option<Timestamp>> {
    Ok(row.int_opt(column)?.map(Timestamp))
}

pub(crate) fn session(row: &impl Columns) -> Result<Session> {
    Ok(Session {
        org: parsed(row, "org")?,
        id: parsed(row, "id")?,
        state: parsed(row, "state")?,
        next_seq: row.int("next_seq")?,
        failed_effect: parsed_opt(row, "failed_effect")?,
        undo_claim: lease(row, "undo_holder", "undo_expires_at")?,
        run_of: row.text_opt("run_of")?,
        opened_by: row.text_opt("opened_by")?,
        created_at: timestamp(row, "created_at")?,
        updated_at: timestamp(row, "updated_at")?,
    })
}

/// A lease stored as its two columns; `None` unless both are set.
fn lease(row: &impl Columns, holder: &str, expires_at: &str) -> Result<Option<Lease>> {
    Ok(
        match (row.text_opt(holder)?, timestamp_opt(row, expires_at)?) {
            (Some(holder), Some(expires_at)) => Some(Lease { holder, expires_at }),
            _ => None,
        },
    )
}

pub(crate) fn effect(row: &impl Columns) -> Result<Effect> {
    let lease = lease(row, "lease_holder", "lease_expires_at")?;
    Ok(Effect {
        id: parsed(row, "id")?,
        org: parsed(row, "org")?,
        session: parsed(row, "session")?,
        seq: row.int("seq")?,
        tool: row.text("tool")?,
        args: Args::parse(&row.text("args")?)?,
        step: row.int_opt("step")?.map(|s| s as u64),
        signature: Signature::from_stored(row.text("signature")?),
        idempotency_key: row.text_opt("idempotency_key")?,
        tier: parsed(row, "tier")?,
        compensation: json_opt(row, "compensation")?
            .map(serde_json::from_value)
            .transpose()?,
        state: parsed(row, "state")?,
        result: json_opt(row, "result")?,
        error: row.text_opt("error")?,
        verdicts: json_opt(row, "verdicts")?,
        approval: parsed_opt(row, "approval")?,
        lease,
        lease_token: row.text_opt("lease_token")?.map(TokenDigest::from_stored),
        created_at: timestamp(row, "created_at")?,
        updated_at: timestamp(row, "updated_at")?,
        completed_at: timestamp_opt(row, "completed_at")?,
        resolved_by: row.text_opt("resolved_by")?,
    })
}

pub(crate) fn approval(row: &impl Columns) -> Result<Approval> {
    Ok(Approval {
        id: parsed(row, "id")?,
        org: parsed(row, "org")?,
        session: parsed(row, "session")?,
        effect: parsed(row, "effect_id")?,
        signature: Signature::from_stored(row.text("signature")?),
        state: parsed(row, "state")?,
        requested_at: timestamp(row, "requested_at")?,
        expires_at: timestamp(row, "expires_at")?,
        requested_by: row.text_opt("requested_by")?,
        decided_by: row.text_opt("decided_by")?,
        decided_via: row.text_opt("decided_via")?,
        decided_at: timestamp_opt(row, "decided_at")?,
        reason: row.text_opt("reason")?,
    })
}

pub(crate) fn snapshot(row: &impl Columns) -> Result<Snapshot> {
    Ok(Snapshot {
        org: parsed(row, "org")?,
        session: parsed(row, "session")?,
        taken_at: timestamp(row, "taken_at")?,
        body: serde_json::from_str(&row.text("body")?)?,
    })
}

pub(crate) fn api_key(row: &impl Columns) -> Result<ApiKey> {
    Ok(ApiKey {
        id: row.text("id")?,
        org: parsed(row, "org")?,
        hash: row.text("hash")?,
        role: parsed(row, "role")?,
        label: row.text_opt("label")?,
        created_at: timestamp(row, "created_at")?,
        revoked_at: timestamp_opt(row, "revoked_at")?,
    })
}
