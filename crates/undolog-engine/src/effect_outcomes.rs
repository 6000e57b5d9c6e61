//! How a call ends, and the other changes to one effect after its intercept: the tool's result
//! (`commit`), its failure, a lease renewal, a wait for the client's input, a call never sent or
//! in doubt, and an operator's verdict on one in doubt. Each reads the effect, asks the core, and
//! writes the answer back in one transaction, shared with others where the store allows it
//! (`update_effect`). Every one but the operator's verdict takes the call's lease token, and the
//! core refuses it from anyone but the call's owner.

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use undolog_store::{Effect, Lease};
use undolog_types::{EffectId, EffectState, LeaseToken, OrgId, SessionState, Timestamp};

use crate::{
    Engine, Error, Resolution,
    core::{self, Write},
    engine::Expected,
    engine::effect_updates::Update,
};

impl Engine {
    /// Records the tool's result for an effect this caller was told to execute.
    pub async fn commit(
        &self,
        org: &OrgId,
        effect: EffectId,
        token: &LeaseToken,
        result: Value,
    ) -> Result<(), Error> {
        self.commit_with(org, effect, token, result, None).await
    }

    /// The same, keeping `verdicts` (what the interceptor chains decided about the call) apart
    /// from the result.
    pub async fn commit_with(
        &self,
        org: &OrgId,
        effect: EffectId,
        token: &LeaseToken,
        result: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        let (now, token) = (self.now(), token.clone());
        self.update_effect(org, effect, move |e| {
            core::commit(e, &token, result.clone(), verdicts.clone(), now)
        })
        .await
    }

    /// Records that the tool failed; identical calls waiting for it get this error.
    pub async fn fail(
        &self,
        org: &OrgId,
        effect: EffectId,
        token: &LeaseToken,
        error: impl Into<String>,
    ) -> Result<(), Error> {
        self.fail_with(org, effect, token, error, None, None).await
    }

    /// The same, keeping `details` (what the tool answered, notes on the call) as the effect's
    /// result and `verdicts` (what the interceptor chains decided) apart, for whoever reads the
    /// log; an identical call later gets the error and the details.
    pub async fn fail_with(
        &self,
        org: &OrgId,
        effect: EffectId,
        token: &LeaseToken,
        error: impl Into<String>,
        details: Option<Value>,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        let (now, error, token) = (self.now(), error.into(), token.clone());
        self.update_effect(org, effect, move |e| {
            core::fail(
                e,
                &token,
                error.clone(),
                details.clone(),
                verdicts.clone(),
                now,
            )
        })
        .await
    }

    /// Extends this executor's lease on a pending effect whose tool is still running.
    pub async fn renew_lease(
        &self,
        org: &OrgId,
        effect: EffectId,
        token: &LeaseToken,
    ) -> Result<Timestamp, Error> {
        let expires_at = self.now().plus(self.config().lease);
        let lease = Lease {
            holder: self.config().executor_id.clone(),
            expires_at,
        };
        let token = token.clone();
        self.update_effect(org, effect, move |e| {
            core::renew_lease(e, &token, lease.clone())
        })
        .await?;
        Ok(expires_at)
    }

    /// The upstream answered the call by asking the client for input (`request`, its
    /// `input_required` result): the effect waits for nothing and is never undone; the
    /// client's answer is a call of its own.
    pub async fn await_input(
        &self,
        org: &OrgId,
        effect: EffectId,
        token: &LeaseToken,
        request: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        let (now, token) = (self.now(), token.clone());
        self.update_effect(org, effect, move |e| {
            core::await_input(e, &token, request.clone(), verdicts.clone(), now)
        })
        .await
    }

    /// The call could not be sent (its upstream was unreachable): the tool never ran, the effect
    /// is `rejected` with `reason`, and an identical call later is decided afresh.
    pub async fn not_sent(
        &self,
        org: &OrgId,
        effect: EffectId,
        token: &LeaseToken,
        reason: impl Into<String>,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        let (now, reason, token) = (self.now(), reason.into(), token.clone());
        self.update_effect(org, effect, move |e| {
            core::not_sent(e, &token, reason.clone(), verdicts.clone(), now)
        })
        .await
    }

    /// This executor sent the call upstream and lost its answer (the connection broke, the
    /// upstream timed out): the tool may or may not have run, so the effect is in doubt now,
    /// with `error` saying why, instead of when its lease runs out.
    pub async fn doubt(
        &self,
        org: &OrgId,
        effect: EffectId,
        token: &LeaseToken,
        error: impl Into<String>,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        let (now, error, token) = (self.now(), error.into(), token.clone());
        self.update_effect(org, effect, move |e| {
            core::doubt(e, &token, error.clone(), verdicts.clone(), now)
        })
        .await
    }

