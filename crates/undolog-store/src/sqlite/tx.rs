//! One `BEGIN IMMEDIATE` transaction, bound to one org.

use std::sync::LazyLock;

use async_trait::async_trait;
use rusqlite::{ToSql, params};
use undolog_types::{
    ApprovalId, ApprovalState, EffectId, LockKey, OrgId, SessionId, Signature, Timestamp,
};

use super::{connection::is_unique_violation, immediate::Immediate, rows::InOrder};
use crate::{
    Approval, Effect, EffectLookup, Error, Result, Session, Snapshot, Tx,
    rows::{self, APPROVAL_COLUMNS, EFFECT_COLUMNS, SESSION_COLUMNS},
};

pub(super) struct SqliteTx {
    statements: Statements,
    org: OrgId,
}

/// The transaction's statements, apart from its org so that a statement can borrow both.
struct Statements {
    tx: Immediate,
    /// Whether a write ran: only then does the commit wait for the disk.
    wrote: bool,
}

impl SqliteTx {
    pub(super) fn new(tx: Immediate, org: OrgId) -> SqliteTx {
        SqliteTx {
            statements: Statements { tx, wrote: false },
            org,
        }
    }

    /// Runs a query with the org as its first parameter and `binds` after it.
    fn fetch_all<T>(
        &mut self,
        sql: &str,
        binds: &[&dyn ToSql],
        map: fn(&InOrder<'_, '_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let org = self.org.as_str();
        let mut params: Vec<&dyn ToSql> = Vec::with_capacity(binds.len() + 1);
        params.push(&org);
        params.extend_from_slice(binds);
        let mut statement = self.statements.tx.conn()?.prepare_cached(sql)?;
        let mut rows = statement.query(params.as_slice())?;
        let mut found = Vec::new();
        while let Some(row) = rows.next()? {
            found.push(map(&InOrder::new(row))?);
        }
        Ok(found)
    }

    fn fetch_optional<T>(
        &mut self,
        sql: &str,
        binds: &[&dyn ToSql],
        map: fn(&InOrder<'_, '_>) -> Result<T>,
    ) -> Result<Option<T>> {
        Ok(self.fetch_all(sql, binds, map)?.into_iter().next())
    }

    /// Writes what may change of effect `e`; only while the stored one is still `was` (see
    /// [`Tx::replace_effect`]) when given. How many rows it changed.
    fn write_effect(&mut self, e: &Effect, was: Option<&Effect>) -> Result<usize> {
        let (result, verdicts) = (
            e.result.as_ref().map(serde_json::to_string).transpose()?,
            e.verdicts.as_ref().map(serde_json::to_string).transpose()?,
        );
        let (org, id) = (self.org.as_str(), e.id.to_string());
        let now = Changeable::of(e);
        let mut params: Vec<&dyn ToSql> = vec![
            &now.state,
            &result,
            &now.error,
            &now.approval,
            &now.lease_holder,
            &now.lease_expires_at,
            &now.lease_token,
            &now.updated_at,
            &now.completed_at,
            &now.resolved_by,
            &verdicts,
            &org,
            &id,
        ];
        let before = was.map(Changeable::of);
        let Some(before) = &before else {
            return self.statements.execute(UPDATE_EFFECT, &params);
        };
        params.extend_from_slice(&[
            &before.state,
            &before.error,
            &before.approval,
            &before.lease_holder,
            &before.lease_expires_at,
            &before.updated_at,
            &before.completed_at,
            &before.resolved_by,
        ]);
        self.statements.execute(&REPLACE_EFFECT, &params)
    }
}

/// The columns of an effect a transaction may change, as SQLite stores them.
struct Changeable<'a> {
    state: &'static str,
    error: &'a Option<String>,
    approval: Option<String>,
    lease_holder: Option<&'a str>,
    lease_expires_at: Option<i64>,
    lease_token: Option<&'a str>,
    updated_at: i64,
    completed_at: Option<i64>,
    resolved_by: &'a Option<String>,
}

impl Changeable<'_> {
    fn of(e: &Effect) -> Changeable<'_> {
        Changeable {
            state: e.state.as_str(),
            error: &e.error,
            approval: e.approval.map(|a| a.to_string()),
            lease_holder: e.lease.as_ref().map(|l| l.holder.as_str()),
            lease_expires_at: e.lease.as_ref().map(|l| l.expires_at.as_millis()),
            lease_token: e.lease_token.as_ref().map(|t| t.as_str()),
            updated_at: e.updated_at.as_millis(),
            completed_at: e.completed_at.map(Timestamp::as_millis),
            resolved_by: &e.resolved_by,
        }
    }
}

