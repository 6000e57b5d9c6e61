//! Group commit of effect updates. Recording a tool's result, a failure, a lease renewal or an
//! in-doubt verdict each reads one effect and writes it back; under load, many of them wait at
//! once. They are queued to one task, which takes whatever has gathered and carries it out in one
//! transaction per org: one read of all the effects, every change, one COMMIT. With nothing else
//! waiting, an update is a transaction of its own, as before.
//!
//! On a store that runs one writer at a time (SQLite) updates join the intercepts' batches instead
//! (`group_commit`), so that a call's outcome and its neighbours' intents share one fsync; on one
//! with concurrent writers (PostgreSQL), so does the outcome of a call this engine sent, in its
//! session's batch (`session_batches`). What comes here is the rest: an effect this engine does
//! not remember (another gateway sent the call, or its memory was forgotten).
//!
//! A batch that fails as a whole (the store refused a write, the database went away) is tried
//! again one update per transaction, so each caller gets its own answer and one bad update
//! cannot take the others down with it.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Weak},
};

use tokio::sync::{Semaphore, mpsc, oneshot};
use undolog_store::Effect;
use undolog_types::{EffectId, OrgId};

use crate::{
    Engine, Error,
    core::Write,
    engine::group_commit::Op,
    engine::{Expected, Inner},
};

/// What an update does to the effect it read: the writes to make, or why it cannot.
pub(crate) type Change = Box<dyn Fn(Effect) -> Result<Vec<Write>, Error> + Send + Sync>;

/// One update waiting for its batch.
pub(crate) struct Update {
    pub(crate) org: OrgId,
    pub(crate) effect: EffectId,
    pub(crate) change: Change,
    /// Taken once the answer is sent.
    pub(crate) done: Option<oneshot::Sender<Result<(), Error>>>,
}

impl Update {
    /// The update as an operation of a batch that also carries intercepts, answering `done`.
    pub(crate) fn into_op(mut self, done: Option<oneshot::Sender<Result<(), Error>>>) -> Op {
        self.done = done;
        Op::Update(Box::new(self))
    }
}

/// Batches carried out at the same time; while all are busy, the next batch gathers.
const BATCHES_IN_FLIGHT: usize = 2;
/// The most updates one transaction carries.
const MAX_BATCH: usize = 256;

/// Starts the task that takes whatever has gathered on the queue once the tasks ready to run have
/// run (up to [`MAX_BATCH`], at least one), with at most [`BATCHES_IN_FLIGHT`] batches at once:
/// while they are busy, the next batch gathers. It ends when the engine is dropped.
pub(crate) fn start(engine: Weak<Inner>) -> mpsc::UnboundedSender<Update> {
    let (sender, mut queue) = mpsc::unbounded_channel::<Update>();
    tokio::spawn(async move {
        let permits = Arc::new(Semaphore::new(BATCHES_IN_FLIGHT));
        while let Some(first) = queue.recv().await {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            // Every task ready to run goes first, so updates that became ready together (their
            // upstreams answered) are in this batch. Tokio runs a woken task right after the one
            // that woke it: without this, the first update's hand-off would cut a batch of that
            // update alone, and each such batch pays a COMMIT.
            tokio::task::yield_now().await;
            let batch = crate::engine::group_commit::gathered(first, &mut queue, MAX_BATCH);
            let Some(inner) = engine.upgrade() else {
                break;
            };
            tokio::spawn(async move {
                Engine::from_inner(inner).run_batch(batch).await;
                drop(permit);
            });
        }
    });
    sender
}

impl Engine {
    /// Carries out a batch: per org, in rounds that each touch an effect at most once (a second
    /// update of the same effect must read what the first wrote).
    async fn run_batch(&self, batch: Vec<Update>) {
        // The fault suite stops the process here: outcomes taken, none of them committed.
        crate::crash_points::crash_point("engine::group_commit");
        let mut by_org: HashMap<OrgId, Vec<Update>> = HashMap::new();
        for update in batch {
            by_org.entry(update.org.clone()).or_default().push(update);
        }
        for (org, mut waiting) in by_org {
            while !waiting.is_empty() {
                let mut seen = HashSet::new();
                let (round, later): (Vec<_>, Vec<_>) =
                    waiting.into_iter().partition(|u| seen.insert(u.effect));
                self.run_round(&org, round).await;
                waiting = later;
            }
        }
    }

    async fn run_round(&self, org: &OrgId, mut round: Vec<Update>) {
        self.batched(round.len());
        if round.len() == 1 {
            return self.run_alone(round.remove(0)).await;
        }
        match self.try_round(org, &round).await {
            Ok(answers) => {
                for (update, answer) in round.into_iter().zip(answers) {
                    if let Some(done) = update.done {
                        let _ = done.send(answer);
                    }
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, updates = round.len(), "a batch of effect updates failed; trying each alone");
                if let Some(memory) = &self.inner().remembered {
                    for update in &round {
                        memory.forget_effect(update.effect);
                    }
                }
                for update in round {
                    self.run_alone(update).await;
                }
            }
        }
    }

    /// One update in a transaction of its own.
    async fn run_alone(&self, update: Update) {
        let answer = self
            .update_effect_now(&update.org, update.effect, &update.change)
            .await;
        if let Some(done) = update.done {
            let _ = done.send(answer);
        }
    }

    /// One transaction for the whole round. `Err` when the transaction failed (nothing written);
    /// otherwise each update's own answer, in order. When this engine remembers every effect of
    /// the round (see `remembered`), they are not read: each change is decided on the effect as
    /// remembered and written only if it is still so, and a change refused on a remembered
    /// effect fails the round, so that each is read and decided alone.
    async fn try_round(
        &self,
        org: &OrgId,
        round: &[Update],
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let remembered: Option<Vec<Effect>> = self
            .inner()
            .remembered
            .as_ref()
            .and_then(|memory| round.iter().map(|u| memory.effect(org, u.effect)).collect());
        let mut tx = self.begin(org).await?;
        let read = match &remembered {
            Some(effects) => effects.clone(),
            None => {
                let ids: Vec<EffectId> = round.iter().map(|u| u.effect).collect();
                tx.effects(&ids).await?
            }
        };
        let mut found: HashMap<EffectId, Effect> = read.into_iter().map(|e| (e.id, e)).collect();
        let mut writes = Vec::new();
        let mut answers = Vec::with_capacity(round.len());
        for u in round {
            let answer = found
                .remove(&u.effect)
                .ok_or(Error::UnknownEffect(u.effect))
                .and_then(|effect| (u.change)(effect));
            match answer {
                Ok(made) => {
                    writes.extend(made);
                    answers.push(Ok(()));
                }
                Err(e) if remembered.is_some() => return Err(e),
                Err(e) => answers.push(Err(e)),
            }
        }
        let expected = Expected {
            sessions: &[],
            effects: remembered.as_deref().unwrap_or_default(),
            held: None,
        };
        let events = self.apply_expecting(&mut *tx, &writes, expected).await?;
        tx.commit().await?;
        self.published(events);
        Ok(answers)
    }
}
