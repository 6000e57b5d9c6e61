//! The engine in another process, for a gateway that owns no store (`undolog serve --engine
//! grpc://…`): each method asks `undolog.engine.v1.EffectEngine`, presenting the credentials of
//! the client being served, so the engine checks every request as if that client had sent it.
//!
//! The credentials travel with the request's future ([`presenting`]), as its trace context
//! does, so the gateway's code calls the engine the same way in both modes.

use std::{future::Future, time::Duration};

use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tonic::{
    Request, Status,
    metadata::{AsciiMetadataValue, MetadataKey, MetadataMap},
    transport::{Channel, Endpoint},
};
use undolog_engine::{
    Call, EngineConfig, Intercept, ReadOutcome, Rejection, Resolution, RunCache, StepOutcome,
    UndoPlanned, UndoProgress, UndoRun, UndoStep, UndoSteps,
};
use undolog_store::{Approval, Effect, Session};
use undolog_types::{
    ApprovalId, ApprovalState, EffectId, LeaseToken, OrgId, Role, SessionId, SessionState, Tier,
    Timestamp,
};

pub(crate) use undo_steps::Presenting;
pub(crate) use undolog_identity::Presented;

mod approvals;
mod reads;
mod undo_steps;
use super::{
    call_stream::CallStream,
    calls::with,
    proto::{
        self, answer::Reply, effect_engine_client::EffectEngineClient, operation::Request as Asked,
    },
    refusal::refused,
};
use crate::{Credential, Error, Principal};

/// A connection to the engine. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct RemoteEngine {
    url: String,
    /// This gateway's side of the engine's settings (leases, waits, limits).
    config: std::sync::Arc<EngineConfig>,
    /// The principals' runs the engine named last: asked on every call, the engine would cost
    /// each call a round trip more.
    runs: std::sync::Arc<RunCache>,
    /// The engine's client, and Intercept, Commit, Fail and RecordRead on one stream.
    calls: std::sync::Arc<CallStream>,
}

