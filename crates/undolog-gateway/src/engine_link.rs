//! The engine a gateway asks: its own, on its store, or one in another process over gRPC
//! (`undolog serve --engine grpc://…`). Both answer the same methods with the same errors, so
//! the gateway's code does not know which it talks to. Every method takes its caller: this
//! process's engine acts in the caller's org; the remote one presents the caller's credentials,
//! from which it reads the org.

use std::time::Duration;

use serde_json::Value;
use undolog_engine::{
    Call, Compensator, Decider, Engine, EngineConfig, Intercept, ReadOutcome, Reader, Rejection,
    Resolution, StepOutcome, UndoPlanned, UndoProgress, UndoReport,
};
use undolog_store::{Approval, Effect, Session};
use undolog_types::{ApprovalId, ApprovalState, EffectId, LeaseToken, OrgId, SessionId, Timestamp};

use undolog_identity::Acting;

use crate::{
    Error,
    grpc::client::{Note, Presenting, RemoteEngine},
};

#[derive(Debug, Clone)]
pub(crate) enum EngineLink {
    /// This process's engine.
    Local(Engine),
    /// Another process's, asked with the credentials of the client being served: the org in
    /// each method is the one those credentials name, which the engine reads from them.
    Remote(RemoteEngine),
}

use EngineLink::{Local, Remote};

/// Methods the two answer alike: what the local engine `e` is asked, and what the remote one
/// `r` is, with the method's own arguments.
macro_rules! both {
    ($(fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $out:ty {
        $e:ident => $local:expr,
        $r:ident => $remote:expr $(,)?
    })*) => {$(
        pub(crate) async fn $name(&self $(, $arg: $ty)*) -> Result<$out, Error> {
            match self {
                // Boxed, both: an engine's or a gRPC request's future is large, and inline it
                // would enlarge every caller's (a debug build's call path then outgrows a
                // worker's stack).
                Local($e) => Ok(Box::pin($local).await?),
                Remote($r) => Box::pin($remote).await,
            }
        }
    )*};
}

impl EngineLink {
    /// This process's engine, when it has one.
    pub(crate) fn local(&self) -> Option<&Engine> {
        match self {
            Local(engine) => Some(engine),
            Remote(_) => None,
        }
    }

    /// The engine this gateway asks over gRPC, when it has none of its own.
    pub(crate) fn remote(&self) -> Option<&RemoteEngine> {
        match self {
            Local(_) => None,
            Remote(remote) => Some(remote),
        }
    }

    /// Forgets `run` as a principal's current one: a call found it takes no more calls. This
    /// process's engine forgot it when it refused the call; the remote one's runs are
    /// remembered here too.
    pub(crate) fn run_closed(&self, org: &OrgId, run: &SessionId) {
        if let Remote(remote) = self {
            remote.run_closed(org, run);
        }
    }

    pub(crate) fn config(&self) -> &EngineConfig {
        match self {
            Local(engine) => engine.config(),
            Remote(remote) => remote.config(),
        }
    }

    pub(crate) fn now(&self) -> Timestamp {
        match self {
            Local(engine) => engine.now(),
            Remote(_) => Timestamp::now(),
        }
    }

    /// Refuses a call the engine would refuse to record, before anything runs.
    pub(crate) fn validate(&self, call: &Call) -> Result<(), Error> {
        Ok(undolog_engine::validate(self.config(), call)?)
    }

    /// Records the tool's result for an effect this caller was told to execute; `token` is the
    /// lease token that Execute answer carried.
    pub(crate) async fn commit(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        result: Value,
    ) -> Result<(), Error> {
        self.commit_with(acting, effect, token, result, None).await
    }

    /// Records that the tool failed, and why.
    pub(crate) async fn fail(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        error: impl Into<String>,
    ) -> Result<(), Error> {
        self.fail_with(acting, effect, token, error.into(), None, None)
            .await
    }

