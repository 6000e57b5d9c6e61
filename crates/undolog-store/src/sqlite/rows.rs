//! Turning SQLite rows into records. A row that does not parse is [`crate::Error::Corrupt`].

use std::str::FromStr;

use serde_json::Value;
use sqlx::{Row, sqlite::SqliteRow};
use undolog_types::{Args, Signature, Timestamp};

use crate::{Approval, Effect, Lease, Result, Session, Snapshot};

pub(super) const SESSION_COLUMNS: &str =
    "org, id, state, next_seq, failed_effect, created_at, updated_at";

pub(super) const EFFECT_COLUMNS: &str = "id, org, session, seq, tool, args, step, signature, \
    idempotency_key, tier, compensation, state, result, error, approval, lease_holder, \
    lease_expires_at, created_at, updated_at, completed_at";

pub(super) const APPROVAL_COLUMNS: &str = "id, org, session, effect_id, signature, state, \
    requested_at, expires_at, decided_by, decided_at, reason";

pub(super) fn parsed<T: FromStr>(row: &SqliteRow, column: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    let text: String = row.try_get(column)?;
    text.parse()
        .map_err(|e: T::Err| crate::Error::Corrupt(format!("{column} {text:?}: {e}")))
}

fn parsed_opt<T: FromStr>(row: &SqliteRow, column: &str) -> Result<Option<T>>
where
    T::Err: std::fmt::Display,
{
    let text: Option<String> = row.try_get(column)?;
    text.map(|t| {
        t.parse()
            .map_err(|e: T::Err| crate::Error::Corrupt(format!("{column} {t:?}: {e}")))
    })
    .transpose()
}

fn json_opt(row: &SqliteRow, column: &str) -> Result<Option<Value>> {
    let text: Option<String> = row.try_get(column)?;
    Ok(text.map(|t| serde_json::from_str(&t)).transpose()?)
}

fn timestamp(row: &SqliteRow, column: &str) -> Result<Timestamp> {
    Ok(Timestamp(row.try_get(column)?))
}

fn timestamp_opt(row: &SqliteRow, column: &str) -> Result<Option<Timestamp>> {
    Ok(row.try_get::<Option<i64>, _>(column)?.map(Timestamp))
}

pub(super) fn session(row: &SqliteRow) -> Result<Session> {
    Ok(Session {
        org: parsed(row, "org")?,
        id: parsed(row, "id")?,
        state: parsed(row, "state")?,
        next_seq: row.try_get("next_seq")?,
        failed_effect: parsed_opt(row, "failed_effect")?,
        created_at: timestamp(row, "created_at")?,
        updated_at: timestamp(row, "updated_at")?,
    })
}

pub(super) fn effect(row: &SqliteRow) -> Result<Effect> {
    let args: String = row.try_get("args")?;
    let lease = match (
        row.try_get::<Option<String>, _>("lease_holder")?,
        timestamp_opt(row, "lease_expires_at")?,
    ) {
        (Some(holder), Some(expires_at)) => Some(Lease { holder, expires_at }),
        _ => None,
    };
    let step: Option<i64> = row.try_get("step")?;
    Ok(Effect {
        id: parsed(row, "id")?,
        org: parsed(row, "org")?,
        session: parsed(row, "session")?,
        seq: row.try_get("seq")?,
        tool: row.try_get("tool")?,
        args: Args::parse(&args)?,
        step: step.map(|s| s as u64),
        signature: Signature::from_stored(row.try_get("signature")?),
        idempotency_key: row.try_get("idempotency_key")?,
        tier: parsed(row, "tier")?,
        compensation: json_opt(row, "compensation")?
            .map(serde_json::from_value)
            .transpose()?,
        state: parsed(row, "state")?,
        result: json_opt(row, "result")?,
        error: row.try_get("error")?,
        approval: parsed_opt(row, "approval")?,
        lease,
        created_at: timestamp(row, "created_at")?,
        updated_at: timestamp(row, "updated_at")?,
        completed_at: timestamp_opt(row, "completed_at")?,
    })
}

pub(super) fn approval(row: &SqliteRow) -> Result<Approval> {
    Ok(Approval {
        id: parsed(row, "id")?,
        org: parsed(row, "org")?,
        session: parsed(row, "session")?,
        effect: parsed(row, "effect_id")?,
        signature: Signature::from_stored(row.try_get("signature")?),
        state: parsed(row, "state")?,
        requested_at: timestamp(row, "requested_at")?,
        expires_at: timestamp(row, "expires_at")?,
        decided_by: row.try_get("decided_by")?,
        decided_at: timestamp_opt(row, "decided_at")?,
        reason: row.try_get("reason")?,
    })
}

pub(super) fn snapshot(row: &SqliteRow) -> Result<Snapshot> {
    let body: String = row.try_get("body")?;
    Ok(Snapshot {
        org: parsed(row, "org")?,
        session: parsed(row, "session")?,
        taken_at: timestamp(row, "taken_at")?,
        body: serde_json::from_str(&body)?,
    })
}
