//! API keys: looked up by hash before the org is known, so outside any org's transaction.

use std::sync::LazyLock;

use rusqlite::{OptionalExtension, params};
use undolog_types::{OrgId, Timestamp};

use super::{
    connection::{Shared, is_unique_violation},
    rows::InOrder,
};
use crate::{ApiKey, Error, Result, rows, rows::API_KEY_COLUMNS};

static BY_HASH: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE hash = ?"));
static BY_ID: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE id = ?"));
static LIST: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {API_KEY_COLUMNS} FROM api_keys WHERE ?1 IS NULL OR org = ?1 ORDER BY created_at, id"
    )
});

pub(super) async fn insert(conn: &Shared, key: &ApiKey) -> Result<()> {
    let mut held = conn.take().await?;
    let result = Shared::with(&mut held, |conn| {
        conn.prepare_cached(
            "INSERT INTO api_keys (id, org, hash, role, label, created_at, revoked_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )?
        .execute(params![
            key.id,
            key.org.as_str(),
            key.hash,
            key.role.as_str(),
            key.label,
            key.created_at.as_millis(),
            key.revoked_at.map(Timestamp::as_millis),
        ])
    })
    .await;
    match result {
        Err(e) if is_unique_violation(&e) => {
            Err(Error::AlreadyExists(format!("API key {}", key.id)))
        }
        other => other.map(drop),
    }
}

pub(super) async fn by_hash(conn: &Shared, hash: &str) -> Result<Option<ApiKey>> {
    one(conn, &BY_HASH, hash).await
}

pub(super) async fn list(conn: &Shared, org: Option<&OrgId>) -> Result<Vec<ApiKey>> {
    let mut held = conn.take().await?;
    let org = org.map(OrgId::as_str);
    Shared::with(&mut held, |conn| {
        conn.prepare_cached(&LIST)?
            .query_map([org], |row| Ok(rows::api_key(&InOrder::new(row))))?
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .await?
    .into_iter()
    .collect()
}

pub(super) async fn revoke(conn: &Shared, id: &str, at: Timestamp) -> Result<Option<ApiKey>> {
    {
        let mut held = conn.take().await?;
        Shared::with(&mut held, |conn| {
            conn.prepare_cached(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            )?
            .execute(params![at.as_millis(), id])
        })
        .await?;
    }
    one(conn, &BY_ID, id).await
}

pub(super) async fn any(conn: &Shared) -> Result<bool> {
    let mut held = conn.take().await?;
    let found = Shared::with(&mut held, |conn| {
        conn.prepare_cached("SELECT 1 FROM api_keys LIMIT 1")?
            .query_row([], |_| Ok(()))
            .optional()
    })
    .await?;
    Ok(found.is_some())
}

/// The key a one-parameter query finds, if any.
async fn one(conn: &Shared, sql: &str, param: &str) -> Result<Option<ApiKey>> {
    let mut held = conn.take().await?;
    Shared::with(&mut held, |conn| {
        conn.prepare_cached(sql)?
            .query_row([param], |row| Ok(rows::api_key(&InOrder::new(row))))
            .optional()
    })
    .await?
    .transpose()
}