    /// Runs `work`, keeping `effect`'s lease while it runs.
    pub(crate) async fn while_running<T>(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        work: impl Future<Output = T>,
    ) -> T {
        match self {
            Local(engine) => Box::pin(engine.while_running(acting.org, effect, token, work)).await,
            Remote(remote) => {
                Box::pin(remote.while_running(acting.presented, effect, token, work)).await
            }
        }
    }

    /// Undoes a session, `compensator` running each step here, whichever engine keeps the saga.
    pub(crate) async fn undo(
        &self,
        acting: Acting<'_>,
        id: &SessionId,
        compensator: &dyn Compensator,
    ) -> Result<UndoReport, Error> {
        let org = acting.org;
        match self {
            Local(engine) => Ok(Box::pin(engine.undo(org, id, compensator)).await?),
            Remote(remote) => {
                let presented = acting.presented;
                let remote = Presenting { remote, presented };
                Box::pin(undolog_engine::run_undo(&remote, org, id, compensator)).await
            }
        }
    }

    both! {
        fn intercept(&self, acting: Acting<'_>, call: Call) -> Intercept {
            e => e.intercept(call),
            r => r.intercept(acting.presented, call)
        }
        fn reject(&self, acting: Acting<'_>, call: &Call, reason: String, verdicts: Option<Value>) -> Option<EffectId> {
            e => e.reject(call, reason, verdicts),
            r => r.reject(acting.presented, call, reason, verdicts)
        }
        fn record_read(
            &self, acting: Acting<'_>, call: Call, effect: EffectId, started: Timestamp, outcome: ReadOutcome,
            verdicts: Option<Value>
        ) -> Option<Rejection> {
            e => e.record_read(call, effect, started, outcome, verdicts),
            r => r.record_read(acting.presented, call, effect, started, outcome, verdicts)
        }
        fn commit_with(
            &self, acting: Acting<'_>, effect: EffectId, token: &LeaseToken, result: Value,
            verdicts: Option<Value>
        ) -> () {
            e => e.commit_with(acting.org, effect, token, result, verdicts),
            r => r.commit_with(acting.presented, effect, token, result, verdicts)
        }
        fn fail_with(
            &self, acting: Acting<'_>, effect: EffectId, token: &LeaseToken, error: String,
            details: Option<Value>, verdicts: Option<Value>
        ) -> () {
            e => e.fail_with(acting.org, effect, token, error, details, verdicts),
            r => r.fail_with(acting.presented, effect, token, error, details, verdicts)
        }
        fn not_sent(
            &self, acting: Acting<'_>, effect: EffectId, token: &LeaseToken, reason: String,
            verdicts: Option<Value>
        ) -> () {
            e => e.not_sent(acting.org, effect, token, reason, verdicts),
            r => r.note(acting.presented, Note::NotSent, effect, token, reason.into(), verdicts)
        }
        fn doubt(
            &self, acting: Acting<'_>, effect: EffectId, token: &LeaseToken, error: String,
            verdicts: Option<Value>
        ) -> () {
            e => e.doubt(acting.org, effect, token, error, verdicts),
            r => r.note(acting.presented, Note::Doubt, effect, token, error.into(), verdicts)
        }
        fn await_input(
            &self, acting: Acting<'_>, effect: EffectId, token: &LeaseToken, request: Value,
            verdicts: Option<Value>
        ) -> () {
            e => e.await_input(acting.org, effect, token, request, verdicts),
            r => r.note(acting.presented, Note::AwaitInput, effect, token, request, verdicts)
        }
        fn renew_lease(&self, acting: Acting<'_>, effect: EffectId, token: &LeaseToken) -> Timestamp {
            e => e.renew_lease(acting.org, effect, token),
            r => r.renew_lease(acting.presented, effect, token)
        }
        fn effect(&self, acting: Acting<'_>, id: EffectId) -> Effect {
            e => e.effect(acting.org, id),
            r => r.effect(acting.presented, id)
        }
        fn resolve_in_doubt(&self, acting: Acting<'_>, effect: EffectId, resolution: Resolution, by: String)
            -> () {
            e => e.resolve_in_doubt(acting.org, effect, resolution, by),
            r => r.resolve_in_doubt(acting.presented, effect, resolution)
        }
        // What a client reads: `reader` here; the remote engine reads the client's
        // credentials, as it does their org.
        fn sessions(&self, acting: Acting<'_>, reader: &Reader) -> Vec<Session> {
            e => e.sessions_read_by(acting.org, reader),
            r => r.sessions(acting.presented, )
        }
        fn session_effects(&self, acting: Acting<'_>, session: &SessionId, reader: &Reader)
            -> Vec<Effect> {
            e => e.session_effects_read_by(acting.org, session, reader),
            r => r.session_effects(acting.presented, session)
        }
        fn snapshot(&self, acting: Acting<'_>, session: &SessionId, reader: &Reader) -> Value {
            e => async move { e.snapshot_read_by(acting.org, session, reader).await.map(|s| s.body) },
            r => r.snapshot(acting.presented, session)
        }
        fn effect_read_by(&self, acting: Acting<'_>, id: EffectId, reader: &Reader) -> Effect {
            e => e.effect_read_by(acting.org, id, reader),
            r => r.effect(acting.presented, id)
        }
        fn approvals_read_by(
            &self, acting: Acting<'_>, state: Option<ApprovalState>, reader: &Reader
        ) -> Vec<Approval> {
            e => e.approvals_read_by(acting.org, state, reader),
            r => r.approvals(acting.presented, state)
        }
        fn in_doubt_read_by(&self, acting: Acting<'_>, reader: &Reader) -> Vec<Effect> {
            e => e.in_doubt_read_by(acting.org, reader),
            r => r.in_doubt(acting.presented, )
        }
        fn approve(&self, acting: Acting<'_>, id: ApprovalId, by: &Decider, reason: Option<String>)
            -> Approval {
            e => e.approve(acting.org, id, by, reason),
            r => r.decide(acting.presented, id, true, reason, &by.via)
        }
        fn deny(&self, acting: Acting<'_>, id: ApprovalId, by: &Decider, reason: String) -> Approval {
            e => e.deny(acting.org, id, by, reason),
            r => r.decide(acting.presented, id, false, Some(reason), &by.via)
        }
        fn withdraw(&self, acting: Acting<'_>, id: ApprovalId, by: String) -> Approval {
            e => e.withdraw(acting.org, id, by),
            r => r.withdraw(acting.presented, id)
        }
        fn approval(&self, acting: Acting<'_>, id: ApprovalId) -> Approval {
            e => e.approval(acting.org, id),
            r => r.approval(acting.presented, id)
        }
        fn approvals(&self, acting: Acting<'_>, state: Option<ApprovalState>) -> Vec<Approval> {
            e => e.approvals(acting.org, state),
            r => r.approvals(acting.presented, state)
        }
        fn wait_for_decision(&self, acting: Acting<'_>, id: ApprovalId, timeout: Duration) -> Approval {
            e => e.wait_for_decision(acting.org, id, timeout),
            r => r.wait_for_decision(acting.presented, id, timeout)
        }
        fn implicit_run(&self, acting: Acting<'_>, principal: &str, idle: Duration) -> SessionId {
            e => e.implicit_run(acting.org, principal, idle),
            r => r.implicit_run(acting.presented, acting.org, principal, idle)
        }
        fn begin_undo(&self, acting: Acting<'_>, id: &SessionId) -> UndoPlanned {
            e => e.begin_undo(acting.org, id),
            r => r.begin_undo(acting.presented, id)
        }
        fn record_undo_step(
            &self, acting: Acting<'_>, id: &SessionId, claim: &str, effect: EffectId, outcome: StepOutcome
        ) -> UndoProgress {
            e => e.record_undo_step(acting.org, id, claim, effect, outcome),
            r => r.record_undo_step(acting.presented, id, claim, effect, outcome)
        }
    }
}
