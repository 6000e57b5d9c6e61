//! One READ COMMITTED transaction as the application role, bound to one org, in as few round trips
//! as its reads allow.
//!
//! Nothing is sent when the transaction begins. BEGIN, the role and org settings, advisory locks
//! and every write wait in a queue and travel, as one simple-protocol message, ahead of the next
//! read or with the COMMIT: an intercept that reads is two round trips (lock, session and lookup;
//! writes and COMMIT), one written on remembered rows (`Tx::replace_session`) one, and so is a
//! commit. A queued statement that fails aborts the rest of its message, COMMIT included; a write
//! that must change a row and finds none raises `no_data_found` in the server
//! (`undolog_expect_rows`, migration 3), and one whose row changed since it was remembered raises
//! `UL001` (migration 8), for the same reason. The error reaches the caller from the read or the
//! commit that carried the write. Values are written into the text as literals (`literal`); the
//! writes every call makes are calls of functions (migration 8), whose plans each connection makes
//! once. Some queued statements join into one (`Statement`, in `queued`): a new call's check that
//! no earlier effect exists travels inside the insert of its effect (`undolog_insert_new_effect`,
//! migration 11; see `PostgresTx::take_check`), locks taken one after another are one statement,
//! and so are an outcome and the undo entry of its effect (migration 12).
//!
//! Queries still say `WHERE org = …`: row-level security would hide other orgs' rows anyway, but
//! the condition lets the planner use the `(…, org)` indexes and keeps the SQL the same as
//! SQLite's.

use async_trait::async_trait;
use futures::TryStreamExt;
use sqlx::{Either, Postgres, pool::PoolConnection, postgres::PgRow};
use undolog_types::{
    ApprovalId, ApprovalState, EffectId, LockKey, OrgId, SessionId, Signature, Timestamp,
};

use super::{
    APP_ROLE, SETTINGS,
    literal::{Value, render},
    queued::{Check, OnError, Queued, Statement},
};
use crate::{
    Approval, Effect, EffectLookup, Error, Lease, Result, Session, Snapshot, Tx,
    rows::{self, APPROVAL_COLUMNS, EFFECT_COLUMNS, SESSION_COLUMNS, SNAPSHOT_COLUMNS},
};

mod statements;
use statements::{first, holder_and_expiry};

pub(super) struct PostgresTx {
    /// `None` once the transaction has ended.
    conn: Option<PoolConnection<Postgres>>,
    org: OrgId,
    /// Statements not yet sent, oldest first.
    queued: Vec<Queued>,
    /// BEGIN has reached the server, and COMMIT has not: dropping the transaction rolls it back.
    open: bool,
    /// A statement failed, so the server has aborted the transaction (a COMMIT would roll back).
    failed: bool,
}

/// An effect's insert, with the org as `$1`, its columns after and its lease token last.
const INSERT_EFFECT: &str = "SELECT undolog_insert_effect($1, $2, $3, $4, $5, $6, $7, $8, $9, \
    $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)";
/// The same, with how to look for an earlier effect of the call, which must not exist, before
/// the lease token.
const INSERT_NEW_EFFECT: &str = "SELECT undolog_insert_new_effect($1, $2, $3, $4, $5, $6, $7, \
    $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)";

#[async_trait]
impl Tx for PostgresTx {
    /// Queued: the lock is taken, in order, by the message that carries the next read or COMMIT;
    /// locks queued one after another are one statement. Released at commit or rollback; never
    /// held across transactions on a pooled connection.
    async fn lock(&mut self, key: LockKey) -> Result<()> {
        if let Some(Queued {
            statement: Statement::Locks(keys),
            ..
        }) = self.queued.last_mut()
        {
            keys.push(key.as_i64());
            return Ok(());
        }
        self.queued.push(Queued {
            statement: Statement::Locks(vec![key.as_i64()]),
            on_error: OnError::Database,
        });
        Ok(())
    }

    /// Locks the row: a transaction that reads a session may write it back, and must not do so
    /// from a copy another transaction has since changed.
    async fn session(&mut self, id: &SessionId) -> Result<Option<Session>> {
        let sql = self.session_sql(id)?;
        self.read_first(&sql, rows::session).await
    }

