//! The executor: reads what the store holds, asks the sans-IO core what to do, writes the answer in
//! the same transaction, then publishes events and wakes waiters.

use std::{collections::HashSet, pin::pin, sync::Arc, time::Duration};

use serde_json::Value;
use tokio::{
    sync::{Notify, broadcast, mpsc},
    time::Instant,
};
use undolog_store::{Effect, Lease, Session, Store, Tx};
use undolog_types::{EffectId, EffectState, LeaseToken, OrgId, SessionId, Tier, Timestamp};

use crate::{
    Call, Clock, EngineConfig, Error, Event, Intercept, SystemClock,
    core::{self, Decision, InterceptView, Write},
};

pub(crate) mod batch_runtime;
pub(crate) mod effect_updates;
pub(crate) mod executor;
pub(crate) mod group_commit;
pub(crate) mod hints;
pub(crate) mod known;
pub(crate) mod readers;
pub(crate) mod remembered;
pub(crate) mod session_batches;
pub(crate) mod sessions;
mod writes;

use effect_updates::Update;
use known::{Known, Target, Wanted};
use remembered::Remembered;

/// The effect engine. Cheap to clone; clones share the store, clock, waiters and event stream.
#[derive(Debug, Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    store: Arc<dyn Store>,
    /// The thread most of `session_batches`' leaders run on (see `batch_runtime`).
    pub(crate) batch_runtime: Option<self::batch_runtime::BatchRuntime>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    /// Woken after every committed change (here, or another process's), so waiters look again.
    pub(crate) changed: Notify,
    pub(crate) events: broadcast::Sender<Event>,
    /// The events of this engine's own commits alone (not those heard from other processes).
    own_events: broadcast::Sender<Event>,
    /// How many times this process replayed each effect (see [`Event::EffectReplayed`]).
    replays: crate::events::ReplayCounts,
    /// Each commit's events, for the task that sends them to other processes on the same store
    /// while one is there to hear them.
    pub(crate) hints: Option<self::hints::Hints>,
    /// Effect updates, for the task that commits them in batches; `None` without a runtime, and
    /// when they go with `batches`.
    pub(crate) updates: Option<mpsc::UnboundedSender<Update>>,
    /// Intercepts and read-only records, for the task that commits them in batches; `None`
    /// without a runtime, or when the store takes writers concurrently (see `group_commit`).
    pub(crate) batches: Option<mpsc::UnboundedSender<self::group_commit::Op>>,
    /// Intercepts and read-only records, batched per session when the store takes writers
    /// concurrently (see `session_batches`); `None` without a runtime, or with `batches`.
    pub(crate) session_batches: Option<self::session_batches::SessionBatches>,
    /// The implicit runs read last (see `sessions`).
    pub(crate) runs: self::sessions::RunCache,
    /// Rows last written or read, to write on without reading first (see `remembered`); `None`
    /// without a runtime.
    pub(crate) remembered: Option<Remembered>,
    /// Whether the store took this executor's last heartbeat (see `executor`).
    pub(crate) health: std::sync::Mutex<crate::Health>,
    /// Told how many writes each batched transaction carries (see [`Engine::observe_batches`]).
    batch_observer: BatchObserverSlot,
}

/// The rows a transaction writes over as this engine remembers them, without having read them
/// (see `remembered`): the store writes only while they are still so.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Expected<'a> {
    pub(crate) sessions: &'a [Session],
    pub(crate) effects: &'a [Effect],
    /// Sessions whose writes wait for the end of the transaction, which writes each once
    /// (`Known::holding_session_writes`): a write of one of them is not made here.
    pub(crate) held: Option<&'a HashSet<SessionId>>,
}

/// What [`Engine::observe_batches`] calls with the size of each batched transaction.
pub type BatchObserver = Arc<dyn Fn(usize) + Send + Sync>;

#[derive(Default)]
struct BatchObserverSlot(std::sync::OnceLock<BatchObserver>);

impl std::fmt::Debug for BatchObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "observed"
        } else {
            "unobserved"
        })
    }
}

impl Engine {
    pub fn new(store: Arc<dyn Store>, config: EngineConfig) -> Engine {
        Engine::with_clock(store, config, Arc::new(SystemClock))
    }

