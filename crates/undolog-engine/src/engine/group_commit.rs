//! Group commit of intercepts, read-only records and effect updates (outcomes), on a store that
//! runs one writer at a time (SQLite). Each operation is a short read-decide-write; its cost is the
//! COMMIT, which waits for the disk. Operations that arrive together are queued to one thread, which
//! carries out whatever has gathered in one transaction per org, one after another (each sees the
//! writes of those before it), and commits once: one fsync for the batch. Each caller waits for the
//! commit that carries its writes and then gets its own answer: nothing is answered before it is on
//! disk, except a read-only call's record, which answers once its transaction has decided (see
//! [`Op::answers_before_commit`]).
//!
//! An operation refused on its own merits (an idempotency key reused, an illegal transition)
//! writes nothing and answers its error; the batch goes on. A store error, or a COMMIT that fails,
//! ends the batch with nothing written, and each of its operations is carried out again in a
//! transaction of its own, so one bad write never fails its neighbours.

use std::{collections::HashMap, sync::Weak};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use undolog_store::{Session, Tx};
use undolog_types::{EffectId, LeaseToken, LockKey, OrgId, SessionState, Timestamp};

use crate::{
    Call, Engine, Error, Event, Intercept, Rejection,
    core::{self, Decision, ReadOutcome, Write},
    engine::effect_updates::Update,
    engine::known::{Known, Lookup, Target, Wanted},
    engine::{Expected, Inner},
};

/// A read-only call that ran, to record as one finished effect.
#[derive(Debug, Clone)]
pub(crate) struct ReadRecord {
    pub(crate) call: Call,
    pub(crate) effect: EffectId,
    pub(crate) started: Timestamp,
    pub(crate) outcome: ReadOutcome,
    pub(crate) verdicts: Option<Value>,
}

/// One operation waiting for its batch, and where its answer goes (taken once it is sent).
pub(crate) enum Op {
    Intercept {
        call: Box<Call>,
        target: Target,
        done: Option<oneshot::Sender<Result<Decision, Error>>>,
    },
    Record {
        record: Box<ReadRecord>,
        done: Option<oneshot::Sender<Result<Option<Rejection>, Error>>>,
    },
    /// A change to one effect (a call's outcome, a lease renewal), as `effect_updates` carries
    /// out on stores that take concurrent writers.
    Update(Box<Update>),
}

/// An operation's answer, before it is sent.
enum Answer {
    Decision(Decision),
    Recorded(Option<Rejection>),
    Updated,
}

impl Op {
    /// What the operation decides on: its session, and the intercepted call's earlier effect.
    fn wanted(&self) -> Option<Wanted<'_>> {
        match self {
            Op::Intercept { call, target, .. } => Some(Wanted {
                session: &call.session,
                lookup: target.lookup.as_ref(),
            }),
            Op::Record { record, .. } => Some(Wanted {
                session: &record.call.session,
                lookup: None,
            }),
            Op::Update(_) => None,
        }
    }

    fn org(&self) -> &OrgId {
        match self {
            Op::Intercept { call, .. } => &call.org,
            Op::Record { record, .. } => &record.call.org,
            Op::Update(update) => &update.org,
        }
    }

    /// Whether the caller may have its answer once the transaction has decided, before COMMIT
    /// waits for the disk. A read-only call's record is: the call ran and changed nothing, so a
    /// crash before the commit loses only the note that it was read, never something a client
    /// could act on twice. Intercepts and outcomes wait for the commit: a pending effect is what
    /// makes a retry a replay, and an outcome is what the caller is told.
    fn answers_before_commit(&self) -> bool {
        matches!(self, Op::Record { .. })
    }

    /// Sends the answer, unless it was sent already (the operation runs again alone after its
    /// batch failed). The effect an `Execute` created that nobody heard, because its caller
    /// stopped waiting: then nobody will send the call.
    fn send(&mut self, answer: Result<Answer, Error>) -> Option<(EffectId, LeaseToken)> {
        /// The answer, when nobody took it.
        fn deliver<T>(
            done: &mut Option<oneshot::Sender<Result<T, Error>>>,
            answer: Result<T, Error>,
        ) -> Option<Result<T, Error>> {
            done.take()?.send(answer).err()
        }
        match (self, answer) {
            (Op::Intercept { done, .. }, Ok(Answer::Decision(d))) => {
                // Only an effect this decision created: one taken over or released after an
                // approval keeps its history as it is.
                if let Some(Ok(Decision::Answer(
                    Intercept::Execute {
                        effect_id,
                        lease_token,
                        ..
                    },
                    writes,
                ))) = deliver(done, Ok(d))
                    && writes
                        .iter()
                        .any(|w| matches!(w, Write::InsertEffect(e) if e.id == effect_id))
                {
                    return Some((effect_id, lease_token));
                }
            }
            (Op::Record { done, .. }, Ok(Answer::Recorded(r))) => _ = deliver(done, Ok(r)),
            (Op::Update(update), Ok(Answer::Updated)) => _ = deliver(&mut update.done, Ok(())),
            (Op::Intercept { done, .. }, Err(e)) => _ = deliver(done, Err(e)),
            (Op::Record { done, .. }, Err(e)) => _ = deliver(done, Err(e)),
            (Op::Update(update), Err(e)) => _ = deliver(&mut update.done, Err(e)),
            (_, Ok(_)) => unreachable!("each operation answers in its own kind"),
        }
        None
    }
}

