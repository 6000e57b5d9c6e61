//! The store's one SQLite connection, taken in turn.
//!
//! Statements run on the thread of the task that holds the connection, with no hand-off: a
//! statement on a cached prepared plan takes microseconds, and a thread per connection (as in
//! sqlx) costs two thread wake-ups per statement, which at a dozen statements per call and one
//! writer at a time was most of the gateway's time (bench/lab/).
//!
//! Tasks queue for the connection in order (a fair lock). SQLite's own busy handler is off, so no
//! thread ever sleeps inside SQLite: when another process holds the write lock, [`Shared::with`]
//! waits for it asynchronously, up to the configured busy timeout. A file connection that failed
//! to end a transaction is closed, and the next user opens a fresh one.

use std::{fmt, sync::Arc, time::Duration};

use rusqlite::{Connection, ErrorCode, OpenFlags};
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::{SqliteOptions, Synchronous};
use crate::{Error, Result};

/// Prepared statements kept per connection: every statement the store sends, with room to spare.
const CACHED_STATEMENTS: usize = 64;

/// The connection, shared by every clone of the store, and how long a task waits for it.
#[derive(Clone)]
pub(super) struct Shared {
    slot: Arc<Mutex<Slot>>,
    /// The busy timeout.
    wait: Duration,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Shared(sqlite connection)")
    }
}

/// The connection, or none after one was closed on a failure.
pub(super) struct Slot {
    conn: Option<Connection>,
    options: SqliteOptions,
}

/// The connection, held by one task until dropped.
pub(super) type Held = OwnedMutexGuard<Slot>;

impl Shared {
    pub(super) fn open(options: SqliteOptions) -> Result<Shared> {
        let conn = connect(&options)?;
        let wait = options.busy_timeout;
        let slot = Arc::new(Mutex::new(Slot {
            conn: Some(conn),
            options,
        }));
        Ok(Shared { slot, wait })
    }

    /// Waits for the connection, up to the busy timeout: a transaction left open for that long
    /// (or one that waits for another in the same task) gets an error, not a hang.
    pub(super) async fn take(&self) -> Result<Held> {
        tokio::time::timeout(self.wait, self.slot.clone().lock_owned())
            .await
            .map_err(|_| {
                Error::Database(
                    format!(
                        "the store's connection was not free within {:?} (its busy timeout): a \
                         transaction is held open too long; retry, and if it keeps happening look \
                         for an operation that stalls in the middle of a transaction",
                        self.wait
                    )
                    .into(),
                )
            })
    }

    /// Runs `work` on the connection, again after a pause while another process holds the
    /// database (`SQLITE_BUSY`), until the busy timeout.
    pub(super) async fn with<T>(
        held: &mut Held,
        mut work: impl FnMut(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let deadline = tokio::time::Instant::now() + held.options.busy_timeout;
        let mut pause = Duration::from_millis(1);
        loop {
            let done = work(held.conn()?);
            match done {
                Err(e) if is_busy(&e) && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                done => return done.map_err(Error::from),
            }
        }
    }
}

impl Slot {
    /// The open connection, opening a fresh one after a failure closed the last.
    pub(super) fn conn(&mut self) -> Result<&Connection> {
        if self.conn.is_none() {
            self.conn = Some(connect(&self.options)?);
        }
        Ok(self.conn.as_ref().expect("just opened"))
    }

    /// Ends whatever transaction is open. When that fails, a file connection is closed (closing
    /// rolls back) and the next use opens another; an in-memory one is the database, and stays.
    pub(super) fn roll_back(&mut self) {
        let Some(conn) = &self.conn else { return };
        if conn.is_autocommit() {
            return; // SQLite already ended it (a full disk rolls back by itself).
        }
        if let Err(e) = conn.execute_batch("ROLLBACK") {
            tracing::warn!(error = %e, "rollback failed; the store's connection is replaced");
            if self.options.path.is_some() {
                self.conn = None;
            }
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// A unique or primary-key constraint refused the write.
pub(super) fn is_unique_violation(e: &Error) -> bool {
    let Error::Database(e) = e else { return false };
    matches!(
        e.downcast_ref::<rusqlite::Error>(),
        Some(rusqlite::Error::SqliteFailure(f, _))
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    )
}

fn connect(options: &SqliteOptions) -> Result<Connection> {
    let shown = options
        .path
        .as_ref()
        .map_or("memory".to_owned(), |p| p.display().to_string());
    let open_error = |e: rusqlite::Error| Error::Open {
        url: shown.clone(),
        reason: e.to_string(),
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = match &options.path {
        Some(path) => Connection::open_with_flags(path, flags),
        None => Connection::open_in_memory_with_flags(flags),
    }
    .map_err(open_error)?;
    let synchronous = match options.synchronous {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    // Opening may wait for another process, like any start-up; statements after it never do.
    conn.busy_timeout(options.busy_timeout)
        .map_err(open_error)?;
    conn.set_prepared_statement_cache_capacity(CACHED_STATEMENTS);
    // The journal mode answers with a row, so it is read rather than executed.
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(open_error)?;
    if options.path.is_some() && !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Open {
            url: shown,
            reason: format!("the file system does not take SQLite's WAL journal (it gave {mode})"),
        });
    }
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = ON;"
    ))
    .map_err(open_error)?;
    conn.busy_timeout(Duration::ZERO).map_err(open_error)?;
    Ok(conn)
}
