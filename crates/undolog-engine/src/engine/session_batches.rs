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
//! replaying these statements on this schema (bench/lab/) gives twice the calls per
//! second with eight calls of eight sessions per transaction as with one call per transaction.
//!
//! A call's outcome joins its session's queue when this engine sent the call (it remembers the
//! pending effect, and so its session): the outcome and its neighbours' intercepts then share one
//! COMMIT, and the outcome's undo entry is written by the transaction that holds the session's
//! row, not beside it.
//!
//! Nothing waits to gather: an operation that finds a batch free starts one at once, so a lone
//! call costs what it cost before, plus a hand-off to the task that carries it out.
//!
//! Between two batches the leader may let the callers it just answered run first
//! ([`YieldJudge`]): that gathers the next operations of callers that make them at once, and only
//! delays the next batch when callers do something else first (the gateway's go on to the
//! upstream, or answer their client). A leader that will not yield runs on the engine's batch
//! thread when it has one (`batch_runtime`), where it hears its COMMIT at once; one that will
//! runs among its callers.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Mutex,
};

use tokio::sync::oneshot;
use undolog_types::{OrgId, SessionId};

use crate::{Engine, Error, engine::group_commit::Op};

/// The most operations one batch carries; more wait for the next.
const MAX_BATCH: usize = 128;
/// The most batches under way at once. A batch is one round trip and one COMMIT on a connection of
/// its own: one batch gathers while another waits for its COMMIT, and more batches at once are
/// smaller ones, so more transactions for the same calls. Measured with 1, 2, 3, 4 and 8 at 32
/// sessions (bench/lab/): 2 was best.
pub(crate) const BATCHES_IN_FLIGHT: usize = 2;

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
    /// Operations submitted since the start: how many arrive while a batch answers its callers
    /// and its leader yields.
    submitted: u64,
    judge: YieldJudge,
}

/// Whether a batch's leader yields before it takes the next batch, so that the callers it just
/// answered run first.
///
/// That pays when those callers make their next operation at once (a program that drives the
/// engine in a loop, as the engine's benchmark does): the operations join the next batch instead
/// of the one after it. It costs when they do something else first: the gateway's callers send
/// the call to its upstream, or answer their client, and the next batch, with what was already
/// waiting, waits for all of them while the server has nothing to do (on the gateway's PostgreSQL
/// row, 28% of the machine idle against 20% without the yield, and about 8% fewer calls per
/// second; bench/lab/). So yielding is on probation: over [`PROBE_YIELDS`] yields the
/// leaders count the operations submitted from each batch's commit to the end of its yield, and
/// keep yielding while those are at least half of the operations they answered; after
/// [`FAILED_PROBES`] probes in a row that found less, they take the next batch at once for
/// [`SKIPPED_BATCHES`] batches, then probe again.
#[derive(Debug, Default)]
struct YieldJudge {
    /// Batches left that take the next batch without yielding.
    skipping: u32,
    /// Probes in a row, just before this one, that found yielding did not pay.
    failed: u32,
    /// The probe so far: yields, the operations answered before them, those submitted during them.
    yields: u32,
    answered: usize,
    arrived: u64,
}

/// The yields a probe counts.
const PROBE_YIELDS: u32 = 4;
/// The probes in a row that must find yielding does not pay before the leaders stop: one probe
/// can miss by chance (a few batches of one operation each).
const FAILED_PROBES: u32 = 2;
/// The batches taken without yielding after that (about half a second on the gateway's
/// PostgreSQL row). Probes run among the callers, off the batch thread, and cost the most there:
/// with 60, that row gave 3% fewer calls per second (bench/lab/).
const SKIPPED_BATCHES: u32 = 250;

impl YieldJudge {
    /// Whether the leader that just answered its batch yields now.
    fn yields(&mut self) -> bool {
        if self.skipping == 0 {
            return true;
        }
        self.skipping -= 1;
        false
    }

    /// A yield after `answered` operations, during which `arrived` were submitted.
    fn yielded(&mut self, answered: usize, arrived: u64) {
        self.yields += 1;
        self.answered += answered;
        self.arrived += arrived;
        if self.yields < PROBE_YIELDS {
            return;
        }
        let pays = self.arrived * 2 >= self.answered as u64;
        let failed = if pays { 0 } else { self.failed + 1 };
        let stop = failed == FAILED_PROBES;
        *self = YieldJudge {
            skipping: if stop { SKIPPED_BATCHES } else { 0 },
            failed: if stop { 0 } else { failed },
            ..YieldJudge::default()
        };
    }
}

/// A batch taken from the queues: the sessions it holds, and their operations.
struct Batch {
    sessions: Vec<Key>,
    ops: Vec<Op>,
    /// Whether its leader will yield once it is done (see [`YieldJudge`]).
    yields: bool,
}

