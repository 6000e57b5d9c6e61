//! Schema migrations, applied in order at start-up, each in its own transaction.

use sqlx::{Row, SqlitePool};

use crate::{Error, Result};

/// Every migration this binary knows, by version.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("0001_init.sql")),
    (2, include_str!("0002_api_keys.sql")),
    (3, include_str!("0003_roles_and_claims.sql")),
    (4, include_str!("0004_verdicts.sql")),
    (5, include_str!("0005_executors.sql")),
];

pub(super) async fn apply(pool: &SqlitePool) -> Result<()> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
    )
    .execute(pool)
    .await?;
    let supported = MIGRATIONS.last().map_or(0, |(v, _)| *v);
    let found = current_version(pool).await?;
    if found > supported {
        return Err(Error::SchemaTooNew { found, supported });
    }
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        // Another process may have migrated while this one waited for the lock.
        let now: i64 = sqlx::query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        if now >= version {
            continue;
        }
        sqlx::raw_sql(sql).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)")
            .bind(version)
            .bind(undolog_types::Timestamp::now().as_millis())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        tracing::info!(version, "applied schema migration");
    }
    Ok(())
}

pub(super) async fn current_version(pool: &SqlitePool) -> Result<i64> {
    Ok(
        sqlx::query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
            .fetch_one(pool)
            .await?
            .try_get(0)?,
    )
}
