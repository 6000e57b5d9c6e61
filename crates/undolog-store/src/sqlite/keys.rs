//! API keys: looked up by hash before the org is known, so outside any org's transaction.

use sqlx::{Row, SqlitePool};
use undolog_types::{OrgId, Timestamp};

use crate::{ApiKey, Error, Result, rows, rows::API_KEY_COLUMNS};

pub(super) async fn insert(pool: &SqlitePool, key: &ApiKey) -> Result<()> {
    let result = sqlx::query(
        "INSERT INTO api_keys (id, org, hash, role, label, created_at, revoked_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&key.id)
    .bind(key.org.as_str())
    .bind(&key.hash)
    .bind(key.role.as_str())
    .bind(&key.label)
    .bind(key.created_at.as_millis())
    .bind(key.revoked_at.map(Timestamp::as_millis))
    .execute(pool)
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
            Err(Error::AlreadyExists(format!("API key {}", key.id)))
        }
        Err(other) => Err(other.into()),
    }
}

pub(super) async fn by_hash(pool: &SqlitePool, hash: &str) -> Result<Option<ApiKey>> {
    let sql = format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE hash = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(hash)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(rows::api_key).transpose()
}

pub(super) async fn list(pool: &SqlitePool, org: Option<&OrgId>) -> Result<Vec<ApiKey>> {
    let sql = format!(
        "SELECT {API_KEY_COLUMNS} FROM api_keys WHERE ? IS NULL OR org = ? ORDER BY created_at, id"
    );
    let org = org.map(OrgId::as_str);
    let found = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(org)
        .bind(org)
        .fetch_all(pool)
        .await?;
    found.iter().map(rows::api_key).collect()
}

pub(super) async fn revoke(pool: &SqlitePool, id: &str, at: Timestamp) -> Result<Option<ApiKey>> {
    sqlx::query("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
        .bind(at.as_millis())
        .bind(id)
        .execute(pool)
        .await?;
    let sql = format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE id = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(rows::api_key).transpose()
}

pub(super) async fn any(pool: &SqlitePool) -> Result<bool> {
    let found: Option<i64> = sqlx::query("SELECT 1 FROM api_keys LIMIT 1")
        .fetch_optional(pool)
        .await?
        .map(|row| row.try_get(0))
        .transpose()?;
    Ok(found.is_some())
}