mod remembered_ops;

/// The most operations one transaction carries.
const MAX_BATCH: usize = 128;

/// Queues the operation `make` builds around its answer channel, and waits for the answer.
pub(crate) async fn submit<T>(
    queue: &mpsc::UnboundedSender<Op>,
    make: impl FnOnce(Option<oneshot::Sender<Result<T, Error>>>) -> Op,
) -> Result<T, Error> {
    let (done, answer) = oneshot::channel();
    queue.send(make(Some(done))).map_err(|_| Error::Stopped)?;
    answer.await.unwrap_or(Err(Error::Stopped))
}

/// Starts the group-commit thread: a thread of its own, given over to the store, which takes
/// whatever has gathered on the queue each time it is free (up to [`MAX_BATCH`]), carries it out
/// and waits there for its COMMIT to reach the disk. The store has one writer, so nothing is lost
/// by waiting in place, and nothing stands between two batches: no hand-off of the COMMIT to a
/// blocking thread and back, no batch task queued behind requests on the runtime's threads
/// (bench/lab/). It ends when the engine is dropped.
pub(crate) fn start(engine: Weak<Inner>) -> mpsc::UnboundedSender<Op> {
    let (sender, queue) = mpsc::unbounded_channel::<Op>();
    let thread = std::thread::Builder::new()
        .name("undolog-commit".into())
        .spawn(move || commit_thread(engine, queue));
    if let Err(e) = thread {
        // The queue's receiver is gone with the thread: every operation answers `Stopped`.
        tracing::error!(error = %e, "the group-commit thread did not start; the engine takes no writes");
    }
    sender
}

/// The group-commit thread's loop, on a runtime of its own for the store's async interface.
fn commit_thread(engine: Weak<Inner>, mut queue: mpsc::UnboundedReceiver<Op>) {
    undolog_store::commit_on_this_thread();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "the group-commit thread has no runtime; the engine takes no writes");
            return;
        }
    };
    runtime.block_on(async move {
        while let Some(first) = queue.recv().await {
            let batch = gathered(first, &mut queue, MAX_BATCH);
            let Some(inner) = engine.upgrade() else {
                break;
            };
            // A task of its own, so that a batch that panics loses only itself (its callers hear
            // that the engine stopped) and the thread goes on to the next.
            let run = tokio::spawn(async move {
                let engine = Engine::from_inner(inner);
                engine.run_ops(batch, &mut || {}).await
            });
            if let Err(e) = run.await {
                tracing::error!(error = %e, "a group-commit batch failed");
            }
        }
    });
}

/// `first` and whatever else is waiting on `queue`, up to `max` in all.
pub(crate) fn gathered<T>(first: T, queue: &mut mpsc::UnboundedReceiver<T>, max: usize) -> Vec<T> {
    let mut batch = vec![first];
    while batch.len() < max {
        match queue.try_recv() {
            Ok(item) => batch.push(item),
            Err(_) => break,
        }
    }
    batch
}