impl Statements {
    /// Runs a write; how many rows it changed.
    fn execute(&mut self, sql: &str, params: &[&dyn ToSql]) -> Result<usize> {
        self.wrote = true;
        Ok(self.tx.conn()?.prepare_cached(sql)?.execute(params)?)
    }
}

/// Statements put together once from their parts (columns spelled once in [`crate::rows`]).
macro_rules! select {
    ($name:ident, $($part:expr),+ $(,)?) => {
        static $name: LazyLock<String> = LazyLock::new(|| [$($part),+].concat());
    };
}
select!(
    SESSION,
    "SELECT ",
    SESSION_COLUMNS,
    " FROM sessions WHERE org = ? AND id = ?"
);
select!(
    SESSIONS,
    "SELECT ",
    SESSION_COLUMNS,
    " FROM sessions WHERE org = ? ORDER BY created_at, id"
);
select!(
    SESSIONS_OF,
    "SELECT ",
    SESSION_COLUMNS,
    " FROM sessions WHERE org = ?1 AND (opened_by = ?2 OR (opened_by IS NULL \
     AND (run_of IS NULL OR run_of = ?2))) ORDER BY created_at, id"
);
select!(
    LATEST_RUN,
    "SELECT ",
    SESSION_COLUMNS,
    " FROM sessions WHERE org = ? AND run_of = ? ORDER BY created_at DESC, id DESC LIMIT 1"
);
select!(
    EFFECT,
    "SELECT ",
    EFFECT_COLUMNS,
    " FROM effects WHERE org = ? AND id = ?"
);
/// What may change of an effect; [`REPLACE_EFFECT`] only while it is still as remembered.
const UPDATE_EFFECT: &str = "UPDATE effects SET state = ?, result = ?, error = ?, approval = ?, \
     lease_holder = ?, lease_expires_at = ?, lease_token = ?, updated_at = ?, completed_at = ?, resolved_by = ?, \
     verdicts = ? WHERE org = ? AND id = ?";
select!(
    REPLACE_EFFECT,
    UPDATE_EFFECT,
    " AND state = ? AND error IS ? AND approval IS ? AND lease_holder IS ? \
     AND lease_expires_at IS ? AND updated_at = ? AND completed_at IS ? AND resolved_by IS ?"
);
select!(
    BY_SIGNATURE,
    "SELECT ",
    EFFECT_COLUMNS,
    " FROM effects WHERE org = ? AND signature = ? ORDER BY seq DESC LIMIT 1"
);
select!(
    BY_KEY,
    "SELECT ",
    EFFECT_COLUMNS,
    " FROM effects WHERE org = ? AND idempotency_key = ? ORDER BY created_at DESC, id DESC LIMIT 1"
);
select!(
    SESSION_EFFECTS,
    "SELECT ",
    EFFECT_COLUMNS,
    " FROM effects WHERE org = ? AND session = ? ORDER BY seq"
);
select!(
    EXPIRED,
    "SELECT ",
    EFFECT_COLUMNS,
    " FROM effects WHERE org = ? AND state = 'pending' AND lease_expires_at <= ? ORDER BY created_at, id"
);
select!(
    APPROVAL,
    "SELECT ",
    APPROVAL_COLUMNS,
    " FROM approvals WHERE org = ? AND id = ?"
);
select!(
    APPROVALS_IN,
    "SELECT ",
    APPROVAL_COLUMNS,
    " FROM approvals WHERE org = ? AND state = ? ORDER BY requested_at, id"
);
select!(
    APPROVALS,
    "SELECT ",
    APPROVAL_COLUMNS,
    " FROM approvals WHERE org = ? ORDER BY requested_at, id"
);

#[async_trait]
impl Tx for SqliteTx {
    async fn lock(&mut self, _key: LockKey) -> Result<()> {
        Ok(()) // BEGIN IMMEDIATE already holds the database's only write lock.
    }

    async fn session(&mut self, id: &SessionId) -> Result<Option<Session>> {
        self.fetch_optional(&SESSION, &[&id.as_str()], |row| rows::session(row))
    }

    async fn put_session(&mut self, s: &Session) -> Result<()> {
        self.statements.execute(
            "INSERT INTO sessions (org, id, state, next_seq, failed_effect, undo_holder, \
             undo_expires_at, run_of, opened_by, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (org, id) DO UPDATE SET state = excluded.state, next_seq = excluded.next_seq, \
             failed_effect = excluded.failed_effect, undo_holder = excluded.undo_holder, \
             undo_expires_at = excluded.undo_expires_at, updated_at = excluded.updated_at",
            params![
                self.org.as_str(),
                s.id.as_str(),
                s.state.as_str(),
                s.next_seq,
                s.failed_effect.map(|e| e.to_string()),
                s.undo_claim.as_ref().map(|c| c.holder.as_str()),
                s.undo_claim.as_ref().map(|c| c.expires_at.as_millis()),
                s.run_of,
                s.opened_by,
                s.created_at.as_millis(),
                s.updated_at.as_millis(),
            ],
        )?;
        Ok(())
    }