    pub fn with_clock(
        store: Arc<dyn Store>,
        config: EngineConfig,
        clock: Arc<dyn Clock>,
    ) -> Engine {
        let (events, _) = broadcast::channel(1024);
        let notifications = store.notifications();
        let runtime = tokio::runtime::Handle::try_current().is_ok();
        if notifications.is_some() && !runtime {
            tracing::warn!("no async runtime: other processes' changes are seen by polling only");
        }
        let notifications = notifications.filter(|_| runtime);
        let me = config.executor_id.clone();
        let inner = Arc::new_cyclic(|inner| Inner {
            hints: notifications
                .clone()
                .map(|n| self::hints::Hints::start(n, me.clone(), config.peer_silence)),
            updates: (runtime && !store.one_writer_at_a_time())
                .then(|| effect_updates::start(inner.clone())),
            batches: (runtime && store.one_writer_at_a_time())
                .then(|| self::group_commit::start(inner.clone())),
            session_batches: (runtime && !store.one_writer_at_a_time()).then(Default::default),
            batch_runtime: (runtime && !store.one_writer_at_a_time())
                .then(|| self::batch_runtime::BatchRuntime::start(&store))
                .flatten(),
            remembered: runtime.then(|| Remembered::new(config.executor_id.clone())),
            store,
            clock,
            config,
            changed: Notify::new(),
            events,
            own_events: broadcast::channel(1024).0,
            replays: Default::default(),
            runs: self::sessions::RunCache::default(),
            health: std::sync::Mutex::new(crate::Health::starting()),
            batch_observer: BatchObserverSlot::default(),
        });
        if let Some(notifications) = &notifications {
            self::hints::listen(Arc::downgrade(&inner), notifications, &me);
        }
        Engine { inner }
    }

    /// Calls `observer` with the number of writes of every batch this engine commits together
    /// (group commit, per-session batches, effect updates), for metrics. The first call wins.
    pub fn observe_batches(&self, observer: BatchObserver) {
        let _ = self.inner.batch_observer.0.set(observer);
    }

    /// Tells the observer a batch of `size` writes is being committed.
    pub(crate) fn batched(&self, size: usize) {
        if let Some(observe) = self.inner.batch_observer.0.get() {
            observe(size);
        }
    }

    pub(crate) fn from_inner(inner: Arc<Inner>) -> Engine {
        Engine { inner }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// Live events of every org; filter with [`Event::org`].
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.events.subscribe()
    }

    /// The same, of what this engine committed itself: what happens once in a fleet of gateways
    /// on one store, for work that must be done once (telling people of a held call).
    pub fn subscribe_own(&self) -> broadcast::Receiver<Event> {
        self.inner.own_events.subscribe()
    }

    pub(crate) fn downgrade(&self) -> std::sync::Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// The engine's clock.
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    pub(crate) fn store(&self) -> &dyn Store {
        &*self.inner.store
    }

    /// A transaction; on the batch thread, on its connections (see `batch_runtime`), so that
    /// none of the store's own is ever opened there.
    pub(crate) async fn begin(&self, org: &OrgId) -> Result<Box<dyn Tx>, Error> {
        Ok(self.store_here().begin(org).await?)
    }

    /// A transaction whose commit does not wait for the disk (see `Store::begin_unsynced`).
    pub(crate) async fn begin_unsynced(&self, org: &OrgId) -> Result<Box<dyn Tx>, Error> {
        Ok(self.store_here().begin_unsynced(org).await?)
    }

    /// Decides what happens to a call: run it, replay it, hold it for a person, or refuse it. An
    /// identical call in flight is waited for (up to `wait_timeout`) and then replayed.
    pub async fn intercept(&self, call: Call) -> Result<Intercept, Error> {
        self.validate(&call)?;
        let target = Target::of(&call);
        let wait = call.wait.map_or(self.inner.config.wait_timeout, |w| {
            w.min(self.inner.config.wait_timeout)
        });
        let deadline = Instant::now() + wait;
        loop {
            let mut changed = pin!(self.inner.changed.notified());
            changed.as_mut().enable(); // registered before we look, so no wake-up is missed
            let effect = match self.decide_intercept(&call, &target).await? {
                Decision::Answer(answer, _) => {
                    if let Intercept::Rejected { reason, .. } = &answer {
                        self.found_closed(&call.org, &call.session, reason);
                    }
                    return Ok(answer);
                }
                Decision::Wait(effect) => effect,
            };
            if !self.pause(changed, deadline).await {
                return Err(Error::StillRunning {
                    effect,
                    waited: wait,
                });
            }
        }
    }

