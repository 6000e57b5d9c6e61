//! The one interface of the engine a gateway asks ([`EngineApi`]), which this process's engine
//! (`local`) and another process's over gRPC (`remote`) both implement. Every method takes
//! whom it acts for: the engine here acts in its org, the remote one presents its credentials.

use std::time::Duration;

use serde_json::Value;
use undolog_engine::{
    Call, Decider, Intercept, ReadOutcome, Reader, Rejection, Resolution, StepOutcome, UndoPlanned,
    UndoProgress,
};
use undolog_identity::Acting;
use undolog_store::{Approval, Effect, Session};
use undolog_types::{ApprovalId, ApprovalState, EffectId, LeaseToken, SessionId, Timestamp};

use crate::Error;

/// What the gateway asks of an engine, wherever it runs; both answer with the same errors. A
/// remote engine reads who reads and who decides from the credentials it is presented, as it
/// reads the org: it leaves the `Reader` and the decider's name it is given unused.
#[async_trait::async_trait]
pub(crate) trait EngineApi: Send + Sync + std::fmt::Debug {
    async fn intercept(&self, acting: Acting<'_>, call: Call) -> Result<Intercept, Error>;

    async fn reject(
        &self,
        acting: Acting<'_>,
        call: &Call,
        reason: String,
        verdicts: Option<Value>,
    ) -> Result<Option<EffectId>, Error>;

    async fn record_read(
        &self,
        acting: Acting<'_>,
        call: Call,
        effect: EffectId,
        started: Timestamp,
        outcome: ReadOutcome,
        verdicts: Option<Value>,
    ) -> Result<Option<Rejection>, Error>;

    async fn commit_with(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        result: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error>;

    async fn fail_with(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        error: String,
        details: Option<Value>,
        verdicts: Option<Value>,
    ) -> Result<(), Error>;

    async fn not_sent(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        reason: String,
        verdicts: Option<Value>,
    ) -> Result<(), Error>;

    async fn doubt(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        error: String,
        verdicts: Option<Value>,
    ) -> Result<(), Error>;

    async fn await_input(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        request: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error>;

    async fn renew_lease(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
    ) -> Result<Timestamp, Error>;

    async fn effect(&self, acting: Acting<'_>, id: EffectId) -> Result<Effect, Error>;

    async fn resolve_in_doubt(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        resolution: Resolution,
        by: String,
    ) -> Result<(), Error>;

    // What a client reads: `reader` here; the remote engine reads the client's
    // credentials, as it does their org.
    async fn sessions(&self, acting: Acting<'_>, reader: &Reader) -> Result<Vec<Session>, Error>;

    async fn session_effects(
        &self,
        acting: Acting<'_>,
        session: &SessionId,
        reader: &Reader,
    ) -> Result<Vec<Effect>, Error>;

    async fn snapshot(
        &self,
        acting: Acting<'_>,
        session: &SessionId,
        reader: &Reader,
    ) -> Result<Value, Error>;

    async fn effect_read_by(
        &self,
        acting: Acting<'_>,
        id: EffectId,
        reader: &Reader,
    ) -> Result<Effect, Error>;

    async fn approvals_read_by(
        &self,
        acting: Acting<'_>,
        state: Option<ApprovalState>,
        reader: &Reader,
    ) -> Result<Vec<Approval>, Error>;

    async fn in_doubt_read_by(
        &self,
        acting: Acting<'_>,
        reader: &Reader,
    ) -> Result<Vec<Effect>, Error>;

    async fn approve(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        by: &Decider,
        reason: Option<String>,
    ) -> Result<Approval, Error>;

    async fn deny(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        by: &Decider,
        reason: String,
    ) -> Result<Approval, Error>;

    async fn withdraw(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        by: String,
    ) -> Result<Approval, Error>;

    async fn approval(&self, acting: Acting<'_>, id: ApprovalId) -> Result<Approval, Error>;

    async fn approvals(
        &self,
        acting: Acting<'_>,
        state: Option<ApprovalState>,
    ) -> Result<Vec<Approval>, Error>;

    async fn wait_for_decision(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        timeout: Duration,
    ) -> Result<Approval, Error>;

    async fn implicit_run(
        &self,
        acting: Acting<'_>,
        principal: &str,
        idle: Duration,
    ) -> Result<SessionId, Error>;

    async fn begin_undo(&self, acting: Acting<'_>, id: &SessionId) -> Result<UndoPlanned, Error>;

    async fn record_undo_step(
        &self,
        acting: Acting<'_>,
        id: &SessionId,
        claim: &str,
        effect: EffectId,
        outcome: StepOutcome,
    ) -> Result<UndoProgress, Error>;
}
