//! Group commit per session, on a store that takes concurrent writers (PostgreSQL).
//!
//! Every intercept and read-only record of a session reads and writes the session's row (its next
//! sequence number), so the store carries them out one after another whatever the gateway does:
//! each holds the row's lock over its round trips and its COMMIT. Stateless clients put every call
//! of a principal into one session (its implicit run), so under load that one lock is where calls
//! queue. Here the operations of a session that arrive while its last batch is being carried out
//! go together into the next one: one transaction, one lock, one COMMIT for all of them
//! (`group_commit` carries a batch out, and answers each caller). Sessions never wait for each
//! other: each has batches of its own, carried out at the same time as other sessions' (batching
//! across sessions, measured, only serialized on one connection what the server ran in parallel).
//!
//! A call's outcome goes into its session's next batch too, when this engine sent the call (it
//! remembers the pending effect, and so its session): the outcome and its neighbours' intercepts
//! then share one COMMIT, and the outcome's undo entry is written by the transaction that holds
//! the session's row, not beside it.
//!
//! Nothing waits to gather: an operation that finds its session idle starts a batch at once, so a
//! lone call costs what it cost before, plus a hand-off to the task that carries it out.

use std::{
    collections::{HashMap, hash_map::Entry},
    sync::Mutex,
};

use tokio::sync::oneshot;
use undolog_types::{OrgId, SessionId};

use crate::{Engine, Error, group_commit::Op};

/// The most operations one transaction carries; more wait for the next batch.
const MAX_BATCH: usize = 128;

type Key = (OrgId, SessionId);

/// The sessions that have a batch being carried out, each with the operations that wait for
/// their next one.
#[derive(Default)]
pub(crate) struct SessionBatches {
    waiting: Mutex<HashMap<Key, Vec<Op>>>,
}

impl std::fmt::Debug for SessionBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionBatches")
            .field("busy_sessions", &self.lock().len())
            .finish()
    }
}

impl SessionBatches {
    /// Queues the operation `make` builds around its answer channel behind the session's batch
    /// (or starts one), and waits for the answer.
    pub(crate) async fn submit<T>(
        &self,
        engine: &Engine,
        org: &OrgId,
        session: &SessionId,
        make: impl FnOnce(Option<oneshot::Sender<Result<T, Error>>>) -> Op,
    ) -> Result<T, Error> {
        let (done, answer) = oneshot::channel();
        let op = make(Some(done));
        let key = (org.clone(), session.clone());
        let first = match self.lock().entry(key.clone()) {
            Entry::Occupied(mut batch) => {
                batch.get_mut().push(op);
                None
            }
            Entry::Vacant(idle) => {
                idle.insert(Vec::new());
                Some(op)
            }
        };
        if let Some(op) = first {
            // On a task of its own: the batch goes on if this caller stops waiting.
            let engine = engine.clone();
            tokio::spawn(async move { engine.lead_session(key, vec![op]).await });
        }
        answer.await.unwrap_or(Err(Error::Stopped))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<Op>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The operations that gathered behind the batch just carried out, or `None` (and the
    /// session is idle again) when there are none.
    fn next(&self, key: &Key) -> Option<Vec<Op>> {
        let mut waiting = self.lock();
        let gathered = waiting.get_mut(key)?;
        if gathered.is_empty() {
            waiting.remove(key);
            return None;
        }
        let take = gathered.len().min(MAX_BATCH);
        Some(gathered.drain(..take).collect())
    }
}

/// Forgets a session's queue if its batch task ends without doing so (it panicked): the waiting
/// operations are dropped, so their callers hear `Stopped` instead of waiting for ever.
struct Forget<'a> {
    batches: &'a SessionBatches,
    key: Option<Key>,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.batches.lock().remove(&key);
        }
    }
}

impl Engine {
    /// Carries out `batch`, then whatever gathered behind it, until the session is idle.
    async fn lead_session(&self, key: Key, mut batch: Vec<Op>) {
        let Some(batches) = &self.inner().session_batches else {
            return;
        };
        let mut forget = Forget {
            batches,
            key: Some(key.clone()),
        };
        loop {
            self.run_ops(batch).await;
            match batches.next(&key) {
                Some(next) => batch = next,
                None => break,
            }
        }
        forget.key = None;
    }
}
