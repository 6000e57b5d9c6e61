//! API keys: looked up by hash before the org is known, so outside any org's transaction.
//!
//! The application role may insert a key for the org its transaction names, and otherwise reach
//! the table only through two SECURITY DEFINER functions (see `0002_api_keys.sql` for why).
//! Listing and revoking are the operator's and run as the owning user (`0004_roles_and_claims.sql`).

use sqlx::{PgConnection, Row};
use undolog_types::{OrgId, Timestamp};

use crate::{ApiKey, Error, Result, rows, rows::API_KEY_COLUMNS};

pub(super) async fn insert(conn: &mut PgConnection, key: &ApiKey) -> Result<()> {
    let result = sqlx::query(
        "INSERT INTO api_keys (id, org, hash, role, label, created_at, revoked_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&key.id)
    .bind(key.org.as_str())
    .bind(&key.hash)
    .bind(key.role.as_str())
    .bind(&key.label)
    .bind(key.created_at.as_millis())
    .bind(key.revoked_at.map(Timestamp::as_millis))
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
    let sql = format!("SELECT {API_KEY_COLUMNS} FROM undolog_api_key_by_hash($1)");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(hash)
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(rows::api_key).transpose()
}

/// As the owning user.
pub(super) async fn list(conn: &mut PgConnection, org: Option<&OrgId>) -> Result<Vec<ApiKey>> {
    let sql = format!(
        "SELECT {API_KEY_COLUMNS} FROM api_keys WHERE $1::text IS NULL OR org = $1 \
         ORDER BY created_at, id"
    );
    let found = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(org.map(OrgId::as_str))
        .fetch_all(conn)
        .await?;
    found.iter().map(rows::api_key).collect()
}

/// As the owning user.
pub(super) async fn revoke(
    conn: &mut PgConnection,
    id: &str,
    at: Timestamp,
) -> Result<Option<ApiKey>> {
    sqlx::query("UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
        .bind(id)
        .bind(at.as_millis())
        .execute(&mut *conn)
        .await?;
    let sql = format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE id = $1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
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