    async fn sessions(&mut self) -> Result<Vec<Session>> {
        self.fetch_all(&SESSIONS, &[], |row| rows::session(row))
    }

    async fn sessions_of(&mut self, caller: &str) -> Result<Vec<Session>> {
        self.fetch_all(&SESSIONS_OF, &[&caller], |row| rows::session(row))
    }

    async fn latest_run(&mut self, principal: &str) -> Result<Option<Session>> {
        self.fetch_optional(&LATEST_RUN, &[&principal], |row| rows::session(row))
    }

    async fn effect(&mut self, id: EffectId) -> Result<Option<Effect>> {
        self.fetch_optional(&EFFECT, &[&id.to_string()], |row| rows::effect(row))
    }

    async fn latest_effect_by_signature(
        &mut self,
        signature: &Signature,
    ) -> Result<Option<Effect>> {
        self.fetch_optional(&BY_SIGNATURE, &[&signature.as_str()], |row| {
            rows::effect(row)
        })
    }

    async fn latest_effect_by_key(&mut self, key: &str) -> Result<Option<Effect>> {
        self.fetch_optional(&BY_KEY, &[&key], |row| rows::effect(row))
    }

    async fn insert_effect(&mut self, e: &Effect) -> Result<()> {
        let result = self.statements.execute(
            "INSERT INTO effects (id, org, session, seq, tool, args, step, signature, idempotency_key, \
             tier, compensation, state, result, error, approval, lease_holder, lease_expires_at, \
             lease_token, created_at, updated_at, completed_at, resolved_by, verdicts) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            params![
                e.id.to_string(),
                self.org.as_str(),
                e.session.as_str(),
                e.seq,
                e.tool,
                e.args.canonical(),
                e.step.map(|s| s as i64),
                e.signature.as_str(),
                e.idempotency_key,
                e.tier.as_str(),
                e.compensation.as_ref().map(serde_json::to_string).transpose()?,
                e.state.as_str(),
                e.result.as_ref().map(serde_json::to_string).transpose()?,
                e.error,
                e.approval.map(|a| a.to_string()),
                e.lease.as_ref().map(|l| l.holder.as_str()),
                e.lease.as_ref().map(|l| l.expires_at.as_millis()),
                e.lease_token.as_ref().map(|t| t.as_str()),
                e.created_at.as_millis(),
                e.updated_at.as_millis(),
                e.completed_at.map(Timestamp::as_millis),
                e.resolved_by,
                e.verdicts.as_ref().map(serde_json::to_string).transpose()?,
            ],
        );
        match result {
            Err(error) if is_unique_violation(&error) => {
                Err(Error::AlreadyExists(format!("effect {}", e.id)))
            }
            other => other.map(drop),
        }
    }

    async fn update_effect(&mut self, e: &Effect) -> Result<()> {
        match self.write_effect(e, None)? {
            0 => Err(Error::NotFound {
                what: "effect",
                id: e.id.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// One conditional UPDATE: every column a transaction may change is compared (`IS` is
    /// SQLite's null-safe equality), as PostgreSQL's `undolog_replace_session` does.
    async fn replace_session(&mut self, was: &Session, s: &Session) -> Result<()> {
        let changed = self.statements.execute(
            "UPDATE sessions SET state = ?, next_seq = ?, failed_effect = ?, undo_holder = ?, \
             undo_expires_at = ?, updated_at = ? \
             WHERE org = ? AND id = ? AND state = ? AND next_seq = ? AND failed_effect IS ? \
             AND undo_holder IS ? AND undo_expires_at IS ? AND updated_at = ?",
            params![
                s.state.as_str(),
                s.next_seq,
                s.failed_effect.map(|e| e.to_string()),
                s.undo_claim.as_ref().map(|c| c.holder.as_str()),
                s.undo_claim.as_ref().map(|c| c.expires_at.as_millis()),
                s.updated_at.as_millis(),
                self.org.as_str(),
                was.id.as_str(),
                was.state.as_str(),
                was.next_seq,
                was.failed_effect.map(|e| e.to_string()),
                was.undo_claim.as_ref().map(|c| c.holder.as_str()),
                was.undo_claim.as_ref().map(|c| c.expires_at.as_millis()),
                was.updated_at.as_millis(),
            ],
        )?;
        match changed {
            0 => Err(Error::Changed {
                what: "session",
                id: was.id.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// One conditional UPDATE, comparing the columns every change of an effect touches, as
    /// PostgreSQL's `undolog_replace_effect` does (its result and verdicts change only with its
    /// state).
    async fn replace_effect(&mut self, was: &Effect, e: &Effect) -> Result<()> {
        match self.write_effect(e, Some(was))? {
            0 => Err(Error::Changed {
                what: "effect",
                id: was.id.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// An index probe, no row read.
    async fn expect_no_effect(&mut self, lookup: EffectLookup<'_>) -> Result<()> {
        let (sql, value) = match lookup {
            EffectLookup::Nothing => return Ok(()),
            EffectLookup::LatestBySignature(signature) => (
                "SELECT 1 FROM effects WHERE org = ? AND signature = ? LIMIT 1",
                signature.as_str(),
            ),
            EffectLookup::LatestByKey(key) => (
                "SELECT 1 FROM effects WHERE org = ? AND idempotency_key = ? LIMIT 1",
                key,
            ),
        };
        match self.fetch_optional(sql, &[&value], |_| Ok(()))? {
            None => Ok(()),
            Some(()) => Err(Error::Changed {
                what: "call",
                id: value.to_owned(),
            }),
        }
    }

    async fn session_effects(&mut self, session: &SessionId) -> Result<Vec<Effect>> {
        self.fetch_all(&SESSION_EFFECTS, &[&session.as_str()], |row| {
            rows::effect(row)
        })
    }

    async fn expired_leases(&mut self, now: Timestamp) -> Result<Vec<Effect>> {
        self.fetch_all(&EXPIRED, &[&now.as_millis()], |row| rows::effect(row))
    }

    async fn approval(&mut self, id: ApprovalId) -> Result<Option<Approval>> {
        self.fetch_optional(&APPROVAL, &[&id.to_string()], |row| rows::approval(row))
    }

    async fn insert_approval(&mut self, a: &Approval) -> Result<()> {
        self.statements.execute(
            "INSERT INTO approvals (id, org, session, effect_id, signature, state, requested_at, \
             expires_at, requested_by, decided_by, decided_via, decided_at, reason) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            params![
                a.id.to_string(),
                self.org.as_str(),
                a.session.as_str(),
                a.effect.to_string(),
                a.signature.as_str(),
                a.state.as_str(),
                a.requested_at.as_millis(),
                a.expires_at.as_millis(),
                a.requested_by,
                a.decided_by,
                a.decided_via,
                a.decided_at.map(Timestamp::as_millis),
                a.reason,
            ],
        )?;
        Ok(())
    }

    async fn update_approval(&mut self, a: &Approval) -> Result<()> {
        let changed = self.statements.execute(
            "UPDATE approvals SET state = ?, decided_by = ?, decided_via = ?, decided_at = ?, \
             reason = ? WHERE org = ? AND id = ?",
            params![
                a.state.as_str(),
                a.decided_by,
                a.decided_via,
                a.decided_at.map(Timestamp::as_millis),
                a.reason,
                self.org.as_str(),
                a.id.to_string(),
            ],
        )?;
        if changed == 0 {
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
                self.fetch_all(&APPROVALS_IN, &[&state.as_str()], |row| rows::approval(row))
            }
            None => self.fetch_all(&APPROVALS, &[], |row| rows::approval(row)),
        }
    }

    async fn push_undo(
        &mut self,
        session: &SessionId,
        effect: EffectId,
        at: Timestamp,
    ) -> Result<()> {
        self.statements.execute(
            "INSERT INTO undo_stack (org, session, position, effect_id, pushed_at) \
             SELECT ?1, ?2, COALESCE(MAX(position), 0) + 1, ?3, ?4 FROM undo_stack WHERE org = ?1 AND session = ?2",
            params![self.org.as_str(), session.as_str(), effect.to_string(), at.as_millis()],
        )?;
        Ok(())
    }

    async fn undo_stack(&mut self, session: &SessionId) -> Result<Vec<EffectId>> {
        let sql =
            "SELECT effect_id FROM undo_stack WHERE org = ? AND session = ? ORDER BY position";
        self.fetch_all(sql, &[&session.as_str()], |row| {
            rows::parsed(row, "effect_id")
        })
    }

    async fn insert_snapshot(&mut self, s: &Snapshot) -> Result<()> {
        self.statements.execute(
            "INSERT INTO session_snapshots (org, session, taken_at, body) VALUES (?, ?, ?, ?)",
            params![
                self.org.as_str(),
                s.session.as_str(),
                s.taken_at.as_millis(),
                serde_json::to_string(&s.body)?,
            ],
        )?;
        Ok(())
    }

    async fn snapshots(&mut self, session: &SessionId) -> Result<Vec<Snapshot>> {
        let sql = "SELECT org, session, taken_at, body FROM session_snapshots WHERE org = ? AND session = ? ORDER BY id";
        self.fetch_all(sql, &[&session.as_str()], |row| rows::snapshot(row))
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        self.statements.tx.commit(self.statements.wrote).await
    }
}
