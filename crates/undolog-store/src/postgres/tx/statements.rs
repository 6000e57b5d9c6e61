//! How a PostgreSQL transaction queues its writes, sends them with its next read or its COMMIT, and reads.

use super::*;

impl PostgresTx {
    /// A transaction on `conn`; an `unsynced` one commits without waiting for the WAL to reach the
    /// disk (`synchronous_commit = off`, for this transaction only).
    pub(in crate::postgres) fn new(
        conn: PoolConnection<Postgres>,
        org: OrgId,
        unsynced: bool,
    ) -> Result<PostgresTx> {
        let settings = render(SETTINGS, &[APP_ROLE.into(), org.as_str().into()])?;
        let mut tx = PostgresTx {
            conn: Some(conn),
            org,
            queued: Vec::new(),
            open: false,
            failed: false,
        };
        tx.queue(
            "BEGIN ISOLATION LEVEL READ COMMITTED".into(),
            OnError::Database,
        );
        tx.queue(settings, OnError::Database);
        if unsynced {
            tx.queue(
                "SET LOCAL synchronous_commit = off".into(),
                OnError::Database,
            );
        }
        Ok(tx)
    }

    /// `sql` with the org as `$1` and `values` as `$2…`.
    pub(super) fn sql(&self, sql: &str, values: &[Value<'_>]) -> Result<String> {
        let mut all = Vec::with_capacity(values.len() + 1);
        all.push(Value::from(self.org.as_str()));
        all.extend_from_slice(values);
        render(sql, &all)
    }

    pub(super) fn queue(&mut self, sql: String, on_error: OnError) {
        self.queued.push(Queued {
            statement: Statement::Sql(sql),
            on_error,
        });
    }

    /// Takes out of the queue the check of [`Tx::expect_no_effect`] that finds `e`, if one waits.
    /// Every lookup runs under its call's advisory lock, taken before the check was queued, so the
    /// check gives the same answer made with the insert as made where it was queued.
    pub(super) fn take_check(&mut self, e: &Effect) -> Option<Check> {
        let at = self.queued.iter().position(
            |q| matches!(&q.statement, Statement::Check { check, .. } if check.finds(e)),
        )?;
        match self.queued.remove(at).statement {
            Statement::Check { check, .. } => Some(check),
            _ => None,
        }
    }

    /// Sends the queued statements and then `last` in one message; the rows of each of `last`.
    pub(super) async fn send(&mut self, last: &[&str]) -> Result<Vec<Vec<PgRow>>> {
        if self.failed {
            return Err(Error::Aborted);
        }
        let queued = std::mem::take(&mut self.queued);
        let statements: Vec<std::borrow::Cow<'_, str>> = queued
            .iter()
            .map(Queued::text)
            .chain(last.iter().map(|s| (*s).into()))
            .collect();
        let mut sql = String::with_capacity(statements.iter().map(|s| s.len() + 2).sum());
        for statement in &statements {
            sql.push_str(statement);
            sql.push_str(";\n");
        }
        let conn = self
            .conn
            .as_mut()
            .expect("a transaction is used only until it ends");
        self.open = true;
        let mut results = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).fetch_many(&mut **conn);
        // Each statement's rows come before its completion; only the rows of `last` are kept.
        let mut completed = 0_usize;
        let mut rows: Vec<Vec<PgRow>> = last.iter().map(|_| Vec::new()).collect();
        let failure = loop {
            match results.try_next().await {
                Ok(Some(Either::Left(_))) => completed += 1,
                Ok(Some(Either::Right(row))) => {
                    if let Some(rows) = completed
                        .checked_sub(queued.len())
                        .and_then(|n| rows.get_mut(n))
                    {
                        rows.push(row);
                    }
                }
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        drop(results);
        match failure {
            None => Ok(rows),
            Some(e) => {
                self.failed = true;
                Err(match queued.get(completed) {
                    Some(statement) => statement.on_error.explain(e),
                    None => e.into(),
                })
            }
        }
    }

    /// The rows of one read, sent with everything queued before it.
    pub(super) async fn read<T>(
        &mut self,
        sql: &str,
        map: fn(&PgRow) -> Result<T>,
    ) -> Result<Vec<T>> {
        let rows = self.send(&[sql]).await?.pop().unwrap_or_default();
        rows.iter().map(map).collect()
    }

    /// The first row of one read, if any.
    pub(super) async fn read_first<T>(
        &mut self,
        sql: &str,
        map: fn(&PgRow) -> Result<T>,
    ) -> Result<Option<T>> {
        first(self.send(&[sql]).await?.pop(), map)
    }

    /// Reads a session, locking its row (see [`Tx::session`]).
    pub(super) fn session_sql(&self, id: &SessionId) -> Result<String> {
        self.sql(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE org = $1 AND id = $2 FOR UPDATE"
            ),
            &[id.as_str().into()],
        )
    }

    /// Reads the effect a lookup finds; `None` for [`EffectLookup::Nothing`].
    pub(super) fn lookup_sql(&self, lookup: EffectLookup<'_>) -> Result<Option<String>> {
        let (condition, order, value) = match lookup {
            EffectLookup::Nothing => return Ok(None),
            EffectLookup::LatestBySignature(signature) => {
                ("signature", "seq DESC", signature.as_str())
            }
            EffectLookup::LatestByKey(key) => ("idempotency_key", "created_at DESC, id DESC", key),
        };
        let sql = format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE org = $1 AND {condition} = $2 \
             ORDER BY {order} LIMIT 1"
        );
        self.sql(&sql, &[value.into()]).map(Some)
    }

    pub(super) async fn latest_effect(
        &mut self,
        lookup: EffectLookup<'_>,
    ) -> Result<Option<Effect>> {
        let Some(sql) = self.lookup_sql(lookup)? else {
            return Ok(None);
        };
        self.read_first(&sql, rows::effect).await
    }

    /// Queues an UPDATE that must change one row, else the transaction fails with `NotFound`.
    pub(super) fn queue_update(
        &mut self,
        update: String,
        what: &'static str,
        id: String,
    ) -> Result<()> {
        let check = render(
            "SELECT undolog_expect_rows((SELECT count(*) FROM changed), $1, $2)",
            &[what.into(), id.as_str().into()],
        )?;
        self.queue(
            format!("WITH changed AS ({update} RETURNING 1) {check}"),
            OnError::Missing { what, id },
        );
        Ok(())
    }
}

/// A lease's columns: its holder and when it ends.
pub(super) fn holder_and_expiry(lease: Option<&Lease>) -> (Option<&str>, Option<i64>) {
    (
        lease.map(|l| l.holder.as_str()),
        lease.map(|l| l.expires_at.as_millis()),
    )
}

/// The first of a read's rows, as a record.
pub(super) fn first<T>(
    rows: Option<Vec<PgRow>>,
    map: fn(&PgRow) -> Result<T>,
) -> Result<Option<T>> {
    rows.unwrap_or_default().first().map(map).transpose()
}

impl Drop for PostgresTx {
    /// Rolls back a transaction that reached the server and did not commit: on a task, since
    /// dropping cannot wait, before the connection goes back to the pool.
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if !self.open {
            return;
        }
        if self.failed {
            // A statement failed: whatever the server or the connection made of it, this
            // connection is not reused (the pool opens a fresh one).
            conn.close_on_drop();
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(e) = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
                        tracing::debug!(error = %e, "rollback failed; closing the connection");
                        conn.close_on_drop();
                    }
                });
            }
            // The server rolls back when the connection closes.
            Err(_) => conn.close_on_drop(),
        }
    }
}