    /// Sleeps until the log changes or a poll interval passes (another process may have changed
    /// it); `false` when the deadline has passed.
    async fn pause(
        &self,
        changed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
        deadline: Instant,
    ) -> bool {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        let pause = self.inner.config.poll_interval.min(deadline - now);
        tokio::select! {
            () = changed => {}
            () = tokio::time::sleep(pause) => {}
        }
        true
    }

    /// Refuses a call the engine would refuse to record: no tool name, an empty idempotency key,
    /// arguments over the limit.
    pub fn validate(&self, call: &Call) -> Result<(), Error> {
        validate(&self.inner.config, call)
    }

    /// One look at the store under the call's lock: in a batch shared with the calls that arrive
    /// at the same moment when the store takes one writer at a time (see `group_commit`), or with
    /// those of the same session when it takes several (see `session_batches`), else (no runtime)
    /// in a transaction of its own.
    async fn decide_intercept(&self, call: &Call, target: &Target) -> Result<Decision, Error> {
        let op = |done| self::group_commit::Op::Intercept {
            call: Box::new(call.clone()),
            target: target.clone(),
            done,
        };
        match (&self.inner.batches, &self.inner.session_batches) {
            (Some(batches), _) => self::group_commit::submit(batches, op).await,
            (None, Some(batches)) => batches.submit(self, &call.org, &call.session, op).await,
            (None, None) => self.decide_alone(call, target).await,
        }
    }

    /// [`Engine::decide_intercept`] in a transaction of its own.
    async fn decide_alone(&self, call: &Call, target: &Target) -> Result<Decision, Error> {
        let mut tx = self.begin(&call.org).await?;
        tx.lock(target.lock).await?;
        let wanted = Wanted {
            session: &call.session,
            lookup: target.lookup.as_ref(),
        };
        let mut known = self.read_known(&mut *tx, &call.org, [wanted]).await?;
        let (decision, events) = self.decide_in(&mut *tx, call, target, &mut known).await?;
        if let Decision::Answer(..) = decision {
            tx.commit().await?;
            self.published(events);
        }
        Ok(decision)
    }

    /// The decision on `call`, from what `known` has of its session and the earlier effect of
    /// its `target` (read under the target's lock, which `tx` holds); its writes are made in
    /// `tx` and taken into `known`. The events they make, to publish once `tx` commits.
    pub(crate) async fn decide_in(
        &self,
        tx: &mut dyn Tx,
        call: &Call,
        target: &Target,
        known: &mut Known,
    ) -> Result<(Decision, Vec<Event>), Error> {
        let session = known.session(&call.session);
        let existing = known.earlier_effect(target.lookup.as_ref());
        let approval = match existing.as_ref().and_then(|e| e.approval) {
            Some(id) => tx.approval(id).await?,
            None => None,
        };
        let view = self.intercept_view(call, session, existing, approval);
        let decision = core::decide_intercept(call, view)?;
        let mut events = Vec::new();
        if let Decision::Answer(answer, writes) = &decision {
            events = self.apply_expecting(tx, writes, known.expected()).await?;
            known.saw(writes);
            if let Intercept::Replay { effect_id, .. } = answer {
                events.push(Event::EffectReplayed {
                    org: call.org.clone(),
                    session: call.session.clone(),
                    effect_id: *effect_id,
                    replays: self.inner.replays.count(*effect_id),
                });
            }
        }
        Ok((decision, events))
    }

    /// What the core decides `call` on, now: these rows, and the lease and approval deadline
    /// this engine would give it.
    pub(crate) fn intercept_view(
        &self,
        call: &Call,
        session: Option<Session>,
        existing: Option<Effect>,
        approval: Option<undolog_store::Approval>,
    ) -> InterceptView {
        let now = self.now();
        let config = &self.inner.config;
        InterceptView {
            session,
            existing,
            approval,
            now,
            lease: Lease {
                holder: config.executor_id.clone(),
                expires_at: now.plus(call.lease.unwrap_or(config.lease)),
            },
            token: LeaseToken::generate(),
            approval_expires_at: now.plus(config.approval_timeout),
            new_ids: core::NewIds {
                effect: EffectId::generate(),
                approval: undolog_types::ApprovalId::generate(),
            },
        }
    }

