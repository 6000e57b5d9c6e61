//! A `BEGIN IMMEDIATE` transaction on a pooled connection that heals after a failure.
//!
//! sqlx's own transactions count their depth on the connection. When SQLite ends a transaction by
//! itself (a full disk or an I/O error rolls it back), the ROLLBACK that follows fails, the count
//! stays at one, and every later BEGIN on that connection fails with "attempted to call begin_with
//! at non-zero transaction depth": the store is dead until a restart. Here BEGIN, COMMIT and
//! ROLLBACK are plain statements, and a connection whose COMMIT or ROLLBACK failed is closed
//! instead of going back to the pool, which opens a fresh one for the next transaction. Writes
//! resume as soon as the disk takes them again.

use std::ops::{Deref, DerefMut};

use sqlx::{Sqlite, SqliteConnection, SqlitePool, pool::PoolConnection};

use crate::Result;

pub(super) struct Immediate {
    /// `None` once the transaction has ended.
    conn: Option<PoolConnection<Sqlite>>,
}

impl Immediate {
    pub(super) async fn begin(pool: &SqlitePool) -> Result<Immediate> {
        let mut conn = pool.acquire().await?;
        if let Err(e) = sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await {
            // Busy or broken: whatever state the connection is in, it is not reused.
            conn.close_on_drop();
            return Err(e.into());
        }
        Ok(Immediate { conn: Some(conn) })
    }

    pub(super) async fn commit(mut self) -> Result<()> {
        let mut conn = self.conn.take().expect("a transaction commits once");
        match sqlx::raw_sql("COMMIT").execute(&mut *conn).await {
            Ok(_) => Ok(()),
            Err(e) => {
                // The transaction may still be open, or SQLite rolled it back: closing the
                // connection rolls back whatever is left, and the next one starts clean.
                tracing::warn!(error = %e, "commit failed; the store's connection is replaced");
                conn.close_on_drop();
                Err(e.into())
            }
        }
    }
}

impl Deref for Immediate {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        self.conn
            .as_ref()
            .expect("a transaction is used only until it ends")
    }
}

impl DerefMut for Immediate {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        self.conn
            .as_mut()
            .expect("a transaction is used only until it ends")
    }
}

impl Drop for Immediate {
    /// Rolls back a transaction that did not commit: on a task, since dropping cannot wait, before
    /// the connection goes back to the pool. A connection whose rollback fails is closed.
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(e) = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
                        tracing::warn!(error = %e, "rollback failed; the store's connection is replaced");
                        conn.close_on_drop();
                    }
                });
            }
            // SQLite rolls back when the connection closes.
            Err(_) => conn.close_on_drop(),
        }
    }
}
