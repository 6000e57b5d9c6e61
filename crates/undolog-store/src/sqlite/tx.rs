//! One `BEGIN IMMEDIATE` transaction, bound to one org.

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use undolog_types::{
    ApprovalId, ApprovalState, EffectId, LockKey, OrgId, SessionId, Signature, Timestamp,
};

use super::immediate::Immediate;
use crate::{
    Approval, Effect, Error, Result, Session, Snapshot, Tx,
    rows::{self, APPROVAL_COLUMNS, EFFECT_COLUMNS, SESSION_COLUMNS},
};

pub(super) struct SqliteTx {
    tx: Immediate,
    org: OrgId,
}

impl SqliteTx {
    pub(super) fn new(tx: Immediate, org: OrgId) -> SqliteTx {
        SqliteTx { tx, org }
    }

    async fn fetch_all<T>(
        &mut self,
        sql: &str,
        binds: &[&str],
        map: fn(&SqliteRow) -> Result<T>,
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
        map: fn(&SqliteRow) -> Result<T>,
    ) -> Result<Option<T>> {
        Ok(self.fetch_all(sql, binds, map).await?.into_iter().next())
    }
}

#[async_trait]
impl Tx for SqliteTx {
    async fn lock(&mut self, _key: LockKey) -> Result<()> {
        Ok(()) // BEGIN IMMEDIATE already holds the database's only write lock.
    }

