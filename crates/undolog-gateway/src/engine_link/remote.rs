//! [`EngineApi`] on another process's engine over gRPC: each request with the credentials of
//! whom it acts for, from which that engine reads the org (and who decides, for a verdict).

use std::time::Duration;

use serde_json::Value;
use undolog_engine::{
    Call, Decider, Intercept, ReadOutcome, Reader, Rejection, Resolution, StepOutcome, UndoPlanned,
    UndoProgress,
};
use undolog_identity::Acting;
use undolog_store::{Approval, Effect, Session};
use undolog_types::{ApprovalId, ApprovalState, EffectId, LeaseToken, SessionId, Timestamp};

use super::EngineApi;
use crate::{
    Error,
    grpc::client::{Note, RemoteEngine},
};

#[async_trait::async_trait]
impl EngineApi for RemoteEngine {
    async fn intercept(&self, acting: Acting<'_>, call: Call) -> Result<Intercept, Error> {
        self.intercept(acting.presented, call).await
    }

    async fn reject(
        &self,
        acting: Acting<'_>,
        call: &Call,
        reason: String,
        verdicts: Option<Value>,
    ) -> Result<Option<EffectId>, Error> {
        self.reject(acting.presented, call, reason, verdicts).await
    }

    async fn record_read(
        &self,
        acting: Acting<'_>,
        call: Call,
        effect: EffectId,
        started: Timestamp,
        outcome: ReadOutcome,
        verdicts: Option<Value>,
    ) -> Result<Option<Rejection>, Error> {
        self.record_read(acting.presented, call, effect, started, outcome, verdicts)
            .await
    }

    async fn commit_with(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        result: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        self.commit_with(acting.presented, effect, token, result, verdicts)
            .await
    }

    async fn fail_with(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        error: String,
        details: Option<Value>,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        self.fail_with(acting.presented, effect, token, error, details, verdicts)
            .await
    }

    async fn not_sent(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        reason: String,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        self.note(
            acting.presented,
            Note::NotSent,
            effect,
            token,
            reason.into(),
            verdicts,
        )
        .await
    }

    async fn doubt(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        error: String,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        self.note(
            acting.presented,
            Note::Doubt,
            effect,
            token,
            error.into(),
            verdicts,
        )
        .await
    }

    async fn await_input(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
        request: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        self.note(
            acting.presented,
            Note::AwaitInput,
            effect,
            token,
            request,
            verdicts,
        )
        .await
    }

    async fn renew_lease(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        token: &LeaseToken,
    ) -> Result<Timestamp, Error> {
        self.renew_lease(acting.presented, effect, token).await
    }

    async fn effect(&self, acting: Acting<'_>, id: EffectId) -> Result<Effect, Error> {
        self.effect(acting.presented, id).await
    }

    async fn resolve_in_doubt(
        &self,
        acting: Acting<'_>,
        effect: EffectId,
        resolution: Resolution,
        _by: String,
    ) -> Result<(), Error> {
        self.resolve_in_doubt(acting.presented, effect, resolution)
            .await
    }

    async fn sessions(&self, acting: Acting<'_>, _reader: &Reader) -> Result<Vec<Session>, Error> {
        self.sessions(acting.presented).await
    }

    async fn session_effects(
        &self,
        acting: Acting<'_>,
        session: &SessionId,
        _reader: &Reader,
    ) -> Result<Vec<Effect>, Error> {
        self.session_effects(acting.presented, session).await
    }

    async fn snapshot(
        &self,
        acting: Acting<'_>,
        session: &SessionId,
        _reader: &Reader,
    ) -> Result<Value, Error> {
        self.snapshot(acting.presented, session).await
    }

    async fn effect_read_by(
        &self,
        acting: Acting<'_>,
        id: EffectId,
        _reader: &Reader,
    ) -> Result<Effect, Error> {
        self.effect(acting.presented, id).await
    }

    async fn approvals_read_by(
        &self,
        acting: Acting<'_>,
        state: Option<ApprovalState>,
        _reader: &Reader,
    ) -> Result<Vec<Approval>, Error> {
        self.approvals(acting.presented, state).await
    }

    async fn in_doubt_read_by(
        &self,
        acting: Acting<'_>,
        _reader: &Reader,
    ) -> Result<Vec<Effect>, Error> {
        self.in_doubt(acting.presented).await
    }

    async fn approve(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        by: &Decider,
        reason: Option<String>,
    ) -> Result<Approval, Error> {
        self.decide(acting.presented, id, true, reason, &by.via)
            .await
    }

    async fn deny(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        by: &Decider,
        reason: String,
    ) -> Result<Approval, Error> {
        self.decide(acting.presented, id, false, Some(reason), &by.via)
            .await
    }

    async fn withdraw(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        _by: String,
    ) -> Result<Approval, Error> {
        self.withdraw(acting.presented, id).await
    }

    async fn approval(&self, acting: Acting<'_>, id: ApprovalId) -> Result<Approval, Error> {
        self.approval(acting.presented, id).await
    }

    async fn approvals(
        &self,
        acting: Acting<'_>,
        state: Option<ApprovalState>,
    ) -> Result<Vec<Approval>, Error> {
        self.approvals(acting.presented, state).await
    }

    async fn wait_for_decision(
        &self,
        acting: Acting<'_>,
        id: ApprovalId,
        timeout: Duration,
    ) -> Result<Approval, Error> {
        self.wait_for_decision(acting.presented, id, timeout).await
    }

    async fn implicit_run(
        &self,
        acting: Acting<'_>,
        principal: &str,
        idle: Duration,
    ) -> Result<SessionId, Error> {
        self.implicit_run(acting.presented, acting.org, principal, idle)
            .await
    }

    async fn begin_undo(&self, acting: Acting<'_>, id: &SessionId) -> Result<UndoPlanned, Error> {
        self.begin_undo(acting.presented, id).await
    }

    async fn record_undo_step(
        &self,
        acting: Acting<'_>,
        id: &SessionId,
        claim: &str,
        effect: EffectId,
        outcome: StepOutcome,
    ) -> Result<UndoProgress, Error> {
        self.record_undo_step(acting.presented, id, claim, effect, outcome)
            .await
    }
}