    /// What may or may not have happened, for an operator to record: pending effects whose
    /// executor's lease ran out, and compensations whose answer was lost (each is the failed
    /// step of its session's undo).
    pub async fn in_doubt(&self, org: &OrgId) -> Result<Vec<Effect>, Error> {
        let mut tx = self.begin(org).await?;
        let mut doubtful = tx.expired_leases(self.now()).await?;
        let stopped = (tx.sessions().await?.into_iter())
            .filter(|s| s.state == SessionState::CompensationFailed)
            .filter_map(|s| s.failed_effect);
        for id in stopped.collect::<Vec<_>>() {
            if let Some(effect) = tx.effect(id).await?
                && effect.state == EffectState::CompensationInDoubt
            {
                doubtful.push(effect);
            }
        }
        Ok(doubtful)
    }

    /// Records an operator's verdict on an in-doubt effect; `by` is who decided it.
    pub async fn resolve_in_doubt(
        &self,
        org: &OrgId,
        effect: EffectId,
        resolution: Resolution,
        by: impl Into<String>,
    ) -> Result<(), Error> {
        let (now, by) = (self.now(), by.into());
        self.update_effect(org, effect, move |e| {
            core::resolve_in_doubt(e, resolution.clone(), by.clone(), now)
        })
        .await
    }

    /// Reads one effect, applies `change`, and writes the result, in one transaction — shared
    /// with other operations waiting at the same moment: on a store with one writer, with
    /// everything in its batch (`group_commit`); on one with concurrent writers, with its
    /// session's intercepts when this engine sent the call (`session_batches`), so that a
    /// call's outcome and its neighbours' intents share a COMMIT, else with the other updates
    /// (`effect_updates`).
    async fn update_effect(
        &self,
        org: &OrgId,
        id: EffectId,
        change: impl Fn(Effect) -> Result<Vec<Write>, Error> + Send + Sync + 'static,
    ) -> Result<(), Error> {
        let mut update = Update {
            org: org.clone(),
            effect: id,
            change: Box::new(change),
            done: None,
        };
        if let Some(batches) = &self.inner().batches {
            return crate::engine::group_commit::submit(batches, |done| update.into_op(done)).await;
        }
        if let Some(batches) = &self.inner().session_batches
            && let Some(session) = self
                .inner()
                .remembered
                .as_ref()
                .and_then(|m| m.session_of_effect(org, id))
        {
            let op = |done| update.into_op(done);
            return batches.submit(self, org, &session, op).await;
        }
        let Some(queue) = &self.inner().updates else {
            return self.update_effect_now(org, id, &update.change).await;
        };
        let (done, answer) = oneshot::channel();
        update.done = Some(done);
        if let Err(mpsc::error::SendError(update)) = queue.send(update) {
            return self.update_effect_now(org, id, &update.change).await;
        }
        answer.await.unwrap_or(Err(Error::Stopped))
    }

    /// [`Engine::update_effect`] in a transaction of its own.
    pub(crate) async fn update_effect_now(
        &self,
        org: &OrgId,
        id: EffectId,
        change: &(dyn Fn(Effect) -> Result<Vec<Write>, Error> + Send + Sync),
    ) -> Result<(), Error> {
        if let Some(done) = self.update_remembered(org, id, change).await {
            return done;
        }
        let mut tx = self.begin(org).await?;
        let effect = tx.effect(id).await?.ok_or(Error::UnknownEffect(id))?;
        let writes = change(effect)?;
        self.commit_writes(tx, &writes).await
    }

    /// [`Engine::update_effect_now`] on the effect as this engine remembers it, written only if
    /// it is still so (see `remembered`). `None` when it must be read first: nothing remembered,
    /// the change refused on the remembered row (a refusal is decided on the row as read), or
    /// the stored effect changed (then nothing was written).
    async fn update_remembered(
        &self,
        org: &OrgId,
        id: EffectId,
        change: &(dyn Fn(Effect) -> Result<Vec<Write>, Error> + Send + Sync),
    ) -> Option<Result<(), Error>> {
        let memory = self.inner().remembered.as_ref()?;
        let before = memory.effect(org, id)?;
        let writes = change(before.clone()).ok()?;
        let expected = Expected {
            sessions: &[],
            effects: std::slice::from_ref(&before),
            held: None,
        };
        let done: Result<(), Error> = async {
            let mut tx = self.begin(org).await?;
            let events = self.apply_expecting(&mut *tx, &writes, expected).await?;
            tx.commit().await?;
            self.published(events);
            Ok(())
        }
        .await;
        match done {
            Err(e) if e.is_changed() => {
                memory.forget_effect(id);
                None
            }
            done => Some(done),
        }
    }
}
