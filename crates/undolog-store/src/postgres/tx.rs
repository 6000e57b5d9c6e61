//! One READ COMMITTED transaction as the application role, bound to one org.
//!
//! Queries still say `WHERE org = $1`: row-level security would hide other orgs' rows anyway, but
//! the condition lets the planner use the `(org, …)` indexes and keeps the SQL the same as
//! SQLite's.

use async_trait::async_trait;
use sqlx::{Postgres, Transaction, postgres::PgRow};
use undolog_types::{
    ApprovalId, ApprovalState, EffectId, LockKey, OrgId, SessionId, Signature, Timestamp,
};

use crate::{
    Approval, Effect, Error, Result, Session, Snapshot, Tx,
    rows::{self, APPROVAL_COLUMNS, EFFECT_COLUMNS, SESSION_COLUMNS, SNAPSHOT_COLUMNS},
};

pub(super) struct PostgresTx {
    tx: Transaction<'static, Postgres>,
    org: OrgId,
}

impl PostgresTx {
    pub(super) fn new(tx: Transaction<'static, Postgres>, org: OrgId) -> PostgresTx {
        PostgresTx { tx, org }
    }

    /// Runs `sql` with the org as `$1` and `binds` as `$2…`.
    async fn fetch_all<T>(
        &mut self,
        sql: &str,
        binds: &[&str],
        map: fn(&PgRow) -> Result<T>,
    ) -> Result<Vec<T>> {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        let mut query = sqlx::query(sql).bind(self.org.as_str().to_owned());
        for b in binds {
            query = query.bind((*b).to_owned());
        }
        query
            .fetch_all(&mut *self.tx)
            .await?
            .iter()
            .map(map)
            .collect()
    }

    async fn fetch_optional<T>(
        &mut self,
        sql: &str,
        binds: &[&str],
        map: fn(&PgRow) -> Result<T>,
    ) -> Result<Option<T>> {
        Ok(self.fetch_all(sql, binds, map).await?.into_iter().next())
    }
}

/// A unique violation becomes [`Error::AlreadyExists`] naming `what`.
fn unique(result: sqlx::Result<sqlx::postgres::PgQueryResult>, what: String) -> Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
            Err(Error::AlreadyExists(what))
        }
        Err(other) => Err(other.into()),
    }
}

#[async_trait]
impl Tx for PostgresTx {
    async fn lock(&mut self, key: LockKey) -> Result<()> {
        // Released at commit or rollback; never held across transactions on a pooled connection.
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(key.as_i64())
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Locks the row: a transaction that reads a session may write it back, and must not do so
    /// from a copy another transaction has since changed.
    async fn session(&mut self, id: &SessionId) -> Result<Option<Session>> {
        let sql =
            format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE org = $1 AND id = $2 FOR UPDATE");
        self.fetch_optional(&sql, &[id.as_str()], rows::session)
            .await
    }

    async fn put_session(&mut self, s: &Session) -> Result<()> {
        sqlx::query(
            "INSERT INTO sessions (org, id, state, next_seq, failed_effect, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (org, id) DO UPDATE SET state = excluded.state, next_seq = excluded.next_seq, \
             failed_effect = excluded.failed_effect, updated_at = excluded.updated_at",
        )
        .bind(self.org.as_str())
        .bind(s.id.as_str())
        .bind(s.state.as_str())
        .bind(s.next_seq)
        .bind(s.failed_effect.map(|e| e.to_string()))
        .bind(s.created_at.as_millis())
        .bind(s.updated_at.as_millis())
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn sessions(&mut self) -> Result<Vec<Session>> {
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE org = $1 ORDER BY created_at, id"
        );
        self.fetch_all(&sql, &[], rows::session).await
    }

    async fn effect(&mut self, id: EffectId) -> Result<Option<Effect>> {
        let sql = format!("SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND id = $2");
        self.fetch_optional(&sql, &[&id.to_string()], rows::effect)
            .await
    }

    async fn latest_effect_by_signature(
        &mut self,
        signature: &Signature,
    ) -> Result<Option<Effect>> {
        let sql = format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND signature = $2 \
             ORDER BY seq DESC LIMIT 1"
        );
        self.fetch_optional(&sql, &[signature.as_str()], rows::effect)
            .await
    }