    /// Records a call that was refused before it was sent (an interceptor blocked it) as a
    /// `rejected` effect, in one transaction: `reason` says why, `verdicts` (if any: what the
    /// interceptor chain decided) is kept for whoever reads the log. The tool never runs; an identical call later is
    /// decided afresh. `None` when the session no longer takes calls (nothing is recorded then).
    pub async fn reject(
        &self,
        call: &Call,
        reason: impl Into<String>,
        verdicts: Option<Value>,
    ) -> Result<Option<EffectId>, Error> {
        self.validate(call)?;
        let mut tx = self.begin(&call.org).await?;
        tx.lock(call.signature().lock_key()).await?;
        let session = tx.session(&call.session).await?;
        let Some((effect_id, writes)) = core::reject(
            call,
            EffectId::generate(),
            session,
            reason.into(),
            verdicts,
            self.now(),
        ) else {
            return Ok(None);
        };
        self.commit_writes(tx, &writes).await?;
        Ok(Some(effect_id))
    }

    /// [`Known::read`], and remembered.
    pub(crate) async fn read_known(
        &self,
        tx: &mut dyn Tx,
        org: &OrgId,
        wanted: impl IntoIterator<Item = Wanted<'_>>,
    ) -> Result<Known, Error> {
        let known = Known::read(tx, wanted).await?;
        if let Some(memory) = &self.inner.remembered {
            memory.read(org, &known);
        }
        Ok(known)
    }

    pub(crate) fn published(&self, events: Vec<Event>) {
        self.inner.changed.notify_waiters();
        if let Some(hints) = &self.inner.hints {
            hints.publish(&events);
        }
        for event in events {
            self.inner.runs.saw(&event);
            if self.inner.own_events.receiver_count() > 0 {
                let _ = self.inner.own_events.send(event.clone());
            }
            let _ = self.inner.events.send(event); // nobody listening is fine
        }
    }

    /// Runs `look` until it returns `Some`, looking again after every change in the log (or every
    /// poll interval, for changes made by other processes) until `timeout` passes.
    pub(crate) async fn poll_until<T, F, Fut>(
        &self,
        timeout: Duration,
        mut look: F,
    ) -> Result<Option<T>, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>, Error>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            let mut changed = pin!(self.inner.changed.notified());
            changed.as_mut().enable();
            if let Some(found) = look().await? {
                return Ok(Some(found));
            }
            if !self.pause(changed, deadline).await {
                return Ok(None);
            }
        }
    }

    /// Every session of the org, oldest first.
    pub async fn sessions(&self, org: &OrgId) -> Result<Vec<Session>, Error> {
        self.sessions_read_by(org, &crate::Reader::Org).await
    }

    /// A session's effects in order of interception.
    pub async fn session_effects(
        &self,
        org: &OrgId,
        session: &SessionId,
    ) -> Result<Vec<Effect>, Error> {
        (self.session_effects_read_by(org, session, &crate::Reader::Org)).await
    }

    pub async fn effect(&self, org: &OrgId, id: EffectId) -> Result<Effect, Error> {
        self.begin(org)
            .await?
            .effect(id)
            .await?
            .ok_or(Error::UnknownEffect(id))
    }
}

/// Refuses a call an engine with `config` would refuse to record: no tool name, an empty
/// idempotency key, arguments over the limit. A gateway asking an engine elsewhere checks this
/// before anything runs.
pub fn validate(config: &EngineConfig, call: &Call) -> Result<(), Error> {
    if call.tool.is_empty() {
        return Err(Error::EmptyToolName);
    }
    if call.idempotency_key.as_deref() == Some("") {
        return Err(Error::EmptyIdempotencyKey);
    }
    let len = call.args.canonical_len();
    let limit = config.max_args_bytes;
    if len > limit {
        return Err(Error::ArgsTooLarge { len, limit });
    }
    Ok(())
}

/// Writes session `after`: only if the stored row is still `before` when the session was taken as
/// remembered instead of read, else as it is.
pub(crate) async fn write_session(
    tx: &mut dyn Tx,
    before: Option<&Session>,
    after: &Session,
) -> Result<(), Error> {
    match before {
        Some(before) => tx.replace_session(before, after).await?,
        None => tx.put_session(after).await?,
    }
    Ok(())
}
