//! Group commit on a store that takes concurrent writers (PostgreSQL).
//!
//! Intercepts, read-only records and the outcomes of calls this engine sent are queued per
//! session. A session whose queue is not empty and that has no batch under way is *ready*; a
//! batch takes every ready session's queue (up to [`MAX_BATCH`] operations in all) and carries
//! them out in one transaction per org, one COMMIT (`group_commit` carries a batch out, and
//! answers each caller). At most [`BATCHES_IN_FLIGHT`] batches are under way at once, each on a
//! connection of its own; while they are, what arrives gathers for the next. A session is in one
//! batch at a time, so a session's operations are carried out in the order they arrived, each
//! seeing those before it, and two batches never write the same session row.
//!
//! Why: every intercept and record reads and writes its session's row (its next sequence number),
//! and every transaction pays its BEGIN, settings and COMMIT, whatever it carries. Calls of one
//! session that arrive together (a stateless client puts all its calls into one session, its
//! implicit run) share the row's lock once; calls of many sessions share the rest. pgbench
//! replaying these statements on this schema (docs/PERFORMANCE.md) gives twice the calls per
//! second with eight calls of eight sessions per transaction as with one call per transaction.
//!
//! A call's outcome joins its session's queue when this engine sent the call (it remembers the
//! pending effect, and so its session): the outcome and its neighbours' intercepts then share one
//! COMMIT, and the outcome's undo entry is written by the transaction that holds the session's
//! row, not beside it.
//!
//! Nothing waits to gather: an operation that finds a batch free starts one at once, so a lone
//! call costs what it cost before, plus a hand-off to the task that carries it out.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Mutex,
};

use tokio::sync::oneshot;
use undolog_types::{OrgId, SessionId};

use crate::{Engine, Error, group_commit::Op};

/// The most operations one batch carries; more wait for the next.
const MAX_BATCH: usize = 128;
/// The most batches under way at once. A batch is one round trip and one COMMIT on a connection of
/// its own: one batch gathers while another waits for its COMMIT, and more batches at once are
/// smaller ones, so more transactions for the same calls. Measured with 1, 2, 3, 4 and 8 at 32
/// sessions (docs/PERFORMANCE.md): 2 was best.
const BATCHES_IN_FLIGHT: usize = 2;

type Key = (OrgId, SessionId);

/// The operations waiting for their batches, by session.
#[derive(Default)]
pub(crate) struct SessionBatches {
    queues: Mutex<Queues>,
}

#[derive(Default)]
struct Queues {
    /// The operations of each session that wait for a batch, oldest first; never empty.
    waiting: HashMap<Key, Vec<Op>>,
    /// The sessions in a batch under way: their new operations wait for it to end.
    busy: HashSet<Key>,
    /// The sessions that wait and are not busy, in the order they became ready.
    ready: VecDeque<Key>,
    /// Batches under way.
    in_flight: usize,
}

/// A batch taken from the queues: the sessions it holds, and their operations.
struct Batch {
    sessions: Vec<Key>,
    ops: Vec<Op>,
}

impl Queues {
    /// The ready sessions' operations, oldest session first, up to [`MAX_BATCH`]; `None` when no
    /// session is ready. The sessions taken are busy until [`Queues::release`].
    fn take(&mut self) -> Option<Batch> {
        let mut batch = Batch {
            sessions: Vec::new(),
            ops: Vec::new(),
        };
        while batch.ops.len() < MAX_BATCH {
            let Some(key) = self.ready.pop_front() else {
                break;
            };
            let waiting = self
                .waiting
                .get_mut(&key)
                .expect("a ready session has operations waiting");
            let room = MAX_BATCH - batch.ops.len();
            if waiting.len() <= room {
                batch.ops.append(waiting);
                self.waiting.remove(&key);
            } else {
                batch.ops.extend(waiting.drain(..room));
            }
            self.busy.insert(key.clone());
            batch.sessions.push(key);
        }
        (!batch.ops.is_empty()).then_some(batch)
    }