impl Engine {
    /// Records a read-only call after it ran, as one finished effect: it changes nothing, so it
    /// needs no record before it runs and is never in doubt (a crash before this record loses
    /// only the note that it was read). `effect` is the id chosen when it was sent, at `started`.
    /// A rejection when the session no longer takes calls: nothing is recorded, and the caller
    /// refuses the call.
    pub async fn record_read(
        &self,
        call: Call,
        effect: EffectId,
        started: Timestamp,
        outcome: ReadOutcome,
        verdicts: Option<Value>,
    ) -> Result<Option<Rejection>, Error> {
        self.validate(&call)?;
        let record = Box::new(ReadRecord {
            call,
            effect,
            started,
            outcome,
            verdicts,
        });
        let inner = self.inner();
        match (&inner.batches, &inner.session_batches) {
            (Some(batches), _) => submit(batches, |done| Op::Record { record, done }).await,
            (None, Some(batches)) => {
                let (org, session) = (record.call.org.clone(), record.call.session.clone());
                batches
                    .submit(self, &org, &session, |done| Op::Record { record, done })
                    .await
            }
            // Committed without waiting for the disk: answered before it is durable, as a batch
            // of records is answered before its fsync.
            (None, None) => {
                let mut tx = self.begin_unsynced(&record.call.org).await?;
                let wanted = Wanted {
                    session: &record.call.session,
                    lookup: None,
                };
                let mut known = Known::read(&mut *tx, [wanted]).await?;
                let (kept, events) = self.record_in(&mut *tx, &record, &mut known).await?;
                tx.commit().await?;
                self.published(events);
                Ok(kept)
            }
        }
    }

    /// Carries out a batch: per org, all in one transaction when it holds more than one
    /// operation, and each alone when that fails. `committed` is told when a transaction of
    /// several operations has committed, before their callers are answered.
    pub(crate) async fn run_ops(&self, batch: Vec<Op>, committed: &mut (dyn FnMut() + Send)) {
        // The fault suite stops the process here: intercepts, or outcomes, taken for a batch and
        // none of them committed.
        if batch.iter().any(|op| !matches!(op, Op::Update(_))) {
            crate::crash_points::crash_point("engine::intercept_batch");
        }
        if batch.iter().any(|op| matches!(op, Op::Update(_))) {
            crate::crash_points::crash_point("engine::group_commit");
        }
        let mut by_org: HashMap<OrgId, Vec<Op>> = HashMap::new();
        for op in batch {
            by_org.entry(op.org().clone()).or_default().push(op);
        }
        for (org, mut ops) in by_org {
            self.batched(ops.len());
            if ops.len() > 1 {
                match self.run_ops_together(&org, &mut ops, committed).await {
                    Ok(()) => continue,
                    Err(e) => {
                        tracing::debug!(error = %e, ops = ops.len(), "a batch failed; each operation alone");
                        if e.is_changed() {
                            self.forget_rows_of(&ops);
                        }
                    }
                }
            }
            for op in &mut ops {
                self.run_op_alone(op).await;
            }
        }
    }

    /// Every operation in one transaction, one commit, each answered when its answer may go (see
    /// [`Op::answers_before_commit`]). `Err` when the transaction failed: nothing is written, and
    /// the operations not yet answered wait to run again.
    async fn run_ops_together(
        &self,
        org: &OrgId,
        ops: &mut [Op],
        committed: &mut (dyn FnMut() + Send),
    ) -> Result<(), Error> {
        let mut tx = self.begin_for(org, ops).await?;
        let mut known = self.prepare(&mut *tx, ops).await?.holding_session_writes();
        let mut answers = Vec::with_capacity(ops.len());
        let mut events = Vec::new();
        for op in ops.iter_mut() {
            let answer = match self.run_in(&mut *tx, op, &mut known).await {
                Ok((answer, made)) => {
                    events.extend(made);
                    Ok(answer)
                }
                // The transaction may hold part of this operation's writes: start over.
                Err(e @ Error::Store(_)) => return Err(e),
                // Refused before it wrote anything: its own answer.
                Err(e) => Err(e),
            };
            if op.answers_before_commit() {
                self.answer(op, answer);
                answers.push(None);
            } else {
                answers.push(Some(answer));
            }
        }
        self.write_held_sessions(&mut *tx, &known).await?;
        tx.commit().await?;
        committed();
        self.published(events);
        for (op, answer) in ops.iter_mut().zip(answers) {
            if let Some(answer) = answer {
                self.answer(op, answer);
            }
        }
        Ok(())
    }