    async fn latest_effect_by_key(&mut self, key: &str) -> Result<Option<Effect>> {
        let sql = format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND idempotency_key = $2 \
             ORDER BY created_at DESC, id DESC LIMIT 1"
        );
        self.fetch_optional(&sql, &[key], rows::effect).await
    }

    async fn insert_effect(&mut self, e: &Effect) -> Result<()> {
        let result = sqlx::query(
            "INSERT INTO effects (id, org, session, seq, tool, args, step, signature, idempotency_key, \
             tier, compensation, state, result, error, approval, lease_holder, lease_expires_at, \
             created_at, updated_at, completed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18, $19, $20)",
        )
        .bind(e.id.to_string())
        .bind(self.org.as_str())
        .bind(e.session.as_str())
        .bind(e.seq)
        .bind(&e.tool)
        .bind(e.args.canonical())
        .bind(e.step.map(|s| s as i64))
        .bind(e.signature.as_str())
        .bind(&e.idempotency_key)
        .bind(e.tier.as_str())
        .bind(e.compensation.as_ref().map(serde_json::to_string).transpose()?)
        .bind(e.state.as_str())
        .bind(e.result.as_ref().map(serde_json::to_string).transpose()?)
        .bind(&e.error)
        .bind(e.approval.map(|a| a.to_string()))
        .bind(e.lease.as_ref().map(|l| l.holder.clone()))
        .bind(e.lease.as_ref().map(|l| l.expires_at.as_millis()))
        .bind(e.created_at.as_millis())
        .bind(e.updated_at.as_millis())
        .bind(e.completed_at.map(Timestamp::as_millis))
        .execute(&mut *self.tx)
        .await;
        unique(result, format!("effect {}", e.id))
    }

    async fn update_effect(&mut self, e: &Effect) -> Result<()> {
        let done = sqlx::query(
            "UPDATE effects SET state = $1, result = $2, error = $3, approval = $4, \
             lease_holder = $5, lease_expires_at = $6, updated_at = $7, completed_at = $8 \
             WHERE org = $9 AND id = $10",
        )
        .bind(e.state.as_str())
        .bind(e.result.as_ref().map(serde_json::to_string).transpose()?)
        .bind(&e.error)
        .bind(e.approval.map(|a| a.to_string()))
        .bind(e.lease.as_ref().map(|l| l.holder.clone()))
        .bind(e.lease.as_ref().map(|l| l.expires_at.as_millis()))
        .bind(e.updated_at.as_millis())
        .bind(e.completed_at.map(Timestamp::as_millis))
        .bind(self.org.as_str())
        .bind(e.id.to_string())
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(Error::NotFound {
                what: "effect",
                id: e.id.to_string(),
            });
        }
        Ok(())
    }

    async fn session_effects(&mut self, session: &SessionId) -> Result<Vec<Effect>> {
        let sql = format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND session = $2 ORDER BY seq"
        );
        self.fetch_all(&sql, &[session.as_str()], rows::effect)
            .await
    }

    async fn expired_leases(&mut self, now: Timestamp) -> Result<Vec<Effect>> {
        let sql = format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND state = 'pending' \
             AND lease_expires_at < $2 ORDER BY created_at, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(self.org.as_str())
            .bind(now.as_millis())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(rows::effect).collect()
    }

    async fn approval(&mut self, id: ApprovalId) -> Result<Option<Approval>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE org = $1 AND id = $2");
        self.fetch_optional(&sql, &[&id.to_string()], rows::approval)
            .await
    }

    async fn insert_approval(&mut self, a: &Approval) -> Result<()> {
        let result = sqlx::query(
            "INSERT INTO approvals (id, org, session, effect_id, signature, state, requested_at, \
             expires_at, decided_by, decided_at, reason) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(a.id.to_string())
        .bind(self.org.as_str())
        .bind(a.session.as_str())
        .bind(a.effect.to_string())
        .bind(a.signature.as_str())
        .bind(a.state.as_str())
        .bind(a.requested_at.as_millis())
        .bind(a.expires_at.as_millis())
        .bind(&a.decided_by)
        .bind(a.decided_at.map(Timestamp::as_millis))
        .bind(&a.reason)
        .execute(&mut *self.tx)
        .await;
        unique(result, format!("approval {}", a.id))
    }

    async fn update_approval(&mut self, a: &Approval) -> Result<()> {
        let done = sqlx::query(
            "UPDATE approvals SET state = $1, decided_by = $2, decided_at = $3, reason = $4 \
             WHERE org = $5 AND id = $6",
        )
        .bind(a.state.as_str())
        .bind(&a.decided_by)
        .bind(a.decided_at.map(Timestamp::as_millis))
        .bind(&a.reason)
        .bind(self.org.as_str())
        .bind(a.id.to_string())
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(Error::NotFound {
                what: "approval",
                id: a.id.to_string(),
            });
        }
        Ok(())
    }

    async fn approvals(&mut self, state: Option<ApprovalState>) -> Result<Vec<Approval>> {
        match state {
            Some(state) => {
                let sql = format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE org = $1 AND state = $2 \
                     ORDER BY requested_at, id"
                );
                self.fetch_all(&sql, &[state.as_str()], rows::approval)
                    .await
            }
            None => {
                let sql = format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE org = $1 \
                     ORDER BY requested_at, id"
                );
                self.fetch_all(&sql, &[], rows::approval).await
            }
        }
    }

    async fn push_undo(
        &mut self,
        session: &SessionId,
        effect: EffectId,
        at: Timestamp,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO undo_stack (org, session, effect_id, pushed_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(self.org.as_str())
        .bind(session.as_str())
        .bind(effect.to_string())
        .bind(at.as_millis())
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn undo_stack(&mut self, session: &SessionId) -> Result<Vec<EffectId>> {
        let sql = "SELECT effect_id FROM undo_stack WHERE org = $1 AND session = $2 \
                   ORDER BY position";
        self.fetch_all(sql, &[session.as_str()], |row| {
            rows::parsed(row, "effect_id")
        })
        .await
    }

    async fn insert_snapshot(&mut self, s: &Snapshot) -> Result<()> {
        sqlx::query(
            "INSERT INTO session_snapshots (org, session, taken_at, body) VALUES ($1, $2, $3, $4)",
        )
        .bind(self.org.as_str())
        .bind(s.session.as_str())
        .bind(s.taken_at.as_millis())
        .bind(serde_json::to_string(&s.body)?)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn snapshots(&mut self, session: &SessionId) -> Result<Vec<Snapshot>> {
        let sql = format!(
            "SELECT {SNAPSHOT_COLUMNS} FROM session_snapshots WHERE org = $1 AND session = $2 \
             ORDER BY id"
        );
        self.fetch_all(&sql, &[session.as_str()], rows::snapshot)
            .await
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        self.tx.commit().await?;
        Ok(())
    }
}
