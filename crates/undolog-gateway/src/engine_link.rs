//! The engine a gateway asks: its own, on its store, or one in another process over gRPC
//! (`undolog serve --engine grpc://…`). Both answer the same methods with the same errors, so
//! the gateway's code does not know which it talks to. Every method takes its caller: this
//! process's engine acts in the caller's org; the remote one presents the caller's credentials,
//! from which it reads the org.

use serde_json::Value;
use undolog_engine::{Call, Compensator, Engine, EngineConfig, UndoReport};
use undolog_types::{EffectId, LeaseToken, OrgId, SessionId, Timestamp};

use undolog_identity::Acting;

use crate::{
    Error,
    grpc::client::{Presenting, RemoteEngine},
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

mod api;
mod local;
mod remote;

pub(crate) use api::EngineApi;

/// Every method of the one interface, whichever engine answers it.
impl std::ops::Deref for EngineLink {
    type Target = dyn EngineApi;

    fn deref(&self) -> &(dyn EngineApi + 'static) {
        match self {
            Local(engine) => engine,
            Remote(remote) => remote,
        }
    }
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
}