    /// One operation in a transaction of its own, answered when its answer may go.
    async fn run_op_alone(&self, op: &mut Op) {
        if self.run_remembered(op).await {
            return;
        }
        let early = op.answers_before_commit();
        let mut done = self.run_op_once(op, early).await;
        // An update decided on its effect as remembered, which the store found changed (and
        // wrote nothing): decided again on the effect as read.
        if matches!(&done, Err(e) if e.is_changed()) && matches!(op, Op::Update(_)) {
            self.forget_rows_of(std::slice::from_ref(op));
            done = self.run_op_once(op, early).await;
        }
        match done {
            Ok(Some(answer)) => self.answer(op, Ok(answer)),
            Ok(None) => {}
            Err(e) => {
                if early {
                    tracing::warn!(error = %e, "the record of a read-only call could not be kept");
                }
                self.answer(op, Err(e));
            }
        }
    }

    /// One transaction for `op`: its answer, or `None` when it was answered before the commit.
    async fn run_op_once(&self, op: &mut Op, early: bool) -> Result<Option<Answer>, Error> {
        let ops = std::slice::from_ref(op);
        let mut tx = self.begin_for(op.org(), ops).await?;
        let mut known = self.prepare(&mut *tx, ops).await?;
        let (answer, events) = self.run_in(&mut *tx, op, &mut known).await?;
        if early {
            self.answer(op, Ok(answer));
            tx.commit().await?;
            self.published(events);
            return Ok(None);
        }
        tx.commit().await?;
        self.published(events);
        Ok(Some(answer))
    }

    /// Answers `op`. An intercept whose caller stopped waiting before it heard "execute" is never
    /// sent: its effect is marked so at once (rejected, as a call that could not be sent), so
    /// that an identical call is decided afresh instead of waiting for the lease to run out.
    fn answer(&self, op: &mut Op, answer: Result<Answer, Error>) {
        let Some((effect, token)) = op.send(answer) else {
            return;
        };
        let (engine, org) = (self.clone(), op.org().clone());
        // On a task: the update waits for a batch, and this one may be what it waits for.
        self.spawn_among_callers(async move {
            let reason = "its caller stopped waiting before the call was sent";
            if let Err(e) = engine.not_sent(&org, effect, &token, reason, None).await {
                tracing::warn!(error = %e, %effect, "a call nobody will send stays pending until its lease ends");
            }
        });
    }

    /// A transaction for `ops`: unsynced when they are all read-only records, whose callers are
    /// answered before the commit anyway (see [`Op::answers_before_commit`]).
    async fn begin_for(&self, org: &OrgId, ops: &[Op]) -> Result<Box<dyn Tx>, Error> {
        if ops.iter().all(Op::answers_before_commit) {
            self.begin_unsynced(org).await
        } else {
            self.begin(org).await
        }
    }