    /// Ends a batch's hold on its sessions: those with operations waiting are ready again.
    fn release(&mut self, sessions: Vec<Key>) {
        for key in sessions {
            self.busy.remove(&key);
            if self.waiting.contains_key(&key) {
                self.ready.push_back(key);
            }
        }
    }
}

impl std::fmt::Debug for SessionBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let queues = self.lock();
        f.debug_struct("SessionBatches")
            .field("busy_sessions", &queues.busy.len())
            .field("ready_sessions", &queues.ready.len())
            .field("batches_in_flight", &queues.in_flight)
            .finish()
    }
}

impl SessionBatches {
    /// Queues the operation `make` builds around its answer channel behind its session's
    /// operations (starting a batch when one is free), and waits for the answer.
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
        let start = {
            let mut queues = self.lock();
            let waiting = queues.waiting.entry(key.clone()).or_default();
            waiting.push(op);
            if waiting.len() == 1 && !queues.busy.contains(&key) {
                queues.ready.push_back(key);
            }
            self.start_batch(&mut queues)
        };
        if let Some(batch) = start {
            lead(engine, batch);
        }
        answer.await.unwrap_or(Err(Error::Stopped))
    }

    /// A batch of the ready sessions, counted in flight, when one more may be under way.
    fn start_batch(&self, queues: &mut Queues) -> Option<Batch> {
        if queues.in_flight >= BATCHES_IN_FLIGHT {
            return None;
        }
        let batch = queues.take()?;
        queues.in_flight += 1;
        Some(batch)
    }

    /// Ends `sessions`' batch, and takes the next batch for the same task, if any session is
    /// ready; `None` (one batch fewer in flight) when none is.
    fn next(&self, sessions: Vec<Key>) -> Option<Batch> {
        let mut queues = self.lock();
        queues.release(sessions);
        let next = queues.take();
        if next.is_none() {
            queues.in_flight -= 1;
        }
        next
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Gives a batch task's sessions back if it ends without doing so (it panicked): their waiting
/// operations are dropped, so their callers hear `Stopped` instead of waiting for ever, and the
/// task no longer counts as in flight. Other sessions that were ready get a batch of their own, as
/// the task would have given them.
struct Release<'a> {
    engine: &'a Engine,
    batches: &'a SessionBatches,
    sessions: Option<Vec<Key>>,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        let Some(sessions) = self.sessions.take() else {
            return;
        };
        let next = {
            let mut queues = self.batches.lock();
            for key in &sessions {
                queues.waiting.remove(key);
            }
            queues.release(sessions);
            queues.in_flight -= 1;
            self.batches.start_batch(&mut queues)
        };
        if let Some(batch) = next {
            lead(self.engine, batch);
        }
    }
}

/// Carries out `batch`, and the batches after it, on a task of its own: the batch goes on if its
/// callers stop waiting.
fn lead(engine: &Engine, batch: Batch) {
    let engine = engine.clone();
    tokio::spawn(async move { engine.lead_batches(batch).await });
}

impl Engine {
    /// Carries out `batch`, then the next ready sessions' operations, until none is ready.
    async fn lead_batches(&self, mut batch: Batch) {
        let Some(batches) = &self.inner().session_batches else {
            return;
        };
        loop {
            let mut release = Release {
                engine: self,
                batches,
                sessions: Some(batch.sessions),
            };
            self.run_ops(batch.ops).await;
            // The callers just answered go first: those that make their next call at once (an
            // outcome after its intercept, an intercept after an outcome) join the next batch
            // instead of waiting for the one after it.
            tokio::task::yield_now().await;
            let sessions = release.sessions.take().unwrap_or_default();
            match batches.next(sessions) {
                Some(next) => batch = next,
                None => break,
            }
        }
    }
}
