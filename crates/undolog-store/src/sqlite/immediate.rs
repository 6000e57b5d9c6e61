//! A `BEGIN IMMEDIATE` transaction on the store's connection, which heals after a failure.
//!
//! BEGIN, COMMIT and ROLLBACK are plain statements. When SQLite ends a transaction by itself (a
//! full disk or an I/O error rolls it back) nothing is left to roll back; when a COMMIT or
//! ROLLBACK fails with the transaction still open, the file connection is closed, which rolls it
//! back, and the next transaction opens a fresh one. Writes resume as soon as the disk takes them
//! again.

use std::cell::Cell;

use rusqlite::Connection;

use super::connection::{Held, Shared};
use crate::Result;

thread_local! {
    /// Whether a COMMIT that waits for the disk waits on this thread (see [`commit_on_this_thread`]).
    static COMMITS_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Gives this thread over to the embedded store's commits: a transaction that wrote, committed
/// from this thread, waits here for its fsync instead of on a blocking thread of the runtime. For a
/// thread that does nothing else, like the engine's group-commit thread: it has no other work to
/// hold up, and each hand-off to a blocking thread and back costs two thread wake-ups per COMMIT.
pub fn commit_on_this_thread() {
    COMMITS_HERE.with(|here| here.set(true));
}

pub(super) struct Immediate {
    /// `None` once the transaction has ended.
    held: Option<Held>,
}

impl Immediate {
    pub(super) async fn begin(shared: &Shared) -> Result<Immediate> {
        let mut held = shared.take().await?;
        held.roll_back(); // a commit whose thread died leaves its transaction open
        Shared::with(&mut held, |conn| conn.execute_batch("BEGIN IMMEDIATE")).await?;
        Ok(Immediate { held: Some(held) })
    }

    /// The connection, inside the transaction.
    pub(super) fn conn(&mut self) -> Result<&Connection> {
        self.held
            .as_mut()
            .expect("a transaction is used only until it ends")
            .conn()
    }

    /// Commits. A transaction that `wrote` commits on a blocking thread: its COMMIT waits for the
    /// disk (fsync, and a checkpoint now and then), which must not hold up the runtime's threads
    /// and the calls they serve. One that only read has nothing to sync, and one on a thread given
    /// over to commits ([`commit_on_this_thread`]) has nothing to hold up: those commit here.
    pub(super) async fn commit(mut self, wrote: bool) -> Result<()> {
        let held = self.held.take().expect("a transaction commits once");
        if !wrote || COMMITS_HERE.with(Cell::get) {
            return finish(held);
        }
        tokio::task::spawn_blocking(move || finish(held))
            .await
            .map_err(|e| crate::Error::Database(Box::new(e)))?
    }
}

fn finish(mut held: Held) -> Result<()> {
    match held.conn()?.execute_batch("COMMIT") {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::warn!(error = %e, "commit failed; nothing of the transaction is kept");
            held.roll_back();
            Err(e.into())
        }
    }
}

impl Drop for Immediate {
    /// Rolls back a transaction that did not commit, before the connection is free again.
    fn drop(&mut self) {
        if let Some(mut held) = self.held.take() {
            held.roll_back();
        }
    }
}