impl Queues {
    /// The ready sessions' operations, oldest session first, up to [`MAX_BATCH`]; `None` when no
    /// session is ready. The sessions taken are busy until [`Queues::release`].
    fn take(&mut self) -> Option<Batch> {
        let mut batch = Batch {
            sessions: Vec::new(),
            ops: Vec::new(),
            yields: self.judge.skipping == 0,
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
            queues.submitted += 1;
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

    /// Lets the callers of a batch of `answered` operations run before its leader goes on, when
    /// the [`YieldJudge`] says so, and tells it how many operations were submitted from the
    /// moment the batch's callers could run (`from`, the count when its transaction committed, or
    /// now) to the end of the yield: on a runtime of several threads, some callers run at once.
    async fn maybe_yield(&self, answered: usize, from: Option<u64>) {
        let from = {
            let mut queues = self.lock();
            if !queues.judge.yields() {
                return;
            }
            from.unwrap_or(queues.submitted)
        };
        tokio::task::yield_now().await;
        let mut queues = self.lock();
        let arrived = queues.submitted - from;
        queues.judge.yielded(answered, arrived);
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
/// callers stop waiting. On the engine's batch thread when there is one and its leader will not
/// yield (see [`crate::engine::batch_runtime`]), else on the runtime of the callers.
fn lead(engine: &Engine, batch: Batch) {
    let own = engine.leads_on_own_thread(&batch);
    let leader = engine.clone();
    let work = async move { leader.lead_batches(batch, own).await };
    match &engine.inner().batch_runtime {
        Some(runtime) if own => drop(runtime.own.spawn(work)),
        _ => engine.spawn_among_callers(work),
    }
}

impl Engine {
    /// Carries out `batch`, then the next ready sessions' operations, until none is ready; `own`
    /// when on the batch thread, where a batch whose leader will yield does not go on (its
    /// callers are elsewhere).
    async fn lead_batches(&self, mut batch: Batch, own: bool) {
        let Some(batches) = &self.inner().session_batches else {
            return;
        };
        loop {
            let mut release = Release {
                engine: self,
                batches,
                sessions: Some(batch.sessions),
            };
            let answered = batch.ops.len();
            let mut answering_from = None;
            let mut committed = || {
                answering_from.get_or_insert_with(|| batches.lock().submitted);
            };
            self.run_ops(batch.ops, &mut committed).await;
            batches.maybe_yield(answered, answering_from).await;
            let sessions = release.sessions.take().unwrap_or_default();
            match batches.next(sessions) {
                Some(next) if self.leads_on_own_thread(&next) == own => batch = next,
                Some(next) => {
                    lead(self, next);
                    break;
                }
                None => break,
            }
        }
    }

    fn leads_on_own_thread(&self, batch: &Batch) -> bool {
        self.inner().batch_runtime.is_some() && !batch.yields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Of `batches` batches of `answered` operations each, those whose leader yields, when the
    /// callers of batch `i` submit `arrived(i)` operations while it does.
    fn yields_over(batches: u32, answered: usize, arrived: impl Fn(u32) -> u64) -> Vec<u32> {
        let mut judge = YieldJudge::default();
        let mut yielded = Vec::new();
        for i in 0..batches {
            if judge.yields() {
                yielded.push(i);
                judge.yielded(answered, arrived(i));
            }
        }
        yielded
    }

    #[test]
    fn a_leader_yields_while_its_callers_come_back_at_once_and_seldom_otherwise() {
        // Two failing probes of four yields, the batches skipped, two probes again, and a few more.
        const BATCHES: u32 = SKIPPED_BATCHES + 20;
        let skipped = 8..8 + SKIPPED_BATCHES;
        let every: Vec<u32> = (0..BATCHES).collect();
        let probes: Vec<u32> = (0..8).chain(skipped.end..skipped.end + 8).collect();
        let probes_then_every: Vec<u32> = (0..8).chain(skipped.end..BATCHES).collect();
        type Arrived = fn(u32) -> u64;
        // (what the callers do, operations a batch answers, what arrives during batch i's yield,
        // the batches of BATCHES that yield)
        let cases: [(&str, usize, Arrived, &[u32]); 6] = [
            ("all come back at once", 10, |_| 10, &every),
            ("half of them do", 10, |_| 5, &every),
            (
                "all do, but not in one probe",
                10,
                |i| if (4..8).contains(&i) { 0 } else { 10 },
                &every,
            ),
            ("few do (the gateway's)", 16, |_| 3, &probes),
            ("none do", 16, |_| 0, &probes),
            (
                "none do, then all do",
                16,
                |i| if i < 8 { 0 } else { 16 },
                &probes_then_every,
            ),
        ];
        for (what, answered, arrived, expected) in cases {
            assert_eq!(yields_over(BATCHES, answered, arrived), expected, "{what}");
        }
    }
}