impl RemoteEngine {
    /// Dials lazily: an engine that is down now is tried again at each request.
    pub(crate) fn connect(url: &str, config: EngineConfig) -> Result<RemoteEngine, Error> {
        let endpoint = Endpoint::from_shared(url.to_owned())
            .map_err(|e| Error::Startup(format!("engine: {url:?} is not an address: {e}")))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(2))
            // Longer than the longest wait the engine holds a request for (WaitForDecision).
            .timeout(Duration::from_secs(90))
            .http2_keep_alive_interval(Duration::from_secs(20));
        let client = EffectEngineClient::new(endpoint.connect_lazy());
        Ok(RemoteEngine {
            url: url.to_owned(),
            calls: std::sync::Arc::new(CallStream::new(client)),
            config: std::sync::Arc::new(config),
            runs: Default::default(),
        })
    }

    fn client(&self) -> EffectEngineClient<Channel> {
        self.calls.client().clone()
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// `message`, with the credentials of the client being served and the trace it is part of.
    fn request<T>(presented: &Presented, message: T) -> Request<T> {
        with(Self::metadata(presented), message)
    }

    /// The credentials of the client being served and the trace it is part of.
    fn metadata(presented: &Presented) -> MetadataMap {
        let mut metadata = MetadataMap::new();
        if let Some(value) = presented.header() {
            metadata.insert("authorization", value.clone());
        }
        for (key, value) in crate::traces::propagated() {
            let key = MetadataKey::from_bytes(key.as_bytes());
            if let (Ok(key), Ok(value)) = (key, AsciiMetadataValue::try_from(value)) {
                metadata.insert(key, value);
            }
        }
        metadata
    }

    /// One of the operations every call makes, on the stream they share.
    async fn ask(&self, presented: &Presented, request: Asked) -> Result<Reply, Error> {
        let reply = self.calls.ask(request, Self::metadata(presented)).await;
        reply.map_err(|s| self.refused(&s))
    }

    fn unexpected(&self, asked: &str) -> Error {
        self.garbled(format!("an answer to {asked} that is not one"))
    }

    fn refused(&self, status: &Status) -> Error {
        refused(&self.url, status)
    }

    /// Whether the engine can take calls, and why not (for `/healthz`).
    pub(crate) async fn health(&self) -> Result<proto::HealthReply, Error> {
        let mut client = self.client();
        let reply = client.health(proto::HealthRequest {}).await;
        Ok(reply.map_err(|s| self.refused(&s))?.into_inner())
    }

    /// Who `authorization` belongs to, as the engine sees it.
    pub(crate) async fn authenticate(&self, presented: Presented) -> Result<Principal, Error> {
        let mut request = Request::new(proto::AuthenticateRequest {});
        if let Some(value) = presented.header() {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        let mut client = self.client();
        let reply = client.authenticate(request).await;
        let reply = reply.map_err(|s| self.refused(&s))?.into_inner();
        let org = self.parsed("org", &reply.org)?;
        let role: Role = self.parsed("role", &reply.role)?;
        let credential = match (reply.credential.as_str(), reply.credential_id) {
            ("local", _) => Credential::Local,
            ("api_key", Some(id)) => Credential::ApiKey { id },
            ("token", Some(subject)) => Credential::Token { subject },
            (other, _) => return Err(self.garbled(format!("credential {other:?}"))),
        };
        Ok(Principal {
            org,
            role,
            credential,
            presented,
        })
    }

    fn garbled(&self, what: String) -> Error {
        Error::EngineUnreachable {
            url: self.url.clone(),
            reason: format!("it answered what this gateway cannot read: {what}"),
        }
    }

    fn parsed<T: std::str::FromStr>(&self, what: &str, text: &str) -> Result<T, Error> {
        text.parse()
            .map_err(|_| self.garbled(format!("{what} {text:?}")))
    }

    fn json<T: DeserializeOwned>(&self, what: &str, text: &str) -> Result<T, Error> {
        serde_json::from_str(text).map_err(|e| self.garbled(format!("{what}: {e}")))
    }

    pub(crate) async fn intercept(
        &self,
        presented: &Presented,
        call: Call,
    ) -> Result<Intercept, Error> {
        use proto::intercept_reply::Decision;
        let Reply::Intercept(reply) = self
            .ask(presented, Asked::Intercept(call_request(&call)))
            .await?
        else {
            return Err(self.unexpected("Intercept"));
        };
        let decision = reply.decision;
        let id = |text: &str| self.parsed::<EffectId>("effect_id", text);
        Ok(match decision {
            Some(Decision::Execute(execute)) => Intercept::Execute {
                effect_id: id(&execute.effect_id)?,
                lease_expires_at: Timestamp(execute.lease_expires_at_ms),
                lease_token: self.parsed("lease_token", &execute.lease_token)?,
            },
            Some(Decision::Replay(replay)) => Intercept::Replay {
                effect_id: id(&replay.effect_id)?,
                result: self.json("result_json", &replay.result_json)?,
            },
            Some(Decision::Failed(failed)) => Intercept::Failed {
                effect_id: id(&failed.effect_id)?,
                error: failed.error,
                result: (failed.result_json.as_deref())
                    .map(|text| self.json("result_json", text))
                    .transpose()?,
            },
            Some(Decision::AwaitingApproval(held)) => Intercept::AwaitingApproval {
                effect_id: id(&held.effect_id)?,
                approval_id: self.parsed("approval_id", &held.approval_id)?,
                expires_at: Timestamp(held.expires_at_ms),
            },
            Some(Decision::Rejected(rejected)) => Intercept::Rejected {
                effect_id: rejected.effect_id.as_deref().map(id).transpose()?,
                reason: self.json::<Rejection>("rejection_json", &rejected.rejection_json)?,
            },
            None => return Err(self.garbled("an intercept with no decision".into())),
        })
    }

    pub(crate) async fn reject(
        &self,
        presented: &Presented,
        call: &Call,
        reason: String,
        verdicts: Option<Value>,
    ) -> Result<Option<EffectId>, Error> {
        let request = proto::RejectRequest {
            call: Some(call_request(call)),
            reason,
            verdicts_json: verdicts.map(|v| v.to_string()),
        };
        let mut client = self.client();
        let reply = client.reject(Self::request(presented, request)).await;
        let reply = reply.map_err(|s| self.refused(&s))?.into_inner();
        (reply.effect_id.as_deref())
            .map(|id| self.parsed("effect_id", id))
            .transpose()
    }

    pub(crate) async fn record_read(
        &self,
        presented: &Presented,
        call: Call,
        effect: EffectId,
        started: Timestamp,
        outcome: ReadOutcome,
        verdicts: Option<Value>,
    ) -> Result<Option<Rejection>, Error> {
        use proto::record_read_request::Outcome;
        let outcome = match outcome {
            ReadOutcome::Answered(result) => Outcome::ResultJson(result.to_string()),
            ReadOutcome::Failed { error, details } => Outcome::Failed(proto::ReadFailure {
                error,
                details_json: details.map(|d| d.to_string()),
            }),
            ReadOutcome::InputRequired(request) => Outcome::InputRequiredJson(request.to_string()),
            ReadOutcome::NotSent(why) => Outcome::NotSent(why),
        };
        let request = proto::RecordReadRequest {
            call: Some(call_request(&call)),
            effect_id: effect.to_string(),
            started_at_ms: started.as_millis(),
            outcome: Some(outcome),
            verdicts_json: verdicts.map(|v| v.to_string()),
        };
        let Reply::RecordRead(reply) = self.ask(presented, Asked::RecordRead(request)).await?
        else {
            return Err(self.unexpected("RecordRead"));
        };
        (reply.rejection_json.as_deref())
            .map(|text| self.json("rejection_json", text))
            .transpose()
    }

    pub(crate) async fn commit_with(
        &self,
        presented: &Presented,
        effect: EffectId,
        token: &LeaseToken,
        result: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        let request = proto::CommitRequest {
            effect_id: effect.to_string(),
            result_json: result.to_string(),
            verdicts_json: verdicts.map(|v| v.to_string()),
            without_effect: true,
            lease_token: token.as_str().to_owned(),
        };
        match self.ask(presented, Asked::Commit(request)).await? {
            Reply::Effect(_) => Ok(()),
            _ => Err(self.unexpected("Commit")),
        }
    }

    pub(crate) async fn fail_with(
        &self,
        presented: &Presented,
        effect: EffectId,
        token: &LeaseToken,
        error: String,
        details: Option<Value>,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        let request = proto::FailRequest {
            effect_id: effect.to_string(),
            error,
            details_json: details.map(|v| v.to_string()),
            verdicts_json: verdicts.map(|v| v.to_string()),
            without_effect: true,
            lease_token: token.as_str().to_owned(),
        };
        match self.ask(presented, Asked::Fail(request)).await? {
            Reply::Effect(_) => Ok(()),
            _ => Err(self.unexpected("Fail")),
        }
    }

    /// NotSent, Doubt or AwaitInput: a note on a pending effect.
    pub(crate) async fn note(
        &self,
        presented: &Presented,
        kind: Note,
        effect: EffectId,
        token: &LeaseToken,
        note: Value,
        verdicts: Option<Value>,
    ) -> Result<(), Error> {
        let request = Self::request(
            presented,
            proto::NoteRequest {
                effect_id: effect.to_string(),
                note_json: note.to_string(),
                verdicts_json: verdicts.map(|v| v.to_string()),
                lease_token: token.as_str().to_owned(),
            },
        );
        let mut client = self.client();
        let reply = match kind {
            Note::NotSent => client.not_sent(request).await,
            Note::Doubt => client.doubt(request).await,
            Note::AwaitInput => client.await_input(request).await,
        };
        reply.map_err(|s| self.refused(&s))?;
        Ok(())
    }

    pub(crate) async fn renew_lease(
        &self,
        presented: &Presented,
        effect: EffectId,
        token: &LeaseToken,
    ) -> Result<Timestamp, Error> {
        let mut client = self.client();
        let request = proto::RenewLeaseRequest {
            effect_id: effect.to_string(),
            lease_token: token.as_str().to_owned(),
        };
        let reply = client.renew_lease(Self::request(presented, request)).await;
        let reply = reply.map_err(|s| self.refused(&s))?.into_inner();
        Ok(Timestamp(reply.lease_expires_at_ms))
    }

    /// Runs `work`, renewing `effect`'s lease as the engine does its own.
    pub(crate) async fn while_running<T>(
        &self,
        presented: &Presented,
        effect: EffectId,
        token: &LeaseToken,
        work: impl Future<Output = T>,
    ) -> T {
        let lease = self.config.lease;
        let renew = || self.renew_lease(presented, effect, token);
        undolog_engine::renewing(lease, effect, work, renew).await
    }

    /// The principal's current run: the one the engine named within the last moment (see
    /// [`RunCache`]), or the engine's answer now.
    pub(crate) async fn implicit_run(
        &self,
        presented: &Presented,
        org: &OrgId,
        principal: &str,
        idle: Duration,
    ) -> Result<SessionId, Error> {
        let ask = |_| self.ask_implicit_run(presented, idle);
        (self
            .runs
            .current((org, principal), idle, Timestamp::now, ask))
        .await
    }

    /// Forgets `run` as a principal's current one: a call found it takes no more calls.
    pub(crate) fn run_closed(&self, org: &OrgId, run: &SessionId) {
        self.runs.closed(org, run);
    }

    async fn ask_implicit_run(
        &self,
        presented: &Presented,
        idle: Duration,
    ) -> Result<SessionId, Error> {
        let mut client = self.client();
        let request = proto::ImplicitRunRequest {
            idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX),
        };
        let reply = client.implicit_run(Self::request(presented, request)).await;
        let reply = reply.map_err(|s| self.refused(&s))?.into_inner();
        self.parsed("session_id", &reply.session_id)
    }

    pub(crate) async fn begin_undo(
        &self,
        presented: &Presented,
        session: &SessionId,
    ) -> Result<UndoPlanned, Error> {
        let mut client = self.client();
        let request = proto::SessionRequest {
            session_id: session.to_string(),
        };
        let reply = client.begin_undo(Self::request(presented, request)).await;
        let reply = reply.map_err(|s| self.refused(&s))?.into_inner();
        self.json("record_json", &reply.record_json)
    }

    pub(crate) async fn record_undo_step(
        &self,
        presented: &Presented,
        session: &SessionId,
        claim: &str,
        effect: EffectId,
        outcome: StepOutcome,
    ) -> Result<UndoProgress, Error> {
        let step = match outcome {
            StepOutcome::Compensated {
                detail: undolog_engine::Compensated::Done { result },
            } => json!({"outcome": "compensated", "claim": claim, "result": result}),
            StepOutcome::Compensated {
                detail: undolog_engine::Compensated::AlreadyUndone,
            } => json!({"outcome": "already_undone", "claim": claim}),
            StepOutcome::Failed { error } => {
                json!({"outcome": "failed", "claim": claim, "error": error})
            }
            StepOutcome::InDoubt { error } => {
                json!({"outcome": "in_doubt", "claim": claim, "error": error})
            }
        };
        let mut client = self.client();
        let request = proto::UndoStepRequest {
            session_id: session.to_string(),
            effect_id: effect.to_string(),
            step_json: step.to_string(),
        };
        let reply = client
            .record_undo_step(Self::request(presented, request))
            .await;
        let reply = reply.map_err(|s| self.refused(&s))?.into_inner();
        self.json("record_json", &reply.record_json)
    }

    /// The events of the org of the credentials being served, each with its type, as the
    /// engine streams them; the stream ends when the engine's does (an SSE client reconnects).
    pub(crate) fn org_events(
        &self,
        presented: &Presented,
    ) -> impl Stream<Item = (String, Value)> + Send + 'static {
        let this = self.clone();
        let request = Self::request(presented, proto::EventsRequest {});
        let opened = async move {
            let mut client = this.client();
            match client.events(request).await {
                Ok(events) => events.into_inner().boxed(),
                Err(status) => {
                    tracing::warn!(error = %this.refused(&status), "the engine's events");
                    futures::stream::empty().boxed()
                }
            }
        };
        futures::stream::once(opened)
            .flatten()
            .filter_map(|event| async move {
                let event = event.ok()?;
                Some((event.r#type, serde_json::from_str(&event.event_json).ok()?))
            })
    }
}

/// The notes a pending effect takes besides its outcome.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Note {
    NotSent,
    Doubt,
    AwaitInput,
}

/// A gateway's call as the engine takes it.
fn call_request(call: &Call) -> proto::InterceptRequest {
    let tier = match call.policy.tier {
        Tier::ReadOnly => proto::Tier::ReadOnly,
        Tier::Compensable => proto::Tier::Compensable,
        Tier::Irreversible => proto::Tier::Irreversible,
    };
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    proto::InterceptRequest {
        session_id: call.session.to_string(),
        tool: call.tool.clone(),
        arguments_json: serde_json::to_string(call.args.as_map()).unwrap_or_default(),
        tier: tier.into(),
        compensation_json: (call.policy.compensation.as_ref())
            .map(|c| serde_json::to_string(c).unwrap_or_default()),
        idempotent: call.policy.idempotent,
        requires_approval: call.policy.requires_approval,
        step: call.step,
        idempotency_key: call.idempotency_key.clone(),
        lease_ms: call.lease.map(millis),
        wait_ms: call.wait.map(millis),
    }
}