    async fn put_session(&mut self, s: &Session) -> Result<()> {
        let failed_effect = s.failed_effect.map(|e| e.to_string());
        let sql = self.sql(
            "INSERT INTO sessions (org, id, state, next_seq, failed_effect, undo_holder, \
             undo_expires_at, run_of, opened_by, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (org, id) DO UPDATE SET state = excluded.state, next_seq = excluded.next_seq, \
             failed_effect = excluded.failed_effect, undo_holder = excluded.undo_holder, \
             undo_expires_at = excluded.undo_expires_at, updated_at = excluded.updated_at",
            &[
                s.id.as_str().into(),
                s.state.as_str().into(),
                s.next_seq.into(),
                failed_effect.as_deref().into(),
                s.undo_claim.as_ref().map(|c| c.holder.as_str()).into(),
                s.undo_claim.as_ref().map(|c| c.expires_at.as_millis()).into(),
                s.run_of.as_deref().into(),
                s.opened_by.as_deref().into(),
                s.created_at.as_millis().into(),
                s.updated_at.as_millis().into(),
            ],
        )?;
        self.queue(sql, OnError::Database);
        Ok(())
    }

    async fn sessions(&mut self) -> Result<Vec<Session>> {
        let sql = self.sql(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE org = $1 ORDER BY created_at, id"
            ),
            &[],
        )?;
        self.read(&sql, rows::session).await
    }

    async fn sessions_of(&mut self, caller: &str) -> Result<Vec<Session>> {
        let sql = self.sql(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE org = $1 AND (opened_by = $2 OR \
                 (opened_by IS NULL AND (run_of IS NULL OR run_of = $2))) ORDER BY created_at, id"
            ),
            &[caller.into()],
        )?;
        self.read(&sql, rows::session).await
    }

    async fn latest_run(&mut self, principal: &str) -> Result<Option<Session>> {
        let sql = self.sql(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE org = $1 AND run_of = $2 \
                 ORDER BY created_at DESC, id DESC LIMIT 1"
            ),
            &[principal.into()],
        )?;
        self.read_first(&sql, rows::session).await
    }

    async fn effect(&mut self, id: EffectId) -> Result<Option<Effect>> {
        let sql = self.sql(
            &format!("SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND id = $2"),
            &[id.to_string().as_str().into()],
        )?;
        self.read_first(&sql, rows::effect).await
    }

    async fn effects(&mut self, ids: &[EffectId]) -> Result<Vec<Effect>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = ids.iter().map(EffectId::to_string).collect();
        let values: Vec<Value<'_>> = ids.iter().map(Value::from).collect();
        let placeholders: Vec<String> = (2..ids.len() + 2).map(|n| format!("${n}")).collect();
        let sql = self.sql(
            &format!(
                "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND id IN ({})",
                placeholders.join(", ")
            ),
            &values,
        )?;
        self.read(&sql, rows::effect).await
    }

    /// One message for all the reads.
    async fn session_with_effects(
        &mut self,
        session: &SessionId,
        lookups: &[EffectLookup<'_>],
    ) -> Result<(Option<Session>, Vec<Option<Effect>>)> {
        let session = self.session_sql(session)?;
        let effects: Vec<Option<String>> = lookups
            .iter()
            .map(|lookup| self.lookup_sql(*lookup))
            .collect::<Result<_>>()?;
        let reads: Vec<&str> = std::iter::once(session.as_str())
            .chain(effects.iter().flatten().map(String::as_str))
            .collect();
        let mut rows = self.send(&reads).await?.into_iter();
        let session = first(rows.next(), rows::session)?;
        let effects = effects
            .iter()
            .map(|sql| match sql {
                Some(_) => first(rows.next(), rows::effect),
                None => Ok(None),
            })
            .collect::<Result<_>>()?;
        Ok((session, effects))
    }

    async fn latest_effect_by_signature(
        &mut self,
        signature: &Signature,
    ) -> Result<Option<Effect>> {
        self.latest_effect(EffectLookup::LatestBySignature(signature))
            .await
    }

    async fn latest_effect_by_key(&mut self, key: &str) -> Result<Option<Effect>> {
        self.latest_effect(EffectLookup::LatestByKey(key)).await
    }

    async fn insert_effect(&mut self, e: &Effect) -> Result<()> {
        let (id, args) = (e.id.to_string(), e.args.canonical());
        let compensation = e
            .compensation
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?;
        let result = e.result.as_ref().map(serde_json::to_string).transpose()?;
        let verdicts = e.verdicts.as_ref().map(serde_json::to_string).transpose()?;
        let approval = e.approval.map(|a| a.to_string());
        let check = self.take_check(e);
        let mut values: Vec<Value<'_>> = vec![
            id.as_str().into(),
            e.session.as_str().into(),
            e.seq.into(),
            e.tool.as_str().into(),
            args.as_str().into(),
            e.step.map(|s| s as i64).into(),
            e.signature.as_str().into(),
            e.idempotency_key.as_deref().into(),
            e.tier.as_str().into(),
            compensation.as_deref().into(),
            e.state.as_str().into(),
            result.as_deref().into(),
            e.error.as_deref().into(),
            approval.as_deref().into(),
            e.lease.as_ref().map(|l| l.holder.as_str()).into(),
            e.lease.as_ref().map(|l| l.expires_at.as_millis()).into(),
            e.created_at.as_millis().into(),
            e.updated_at.as_millis().into(),
            e.completed_at.map(Timestamp::as_millis).into(),
            e.resolved_by.as_deref().into(),
            verdicts.as_deref().into(),
        ];
        // Functions (migrations 8, 11 and 17): their statements are planned once per connection.
        let (function, on_error) = match &check {
            None => (INSERT_EFFECT, OnError::Exists(format!("effect {id}"))),
            Some(check) => {
                values.extend([Value::from(check.by()), Value::from(check.value())]);
                let call = check.value().to_owned();
                let effect = format!("effect {id}");
                (INSERT_NEW_EFFECT, OnError::NewEffect { call, effect })
            }
        };
        values.push(e.lease_token.as_ref().map(|t| t.as_str()).into());
        let sql = self.sql(function, &values)?;
        self.queue(sql, on_error);
        Ok(())
    }

    async fn update_effect(&mut self, e: &Effect) -> Result<()> {
        let id = e.id.to_string();
        let result = e.result.as_ref().map(serde_json::to_string).transpose()?;
        let verdicts = e.verdicts.as_ref().map(serde_json::to_string).transpose()?;
        let approval = e.approval.map(|a| a.to_string());
        let sql = self.sql(
            "UPDATE effects SET state = $3, result = $4, error = $5, approval = $6, \
             lease_holder = $7, lease_expires_at = $8, updated_at = $9, completed_at = $10, \
             resolved_by = $11, verdicts = $12, lease_token = $13 WHERE org = $1 AND id = $2",
            &[
                id.as_str().into(),
                e.state.as_str().into(),
                result.as_deref().into(),
                e.error.as_deref().into(),
                approval.as_deref().into(),
                e.lease.as_ref().map(|l| l.holder.as_str()).into(),
                e.lease.as_ref().map(|l| l.expires_at.as_millis()).into(),
                e.updated_at.as_millis().into(),
                e.completed_at.map(Timestamp::as_millis).into(),
                e.resolved_by.as_deref().into(),
                verdicts.as_deref().into(),
                e.lease_token.as_ref().map(|t| t.as_str()).into(),
            ],
        )?;
        self.queue_update(sql, "effect", id)
    }

    /// Queued, as one call of a function whose plan the connection keeps (migration 8).
    async fn replace_session(&mut self, before: &Session, after: &Session) -> Result<()> {
        let failed = |s: &Session| s.failed_effect.map(|e| e.to_string());
        let (was_failed, new_failed) = (failed(before), failed(after));
        let (was_holder, was_expires) = holder_and_expiry(before.undo_claim.as_ref());
        let (new_holder, new_expires) = holder_and_expiry(after.undo_claim.as_ref());
        let sql = self.sql(
            "SELECT undolog_replace_session($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
             $13, $14)",
            &[
                before.id.as_str().into(),
                before.state.as_str().into(),
                before.next_seq.into(),
                was_failed.as_deref().into(),
                was_holder.into(),
                was_expires.into(),
                before.updated_at.as_millis().into(),
                after.state.as_str().into(),
                after.next_seq.into(),
                new_failed.as_deref().into(),
                new_holder.into(),
                new_expires.into(),
                after.updated_at.as_millis().into(),
            ],
        )?;
        let id = before.id.to_string();
        self.queue(
            sql,
            OnError::Changed {
                what: "session",
                id,
            },
        );
        Ok(())
    }

    /// Queued, as [`Tx::replace_session`].
    async fn replace_effect(&mut self, before: &Effect, after: &Effect) -> Result<()> {
        let id = before.id.to_string();
        let approval = |e: &Effect| e.approval.map(|a| a.to_string());
        let (was_approval, new_approval) = (approval(before), approval(after));
        let result = after
            .result
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?;
        let verdicts = after
            .verdicts
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?;
        let (was_holder, was_expires) = holder_and_expiry(before.lease.as_ref());
        let (new_holder, new_expires) = holder_and_expiry(after.lease.as_ref());
        let args = self.sql(
            "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
             $19, $20, $21",
            &[
                id.as_str().into(),
                before.state.as_str().into(),
                before.error.as_deref().into(),
                was_approval.as_deref().into(),
                was_holder.into(),
                was_expires.into(),
                before.updated_at.as_millis().into(),
                before.completed_at.map(Timestamp::as_millis).into(),
                before.resolved_by.as_deref().into(),
                after.state.as_str().into(),
                result.as_deref().into(),
                after.error.as_deref().into(),
                new_approval.as_deref().into(),
                new_holder.into(),
                new_expires.into(),
                after.updated_at.as_millis().into(),
                after.completed_at.map(Timestamp::as_millis).into(),
                after.resolved_by.as_deref().into(),
                verdicts.as_deref().into(),
                after.lease_token.as_ref().map(|t| t.as_str()).into(),
            ],
        )?;
        self.queued.push(Queued {
            statement: Statement::ReplaceEffect {
                effect: before.id,
                args,
            },
            on_error: OnError::Changed { what: "effect", id },
        });
        Ok(())
    }

    /// Queued, as [`Tx::replace_session`]: the error comes with the next read or the commit.
    async fn expect_no_effect(&mut self, lookup: EffectLookup<'_>) -> Result<()> {
        let Some(check) = Check::of(lookup) else {
            return Ok(());
        };
        let sql = self.sql(
            "SELECT undolog_expect_no_effect($1, $2, $3)",
            &[check.by().into(), check.value().into()],
        )?;
        let id = check.value().to_owned();
        self.queued.push(Queued {
            statement: Statement::Check { sql, check },
            on_error: OnError::Changed { what: "call", id },
        });
        Ok(())
    }

    async fn session_effects(&mut self, session: &SessionId) -> Result<Vec<Effect>> {
        let sql = self.sql(
            &format!(
                "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND session = $2 ORDER BY seq"
            ),
            &[session.as_str().into()],
        )?;
        self.read(&sql, rows::effect).await
    }

    async fn expired_leases(&mut self, now: Timestamp) -> Result<Vec<Effect>> {
        let sql = self.sql(
            &format!(
                "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND state = 'pending' \
                 AND lease_expires_at <= $2 ORDER BY created_at, id"
            ),
            &[now.as_millis().into()],
        )?;
        self.read(&sql, rows::effect).await
    }

    async fn approval(&mut self, id: ApprovalId) -> Result<Option<Approval>> {
        let sql = self.sql(
            &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE org = $1 AND id = $2"),
            &[id.to_string().as_str().into()],
        )?;
        self.read_first(&sql, rows::approval).await
    }

    async fn insert_approval(&mut self, a: &Approval) -> Result<()> {
        let (id, effect) = (a.id.to_string(), a.effect.to_string());
        let sql = self.sql(
            "INSERT INTO approvals (org, id, session, effect_id, signature, state, requested_at, \
             expires_at, requested_by, decided_by, decided_via, decided_at, reason) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            &[
                id.as_str().into(),
                a.session.as_str().into(),
                effect.as_str().into(),
                a.signature.as_str().into(),
                a.state.as_str().into(),
                a.requested_at.as_millis().into(),
                a.expires_at.as_millis().into(),
                a.requested_by.as_deref().into(),
                a.decided_by.as_deref().into(),
                a.decided_via.as_deref().into(),
                a.decided_at.map(Timestamp::as_millis).into(),
                a.reason.as_deref().into(),
            ],
        )?;
        self.queue(sql, OnError::Exists(format!("approval {id}")));
        Ok(())
    }

    async fn update_approval(&mut self, a: &Approval) -> Result<()> {
        let id = a.id.to_string();
        let sql = self.sql(
            "UPDATE approvals SET state = $3, decided_by = $4, decided_via = $5, decided_at = $6, \
             reason = $7 WHERE org = $1 AND id = $2",
            &[
                id.as_str().into(),
                a.state.as_str().into(),
                a.decided_by.as_deref().into(),
                a.decided_via.as_deref().into(),
                a.decided_at.map(Timestamp::as_millis).into(),
                a.reason.as_deref().into(),
            ],
        )?;
        self.queue_update(sql, "approval", id)
    }

    async fn approvals(&mut self, state: Option<ApprovalState>) -> Result<Vec<Approval>> {
        let sql = match state {
            Some(state) => self.sql(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE org = $1 AND state = $2 \
                     ORDER BY requested_at, id"
                ),
                &[state.as_str().into()],
            )?,
            None => self.sql(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE org = $1 \
                     ORDER BY requested_at, id"
                ),
                &[],
            )?,
        };
        self.read(&sql, rows::approval).await
    }

    /// Queued; right after the outcome of its effect, joined to it.
    async fn push_undo(
        &mut self,
        session: &SessionId,
        effect: EffectId,
        at: Timestamp,
    ) -> Result<()> {
        if let Some(last) = self.queued.last_mut()
            && let Statement::ReplaceEffect {
                effect: replaced,
                args,
            } = &last.statement
            && *replaced == effect
        {
            let pushed = render("$1, $2", &[session.as_str().into(), at.as_millis().into()])?;
            let sql = format!("SELECT undolog_replace_effect_push_undo({args}, {pushed})");
            last.statement = Statement::Sql(sql);
            return Ok(());
        }
        let id = effect.to_string();
        let sql = self.sql(
            "SELECT undolog_push_undo($1, $2, $3, $4)",
            &[
                session.as_str().into(),
                id.as_str().into(),
                at.as_millis().into(),
            ],
        )?;
        // `no_data_found` when the org has no such effect in that session (migration 16).
        self.queue(sql, OnError::Missing { what: "effect", id });
        Ok(())
    }

    async fn undo_stack(&mut self, session: &SessionId) -> Result<Vec<EffectId>> {
        let sql = self.sql(
            "SELECT id AS effect_id FROM effects WHERE org = $1 AND session = $2 \
             AND undo_position IS NOT NULL ORDER BY undo_position",
            &[session.as_str().into()],
        )?;
        self.read(&sql, |row| rows::parsed(row, "effect_id")).await
    }

    async fn insert_snapshot(&mut self, s: &Snapshot) -> Result<()> {
        let body = serde_json::to_string(&s.body)?;
        let sql = self.sql(
            "INSERT INTO session_snapshots (org, session, taken_at, body) VALUES ($1, $2, $3, $4)",
            &[
                s.session.as_str().into(),
                s.taken_at.as_millis().into(),
                body.as_str().into(),
            ],
        )?;
        self.queue(sql, OnError::Database);
        Ok(())
    }

    async fn snapshots(&mut self, session: &SessionId) -> Result<Vec<Snapshot>> {
        let sql = self.sql(
            &format!(
                "SELECT {SNAPSHOT_COLUMNS} FROM session_snapshots WHERE org = $1 AND session = $2 \
                 ORDER BY id"
            ),
            &[session.as_str().into()],
        )?;
        self.read(&sql, rows::snapshot).await
    }

    /// Sends what is queued with COMMIT, in one message.
    async fn commit(mut self: Box<Self>) -> Result<()> {
        self.send(&["COMMIT"]).await?;
        self.open = false;
        Ok(())
    }
}
