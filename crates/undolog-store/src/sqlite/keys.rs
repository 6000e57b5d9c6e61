//! API keys: looked up by hash before the org is known, so outside any org's transaction.

use sqlx::{Row, SqlitePool};

use crate::{ApiKey, Error, Result, rows};

pub(super) async fn insert(pool: &SqlitePool, key: &ApiKey) -> Result<()> {
    let result = sqlx::query(
        "INSERT INTO api_keys (id, org, hash, label, created_at) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(&key.id)
    .bind(key.org.as_str())
    .bind(&key.hash)
    .bind(&key.label)
    .bind(key.created_at.as_millis())
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
    let row = sqlx::query("SELECT id, org, hash, label, created_at FROM api_keys WHERE hash = ?")
        .bind(hash)
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