    /// Takes the intercepts' locks, all first and in order of their keys: a transaction that
    /// takes several takes them in the order every other one does, so two batches (on a store
    /// with concurrent writers) never wait for each other in a circle. Then reads what the
    /// operations decide on.
    async fn prepare(&self, tx: &mut dyn Tx, ops: &[Op]) -> Result<Known, Error> {
        let mut locks: Vec<LockKey> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Intercept { target, .. } => Some(target.lock),
                _ => None,
            })
            .collect();
        locks.sort_by_key(|lock| lock.as_i64());
        locks.dedup();
        for lock in locks {
            tx.lock(lock).await?;
        }
        let Some(org) = ops.first().map(Op::org) else {
            return Ok(Known::default());
        };
        if let Some(sessions) = self.remembered_sessions_of(ops) {
            // Nothing read: each call is taken for new, and the store checks that it is.
            let lookups: Vec<&Lookup> = ops
                .iter()
                .filter_map(Op::wanted)
                .filter_map(|w| w.lookup)
                .collect();
            for lookup in &lookups {
                tx.expect_no_effect(lookup.borrowed()).await?;
            }
            return Ok(Known::assumed(sessions, lookups));
        }
        self.read_known(tx, org, ops.iter().filter_map(Op::wanted))
            .await
    }

    /// The sessions the intercepts and records of `ops` record calls in, as this engine
    /// remembers them, when the batch may be decided on them without reading (see `remembered`):
    /// each remembered and taking calls, and no call known to have an earlier effect. Effect
    /// updates read no session; each decides on its own effect (`update_in`).
    fn remembered_sessions_of(&self, ops: &[Op]) -> Option<Vec<Session>> {
        let memory = self.inner().remembered.as_ref()?;
        let org = ops.first()?.org();
        let mut sessions: Vec<Session> = Vec::new();
        for wanted in ops.iter().filter_map(Op::wanted) {
            if wanted
                .lookup
                .is_some_and(|lookup| memory.finds(org, lookup))
            {
                return None;
            }
            if sessions.iter().all(|s| s.id != *wanted.session) {
                let session = memory
                    .session(org, wanted.session)
                    .filter(|s| s.state == SessionState::Active)?;
                sessions.push(session);
            }
        }
        (!sessions.is_empty()).then_some(sessions)
    }

    async fn run_in(
        &self,
        tx: &mut dyn Tx,
        op: &Op,
        known: &mut Known,
    ) -> Result<(Answer, Vec<Event>), Error> {
        match op {
            Op::Intercept { call, target, .. } => {
                let (decision, events) = self.decide_in(tx, call, target, known).await?;
                Ok((Answer::Decision(decision), events))
            }
            Op::Record { record, .. } => {
                let (kept, events) = self.record_in(tx, record, known).await?;
                Ok((Answer::Recorded(kept), events))
            }
            Op::Update(update) => {
                let events = self.update_in(tx, update, known).await?;
                Ok((Answer::Updated, events))
            }
        }
    }

    /// An effect update in `tx`: decided on the effect as this engine remembers it (its own
    /// writes in this transaction included), written only if the stored row is still so; or,
    /// when it is not remembered or the change is refused on the memory, on the effect read
    /// (an earlier update of it in this transaction is read back). `known` takes in its writes,
    /// for the intercepts after it that look for this effect.
    async fn update_in(
        &self,
        tx: &mut dyn Tx,
        update: &Update,
        known: &mut Known,
    ) -> Result<Vec<Event>, Error> {
        let remembered = self.inner().remembered.as_ref();
        let decided = remembered
            .and_then(|m| m.effect(&update.org, update.effect))
            .and_then(|before| {
                let writes = (update.change)(before.clone()).ok()?;
                Some((writes, before))
            });
        let (writes, events) = match decided {
            Some((writes, before)) => {
                let expected = Expected {
                    sessions: &[],
                    effects: std::slice::from_ref(&before),
                    held: known.held(),
                };
                let events = self.apply_expecting(tx, &writes, expected).await?;
                (writes, events)
            }
            None => {
                let effect = tx
                    .effect(update.effect)
                    .await?
                    .ok_or(Error::UnknownEffect(update.effect))?;
                let writes = (update.change)(effect)?;
                let expected = Expected {
                    held: known.held(),
                    ..Expected::default()
                };
                let events = self.apply_expecting(tx, &writes, expected).await?;
                (writes, events)
            }
        };
        known.saw(&writes);
        Ok(events)
    }

    /// Writes each session `known` holds back (see [`Known::holding_session_writes`]) as its
    /// operations left it: only if the stored row is still as remembered, when it was not read.
    async fn write_held_sessions(&self, tx: &mut dyn Tx, known: &Known) -> Result<(), Error> {
        for (before, after) in known.held_writes() {
            crate::engine::write_session(tx, before, after).await?;
        }
        Ok(())
    }

    /// [`core::record_read`] in `tx`, on the session as `known` has it: nothing, or why it was
    /// not kept (the session is closed).
    async fn record_in(
        &self,
        tx: &mut dyn Tx,
        record: &ReadRecord,
        known: &mut Known,
    ) -> Result<(Option<Rejection>, Vec<Event>), Error> {
        let call = &record.call;
        let writes = core::record_read(
            call,
            record.effect,
            record.started,
            known.session(&call.session),
            record.outcome.clone(),
            record.verdicts.clone(),
            self.now(),
        );
        match writes {
            Ok(writes) => {
                let events = self.apply_expecting(tx, &writes, known.expected()).await?;
                known.saw(&writes);
                Ok((None, events))
            }
            Err(rejection) => {
                self.found_closed(&call.org, &call.session, &rejection);
                Ok((Some(rejection), Vec::new()))
            }
        }
    }
}
