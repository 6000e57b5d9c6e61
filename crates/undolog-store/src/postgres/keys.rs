//! API keys: looked up by hash before the org is known, so outside any org's transaction.
//!
//! The application role may insert a key for the org its transaction names, and otherwise reach
//! the table only through two SECURITY DEFINER functions (see `0002_api_keys.sql` for why).

use sqlx::{PgConnection, Row};

use crate::{ApiKey, Error, Result, rows};

pub(super) async fn insert(conn: &mut PgConnection, key: &ApiKey) -> Result<()> {
    let result = sqlx::query(
        "INSERT INTO api_keys (id, org, hash, label, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&key.id)
    .bind(key.org.as_str())
    .bind(&key.hash)
    .bind(&key.label)
    .bind(key.created_at.as_millis())
    .execute(conn)
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
            Err(Error::AlreadyExists(format!("API key {}", key.id)))
        }
        Err(other) => Err(other.into()),
    }
}

pub(super) async fn by_hash(conn: &mut PgConnection, hash: &str) -> Result<Option<ApiKey>> {
    let row =
        sqlx::query("SELECT id, org, hash, label, created_at FROM undolog_api_key_by_hash($1)")
            .bind(hash)
            .fetch_optional(conn)
            .await?;
    row.as_ref().map(rows::api_key).transpose()
}

pub(super) async fn any(conn: &mut PgConnection) -> Result<bool> {
    Ok(sqlx::query("SELECT undolog_has_api_keys()")
        .fetch_one(conn)
        .await?
        .try_get(0)?)
}