    async fn session(&mut self, id: &SessionId) -> Result<Option<Session>> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE org = ? AND id = ?");
        self.fetch_optional(&sql, &[id.as_str()], rows::session)
            .await
    }

    async fn put_session(&mut self, s: &Session) -> Result<()> {
        sqlx::query(
            "INSERT INTO sessions (org, id, state, next_seq, failed_effect, undo_holder, \
             undo_expires_at, run_of, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (org, id) DO UPDATE SET state = excluded.state, next_seq = excluded.next_seq, \
             failed_effect = excluded.failed_effect, undo_holder = excluded.undo_holder, \
             undo_expires_at = excluded.undo_expires_at, updated_at = excluded.updated_at",
        )
        .bind(self.org.as_str())
        .bind(s.id.as_str())
        .bind(s.state.as_str())
        .bind(s.next_seq)
        .bind(s.failed_effect.map(|e| e.to_string()))
        .bind(s.undo_claim.as_ref().map(|c| c.holder.clone()))
        .bind(s.undo_claim.as_ref().map(|c| c.expires_at.as_millis()))
        .bind(&s.run_of)
        .bind(s.created_at.as_millis())
        .bind(s.updated_at.as_millis())
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn sessions(&mut self) -> Result<Vec<Session>> {
        let sql =
            format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE org = ? ORDER BY created_at, id");
        self.fetch_all(&sql, &[], rows::session).await
    }

    async fn latest_run(&mut self, principal: &str) -> Result<Option<Session>> {
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE org = ? AND run_of = ? \
             ORDER BY created_at DESC, id DESC LIMIT 1"
        );
        self.fetch_optional(&sql, &[principal], rows::session).await
    }

    async fn effect(&mut self, id: EffectId) -> Result<Option<Effect>> {
        let sql = format!("SELECT {EFFECT_COLUMNS} FROM effects WHERE org = ? AND id = ?");
        self.fetch_optional(&sql, &[&id.to_string()], rows::effect)
            .await
    }

    async fn latest_effect_by_signature(
        &mut self,
        signature: &Signature,
    ) -> Result<Option<Effect>> {
        let sql = format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = ? AND signature = ? ORDER BY seq DESC LIMIT 1"
        );
        self.fetch_optional(&sql, &[signature.as_str()], rows::effect)
            .await
    }

    async fn latest_effect_by_key(&mut self, key: &str) -> Result<Option<Effect>> {
        let sql = format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = ? AND idempotency_key = ? \
             ORDER BY created_at DESC, id DESC LIMIT 1"
        );
        self.fetch_optional(&sql, &[key], rows::effect).await
    }

    async fn insert_effect(&mut self, e: &Effect) -> Result<()> {
        let result = sqlx::query(
            "INSERT INTO effects (id, org, session, seq, tool, args, step, signature, idempotency_key, \
             tier, compensation, state, result, error, approval, lease_holder, lease_expires_at, \
             created_at, updated_at, completed_at, resolved_by, verdicts) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        .bind(&e.resolved_by)
        .bind(e.verdicts.as_ref().map(serde_json::to_string).transpose()?)
        .execute(&mut *self.tx)
        .await;
        match result {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                Err(Error::AlreadyExists(format!("effect {}", e.id)))
            }
            Err(other) => Err(other.into()),
        }
    }

    async fn update_effect(&mut self, e: &Effect) -> Result<()> {
        let done = sqlx::query(
            "UPDATE effects SET state = ?, result = ?, error = ?, approval = ?, lease_holder = ?, \
             lease_expires_at = ?, updated_at = ?, completed_at = ?, resolved_by = ?, verdicts = ? \
             WHERE org = ? AND id = ?",
        )
        .bind(e.state.as_str())
        .bind(e.result.as_ref().map(serde_json::to_string).transpose()?)
        .bind(&e.error)
        .bind(e.approval.map(|a| a.to_string()))
        .bind(e.lease.as_ref().map(|l| l.holder.clone()))
        .bind(e.lease.as_ref().map(|l| l.expires_at.as_millis()))
        .bind(e.updated_at.as_millis())
        .bind(e.completed_at.map(Timestamp::as_millis))
        .bind(&e.resolved_by)
        .bind(e.verdicts.as_ref().map(serde_json::to_string).transpose()?)
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
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = ? AND session = ? ORDER BY seq"
        );
        self.fetch_all(&sql, &[session.as_str()], rows::effect)
            .await
    }

    async fn expired_leases(&mut self, now: Timestamp) -> Result<Vec<Effect>> {
        let sql = format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = ? AND state = 'pending' \
             AND lease_expires_at <= ? ORDER BY created_at, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(self.org.as_str())
            .bind(now.as_millis())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(rows::effect).collect()
    }

    async fn approval(&mut self, id: ApprovalId) -> Result<Option<Approval>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE org = ? AND id = ?");
        self.fetch_optional(&sql, &[&id.to_string()], rows::approval)
            .await
    }

    async fn insert_approval(&mut self, a: &Approval) -> Result<()> {
        sqlx::query(
            "INSERT INTO approvals (id, org, session, effect_id, signature, state, requested_at, \
             expires_at, requested_by, decided_by, decided_at, reason) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(a.id.to_string())
        .bind(self.org.as_str())
        .bind(a.session.as_str())
        .bind(a.effect.to_string())
        .bind(a.signature.as_str())
        .bind(a.state.as_str())
        .bind(a.requested_at.as_millis())
        .bind(a.expires_at.as_millis())
        .bind(&a.requested_by)
        .bind(&a.decided_by)
        .bind(a.decided_at.map(Timestamp::as_millis))
        .bind(&a.reason)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn update_approval(&mut self, a: &Approval) -> Result<()> {
        let done = sqlx::query(
            "UPDATE approvals SET state = ?, decided_by = ?, decided_at = ?, reason = ? \
             WHERE org = ? AND id = ?",
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
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE org = ? AND state = ? ORDER BY requested_at, id"
                );
                self.fetch_all(&sql, &[state.as_str()], rows::approval)
                    .await
            }
            None => {
                let sql = format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE org = ? ORDER BY requested_at, id"
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
            "INSERT INTO undo_stack (org, session, position, effect_id, pushed_at) \
             SELECT ?1, ?2, COALESCE(MAX(position), 0) + 1, ?3, ?4 FROM undo_stack WHERE org = ?1 AND session = ?2",
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
        let sql = "SELECT effect_id AS id FROM undo_stack WHERE org = ? AND session = ? ORDER BY position";
        self.fetch_all(sql, &[session.as_str()], |row| {
            let id: String = sqlx::Row::try_get(row, "id")?;
            id.parse()
                .map_err(|e: undolog_types::Error| Error::Corrupt(e.to_string()))
        })
        .await
    }

    async fn insert_snapshot(&mut self, s: &Snapshot) -> Result<()> {
        sqlx::query(
            "INSERT INTO session_snapshots (org, session, taken_at, body) VALUES (?, ?, ?, ?)",
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
        let sql = "SELECT org, session, taken_at, body FROM session_snapshots WHERE org = ? AND session = ? ORDER BY id";
        self.fetch_all(sql, &[session.as_str()], rows::snapshot)
            .await
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        self.tx.commit().await?;
        Ok(())
    }
}
