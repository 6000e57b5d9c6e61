//! Schema migrations, applied at start-up as the connecting (owning) user.
//!
//! All pending migrations run in one transaction that first takes a transaction-scoped advisory
//! lock on [`MIGRATION_LOCK`]: processes starting together against one database take turns, and
//! the later ones find nothing left to do. DDL is transactional in PostgreSQL, so a failed
//! migration leaves the schema as it was.

use sqlx::{Connection, PgConnection, Row};

use super::APP_ROLE;
use crate::{Error, Result};

/// Every migration this binary knows, by version.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("0001_init.sql")),
    (2, include_str!("0002_api_keys.sql")),
    (3, include_str!("0003_expect_rows.sql")),
    (4, include_str!("0004_roles_and_claims.sql")),
    (5, include_str!("0005_verdicts.sql")),
    (6, include_str!("0006_executors.sql")),
    (7, include_str!("0007_decided_via.sql")),
    (8, include_str!("0008_planned_writes.sql")),
    (9, include_str!("0009_lookup_indexes.sql")),
    (10, include_str!("0010_effect_key_by_id.sql")),
    (11, include_str!("0011_insert_new_effect.sql")),
    (12, include_str!("0012_fewer_statements.sql")),
    (13, include_str!("0013_one_key_by_id.sql")),
    (14, include_str!("0014_references_checked_by_writes.sql")),
    (15, include_str!("0015_one_pending_index.sql")),
    (16, include_str!("0016_undo_entries_on_effects.sql")),
    (17, include_str!("0017_lease_tokens.sql")),
    (18, include_str!("0018_session_openers.sql")),
];

/// The newest version in [`MIGRATIONS`].
pub(super) const LATEST: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// The advisory-lock key of migrations: the bytes of "undolog!" (`Tx::lock` keys are hashes of
/// call signatures; a collision could only make a call wait while a migration runs).
const MIGRATION_LOCK: i64 = i64::from_be_bytes(*b"undolog!");

pub(super) async fn apply(conn: &mut PgConnection) -> Result<()> {
    apply_up_to(conn, LATEST).await
}

/// Applies the migrations after the database's version, up to `last`.
async fn apply_up_to(conn: &mut PgConnection, last: i64) -> Result<()> {
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS schema_migrations \
         (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
    )
    .execute(&mut *tx)
    .await?;
    let supported = LATEST;
    let found = current_version(&mut tx).await?;
    if found > supported {
        return Err(Error::SchemaTooNew { found, supported });
    }
    let due = MIGRATIONS.iter().filter(|(v, _)| *v > found && *v <= last);
    for &(version, sql) in due {
        sqlx::raw_sql(sql).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)")
            .bind(version)
            .bind(undolog_types::Timestamp::now().as_millis())
            .execute(&mut *tx)
            .await?;
        tracing::info!(version, "applied schema migration");
    }
    tx.commit().await?;
    Ok(())
}

pub(super) async fn current_version(conn: &mut PgConnection) -> Result<i64> {
    Ok(
        sqlx::query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
            .fetch_one(conn)
            .await?
            .try_get(0)?,
    )
}

/// Refuses to run when the application role could read past row-level security: a role made a
/// superuser or given BYPASSRLS by hand would silently undo the org isolation.
pub(super) async fn check_app_role(conn: &mut PgConnection, url: &str) -> Result<()> {
    let unsafe_role: bool =
        sqlx::query("SELECT rolsuper OR rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = $1")
            .bind(APP_ROLE)
            .fetch_one(conn)
            .await?
            .try_get(0)?;
    if unsafe_role {
        return Err(Error::Open {
            url: url.to_owned(),
            reason: format!(
                "the role {APP_ROLE} is a superuser or may bypass row-level security, so orgs \
                 would not be kept apart; run ALTER ROLE {APP_ROLE} NOSUPERUSER NOBYPASSRLS"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sqlx::Connection;
    use undolog_types::{OrgId, SessionId, Timestamp};

    use super::*;
    use crate::{PostgresOptions, PostgresStore, Store, scratch::ScratchDatabase};

    /// Undo entries kept before version 16, rows of `undo_stack`, move onto their effects: each
    /// session's stack reads as it did, in the order pushed (not the effects' order), and a push
    /// made after the upgrade lands on top.
    #[tokio::test]
    async fn undo_entries_kept_before_version_16_keep_their_order() {
        // Effect n's id.
        let id = |n: u8| format!("00000000-0000-7000-8000-0000000000{n:02}");
        let db = ScratchDatabase::new("undolog_test_migrate");
        let mut owner = PgConnection::connect(&db.url()).await.unwrap();
        apply_up_to(&mut owner, 15).await.unwrap();
        // Four effects in acme's s1, one in its s2, one in another org's s1; five pushed.
        db.query(&format!(
            "INSERT INTO sessions (org, id, state, next_seq, created_at, updated_at) VALUES \
               ('acme', 's1', 'active', 4, 1, 1), ('acme', 's2', 'active', 1, 1, 1), \
               ('other', 's1', 'active', 1, 1, 1); \
             INSERT INTO effects (id, org, session, seq, tool, args, signature, tier, state, \
                                  created_at, updated_at) \
             SELECT id, org, session, seq, 'transfer', '{{}}', id, 'compensable', 'committed', 1, 1 \
               FROM (VALUES ('{0}', 'acme', 's1', 0), ('{1}', 'acme', 's1', 1), \
                            ('{2}', 'acme', 's1', 2), ('{3}', 'acme', 's1', 3), \
                            ('{4}', 'acme', 's2', 0), ('{5}', 'other', 's1', 0)) \
                    AS v (id, org, session, seq); \
             INSERT INTO undo_stack (org, session, effect_id, pushed_at) VALUES \
               ('acme', 's1', '{2}', 10), ('other', 's1', '{5}', 11), ('acme', 's1', '{0}', 12), \
               ('acme', 's2', '{4}', 13), ('acme', 's1', '{1}', 14)",
            id(0),
            id(1),
            id(2),
            id(3),
            id(4),
            id(5),
        ));

        let store = PostgresStore::open(PostgresOptions::new(db.url()))
            .await
            .unwrap();
        let stack = |org: &'static str, session: &'static str| {
            let store = &store;
            async move {
                let mut tx = store.begin(&OrgId::new(org).unwrap()).await.unwrap();
                let ids = tx
                    .undo_stack(&SessionId::new(session).unwrap())
                    .await
                    .unwrap();
                ids.iter().map(ToString::to_string).collect::<Vec<_>>()
            }
        };
        assert_eq!(stack("acme", "s1").await, [id(2), id(0), id(1)]);
        assert_eq!(stack("acme", "s2").await, [id(4)]);
        assert_eq!(stack("other", "s1").await, [id(5)]);
        assert_eq!(db.query("SELECT to_regclass('undo_stack') IS NULL"), "t");

        let mut tx = store.begin(&OrgId::new("acme").unwrap()).await.unwrap();
        let session = SessionId::new("s1").unwrap();
        tx.push_undo(&session, id(3).parse().unwrap(), Timestamp(20))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(stack("acme", "s1").await, [id(2), id(0), id(1), id(3)]);
    }
}
