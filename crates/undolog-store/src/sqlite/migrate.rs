//! Schema migrations, applied in order at start-up, each in its own transaction.

use rusqlite::{Connection, params};

use super::connection::Shared;
use crate::{Error, Result};

/// Every migration this binary knows, by version.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("0001_init.sql")),
    (2, include_str!("0002_api_keys.sql")),
    (3, include_str!("0003_roles_and_claims.sql")),
    (4, include_str!("0004_verdicts.sql")),
    (5, include_str!("0005_executors.sql")),
    (6, include_str!("0006_decided_via.sql")),
    (7, include_str!("0007_lease_tokens.sql")),
    (8, include_str!("0008_session_openers.sql")),
];

pub(super) async fn apply(conn: &Shared) -> Result<()> {
    let mut held = conn.take().await?;
    Shared::with(&mut held, |conn| {
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations \
             (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
        )
    })
    .await?;
    let supported = MIGRATIONS.last().map_or(0, |(v, _)| *v);
    let found = Shared::with(&mut held, current_version).await?;
    if found > supported {
        return Err(Error::SchemaTooNew { found, supported });
    }
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        let applied = Shared::with(&mut held, |conn| {
            let tx = rusqlite::Transaction::new_unchecked(
                conn,
                rusqlite::TransactionBehavior::Immediate,
            )?;
            // Another process may have migrated while this one waited for the lock.
            if current_version(&tx)? >= version {
                return Ok(false);
            }
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                params![version, undolog_types::Timestamp::now().as_millis()],
            )?;
            tx.commit()?;
            Ok(true)
        })
        .await?;
        if applied {
            tracing::info!(version, "applied schema migration");
        }
    }
    Ok(())
}

pub(super) fn current_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |row| row.get(0),
    )
}
