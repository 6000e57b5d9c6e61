//! `EffectEngine` over a gateway's engine. Every request is authenticated from its metadata by
//! [`Gateway::authenticate`], the HTTP API's own check, and each method asks for the role its
//! HTTP route asks for, through the same helpers (`sdk::intercept_effect`, `admin::decider`).

use std::{pin::Pin, sync::Arc, time::Duration};

use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use undolog_engine::{
    Call, Compensated, CompensationFailure, Compensator, ReadOutcome, Resolution, UndoStep,
    UndoSteps as _,
};
use undolog_store::Effect as EffectRecord;
use undolog_types::{ApprovalId, ApprovalState, EffectId, Role, Timestamp};

use super::{
    calls,
    convert::{
        LONGEST_WAIT, approval, approval_reply, decision, effect, id, intercept_body, json_text,
        named, optional_json, record_reply,
    },
    proto,
    status::status,
};
use crate::{
    Credential, Error, Gateway, Principal,
    compensate::UpstreamCompensator,
    http::{admin, events, links, sdk, undo_steps::StepBody},
};

/// The service, over the gateway that holds the engine, its store and its credentials.
mod reporting;
mod requests;

use reporting::Reporting;

#[derive(Debug, Clone)]
pub(crate) struct EngineService {
    pub(crate) gateway: Arc<Gateway>,
    /// Cancelled when the server shuts down: the streams it serves end, so it can.
    pub(crate) stopping: tokio_util::sync::CancellationToken,
}

type Reply<T> = Result<Response<T>, Status>;

/// A NotSent, Doubt or AwaitInput request, read.
struct Noted {
    principal: Principal,
    effect_id: EffectId,
    token: undolog_types::LeaseToken,
    note: Value,
    verdicts: Option<Value>,
}
pub(super) type Streamed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

impl EngineService {
    /// Who sent `request`: its `authorization` metadata, read as the HTTP API reads the header.
    async fn principal<T>(&self, request: &Request<T>) -> Result<Principal, Status> {
        let headers = request.metadata().clone().into_headers();
        self.gateway.authenticate(&headers).await.map_err(status)
    }
}

#[tonic::async_trait]
impl proto::effect_engine_server::EffectEngine for EngineService {
    async fn intercept(
        &self,
        request: Request<proto::InterceptRequest>,
    ) -> Reply<proto::InterceptReply> {
        let principal = self.principal(&request).await?;
        let body = intercept_body(request.into_inner()).map_err(status)?;
        let decided = sdk::intercept_effect(&self.gateway, &principal, body);
        let decided = self.gateway.traces.store("intercept", decided);
        Ok(Response::new(decision(decided.await.map_err(status)?)))
    }

    async fn commit(&self, request: Request<proto::CommitRequest>) -> Reply<proto::EffectReply> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let effect_id: EffectId = id("effect", &request.effect_id).map_err(status)?;
        let token = sdk::presented_token(Some(&request.lease_token)).map_err(status)?;
        let result = json_text("result_json", &request.result_json).map_err(status)?;
        let verdicts = optional_json("verdicts_json", request.verdicts_json)?;
        let engine = &self.gateway.engine;
        let committed = engine.commit_with(principal.acting(), effect_id, &token, result, verdicts);
        let committed = self.gateway.traces.store("record_outcome", committed);
        committed.await.map_err(status)?;
        self.outcome_reply(&principal, effect_id, request.without_effect)
            .await
    }

    async fn fail(&self, request: Request<proto::FailRequest>) -> Reply<proto::EffectReply> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let effect_id: EffectId = id("effect", &request.effect_id).map_err(status)?;
        let token = sdk::presented_token(Some(&request.lease_token)).map_err(status)?;
        let details = optional_json("details_json", request.details_json)?;
        let verdicts = optional_json("verdicts_json", request.verdicts_json)?;
        let engine = &self.gateway.engine;
        let (acting, error) = (principal.acting(), request.error);
        let failed = engine.fail_with(acting, effect_id, &token, error, details, verdicts);
        let failed = self.gateway.traces.store("record_outcome", failed);
        failed.await.map_err(status)?;
        self.outcome_reply(&principal, effect_id, request.without_effect)
            .await
    }

    async fn approve(&self, request: Request<proto::DecideRequest>) -> Reply<proto::ApprovalReply> {
        self.decide(request, admin::Verdict::Approve).await
    }

    async fn deny(&self, request: Request<proto::DecideRequest>) -> Reply<proto::ApprovalReply> {
        self.decide(request, admin::Verdict::Deny).await
    }

    async fn list_approvals(
        &self,
        request: Request<proto::ListApprovalsRequest>,
    ) -> Reply<proto::ApprovalList> {
        let principal = self.principal(&request).await?;
        let state = match request.into_inner().state {
            None => ApprovalState::Pending,
            Some(text) => admin::approval_state(&text).map_err(status)?,
        };
        let (engine, reader) = (&self.gateway.engine, principal.reader());
        let approvals = engine.approvals_read_by(principal.acting(), Some(state), &reader);
        let approvals = approvals.await.map_err(status)?;
        Ok(Response::new(proto::ApprovalList {
            approvals: approvals.iter().map(approval).collect(),
        }))
    }

    type CallsStream = Streamed<proto::Answers>;

    async fn calls(
        &self,
        request: Request<tonic::Streaming<proto::Operations>>,
    ) -> Reply<Self::CallsStream> {
        Ok(Response::new(calls::answer_calls(
            self.clone(),
            request.into_inner(),
        )))
    }

    type UndoStream = Streamed<proto::UndoUpdate>;

    async fn undo(&self, request: Request<proto::UndoRequest>) -> Reply<Self::UndoStream> {
        let principal = self.principal(&request).await?;
        admin::may_undo(&principal).map_err(status)?;
        let session = admin::session_id(&request.into_inner().session_id).map_err(status)?;
        let (updates, heard) = tokio::sync::mpsc::channel(16);
        let gateway = self.gateway.clone();
        tokio::spawn(async move {
            let compensator = Reporting {
                inner: UpstreamCompensator { gateway: &gateway },
                updates: updates.clone(),
            };
            let report = admin::undo_session(&gateway, &principal, &session, &compensator).await;
            let last = report.map_err(status).map(|report| {
                let json = serde_json::to_value(&report).unwrap_or(Value::Null);
                proto::UndoUpdate {
                    update: Some(proto::undo_update::Update::Done(proto::UndoReport {
                        session_id: report.session.to_string(),
                        state: named(&json, "state"),
                        report_json: json.to_string(),
                    })),
                }
            });
            let _ = updates.send(last).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(heard))))
    }

    async fn list_in_doubt(
        &self,
        request: Request<proto::ListInDoubtRequest>,
    ) -> Reply<proto::EffectList> {
        let principal = self.principal(&request).await?;
        let (engine, reader) = (&self.gateway.engine, principal.reader());
        let effects = engine.in_doubt_read_by(principal.acting(), &reader).await;
        let effects = effects.map_err(status)?;
        Ok(Response::new(proto::EffectList {
            effects: effects.iter().map(effect).collect(),
        }))
    }

    async fn resolve_in_doubt(
        &self,
        request: Request<proto::ResolveRequest>,
    ) -> Reply<proto::EffectReply> {
        use proto::resolve_request::Verdict;
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let effect_id: EffectId = id("effect", &request.effect_id).map_err(status)?;
        let resolution = match request.verdict {
            Some(Verdict::CommittedResultJson(text)) => {
                Resolution::Committed(json_text("committed_result_json", &text).map_err(status)?)
            }
            Some(Verdict::FailedError(error)) => Resolution::Failed(error),
            Some(Verdict::Compensated(true)) => Resolution::Compensated,
            Some(Verdict::NotCompensatedError(error)) => Resolution::NotCompensated(error),
            Some(Verdict::Compensated(false)) | None => {
                return Err(status(Error::BadRequest(
                    "name the verdict: committed_result_json (it ran) or failed_error (it did \
                     not); for a compensation in doubt, compensated or not_compensated_error"
                        .into(),
                )));
            }
        };
        admin::resolve_effect(&self.gateway, &principal, effect_id, resolution)
            .await
            .map_err(status)?;
        self.effect_reply(&principal, effect_id).await
    }

    type EventsStream = Streamed<proto::Event>;

    async fn events(&self, request: Request<proto::EventsRequest>) -> Reply<Self::EventsStream> {
        let principal = self.principal(&request).await?;
        let events = events::of_org(&self.gateway, &principal).map(|(name, json)| {
            Ok(proto::Event {
                r#type: name,
                event_json: json.to_string(),
            })
        });
        let events = events.take_until(self.stopping.clone().cancelled_owned());
        Ok(Response::new(Box::pin(events)))
    }

    async fn health(&self, _: Request<proto::HealthRequest>) -> Reply<proto::HealthReply> {
        let engine = self.local_engine()?;
        let (reason, last_beat) = crate::http::health::readiness(engine);
        let backend = self
            .gateway
            .store()
            .map(|s| s.backend())
            .unwrap_or_default();
        Ok(Response::new(proto::HealthReply {
            ready: reason.is_none(),
            reason,
            backend: backend.to_owned(),
            last_beat_ms: last_beat.map(|t| t.as_millis()),
        }))
    }

    async fn authenticate(
        &self,
        request: Request<proto::AuthenticateRequest>,
    ) -> Reply<proto::PrincipalReply> {
        let principal = self.principal(&request).await?;
        let (credential, credential_id) = match principal.credential {
            Credential::Local => ("local", None),
            Credential::ApiKey { id } => ("api_key", Some(id)),
            Credential::Token { subject } => ("token", Some(subject)),
        };
        Ok(Response::new(proto::PrincipalReply {
            org: principal.org.to_string(),
            role: principal.role.to_string(),
            credential: credential.to_owned(),
            credential_id,
        }))
    }

    async fn implicit_run(
        &self,
        request: Request<proto::ImplicitRunRequest>,
    ) -> Reply<proto::SessionReply> {
        let principal = self.principal(&request).await?;
        let idle = Duration::from_millis(request.into_inner().idle_ms);
        let engine = &self.gateway.engine;
        let actor = principal.actor();
        let run = engine.implicit_run(principal.acting(), &actor, idle);
        Ok(Response::new(proto::SessionReply {
            session_id: run.await.map_err(status)?.to_string(),
        }))
    }

    async fn record_read(
        &self,
        request: Request<proto::RecordReadRequest>,
    ) -> Reply<proto::RecordReadReply> {
        use proto::record_read_request::Outcome;
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let call = self.call(&principal, request.call).await?;
        let effect_id: EffectId = id("effect", &request.effect_id).map_err(status)?;
        let outcome = match request.outcome {
            Some(Outcome::ResultJson(text)) => {
                ReadOutcome::Answered(json_text("result_json", &text).map_err(status)?)
            }
            Some(Outcome::Failed(failed)) => ReadOutcome::Failed {
                error: failed.error,
                details: optional_json("details_json", failed.details_json)?,
            },
            Some(Outcome::InputRequiredJson(text)) => {
                ReadOutcome::InputRequired(json_text("input_required_json", &text).map_err(status)?)
            }
            Some(Outcome::NotSent(why)) => ReadOutcome::NotSent(why),
            None => return Err(status(Error::BadRequest("name the call's outcome".into()))),
        };
        let verdicts = optional_json("verdicts_json", request.verdicts_json)?;
        let started = Timestamp(request.started_at_ms);
        let recorded = (self.gateway.engine).record_read(
            principal.acting(),
            call,
            effect_id,
            started,
            outcome,
            verdicts,
        );
        let recorded = self.gateway.traces.store("record_read", recorded);
        let rejection = recorded.await.map_err(status)?;
        Ok(Response::new(proto::RecordReadReply {
            rejection_json: rejection.map(|r| serde_json::to_string(&r).unwrap_or_default()),
        }))
    }

    async fn reject(&self, request: Request<proto::RejectRequest>) -> Reply<proto::RejectReply> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let call = self.call(&principal, request.call).await?;
        let verdicts = optional_json("verdicts_json", request.verdicts_json)?;
        let rejected =
            (self.gateway.engine).reject(principal.acting(), &call, request.reason, verdicts);
        let rejected = self.gateway.traces.store("reject", rejected);
        Ok(Response::new(proto::RejectReply {
            effect_id: rejected.await.map_err(status)?.map(|id| id.to_string()),
        }))
    }

    async fn not_sent(&self, request: Request<proto::NoteRequest>) -> Reply<proto::Empty> {
        let n = self.note(request).await?;
        let why = n.note.as_str().unwrap_or_default().to_owned();
        let engine = &self.gateway.engine;
        let noted = engine.not_sent(n.principal.acting(), n.effect_id, &n.token, why, n.verdicts);
        noted.await.map_err(status)?;
        Ok(Response::new(proto::Empty {}))
    }

    async fn doubt(&self, request: Request<proto::NoteRequest>) -> Reply<proto::Empty> {
        let n = self.note(request).await?;
        let why = n.note.as_str().unwrap_or_default().to_owned();
        let engine = &self.gateway.engine;
        let noted = engine.doubt(n.principal.acting(), n.effect_id, &n.token, why, n.verdicts);
        noted.await.map_err(status)?;
        Ok(Response::new(proto::Empty {}))
    }

    async fn await_input(&self, request: Request<proto::NoteRequest>) -> Reply<proto::Empty> {
        let n = self.note(request).await?;
        let engine = &self.gateway.engine;
        let noted = engine.await_input(
            n.principal.acting(),
            n.effect_id,
            &n.token,
            n.note,
            n.verdicts,
        );
        noted.await.map_err(status)?;
        Ok(Response::new(proto::Empty {}))
    }

    async fn renew_lease(
        &self,
        request: Request<proto::RenewLeaseRequest>,
    ) -> Reply<proto::LeaseReply> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let effect_id: EffectId = id("effect", &request.effect_id).map_err(status)?;
        let token = sdk::presented_token(Some(&request.lease_token)).map_err(status)?;
        let renewed = (self.gateway.engine).renew_lease(principal.acting(), effect_id, &token);
        Ok(Response::new(proto::LeaseReply {
            lease_expires_at_ms: renewed.await.map_err(status)?.as_millis(),
        }))
    }

    async fn get_effect(
        &self,
        request: Request<proto::EffectRequest>,
    ) -> Reply<proto::EffectReply> {
        let principal = self.principal(&request).await?;
        let effect_id: EffectId = id("effect", &request.into_inner().effect_id).map_err(status)?;
        self.effect_reply(&principal, effect_id).await
    }

    async fn get_approval(
        &self,
        request: Request<proto::ApprovalRequest>,
    ) -> Reply<proto::ApprovalReply> {
        let principal = self.principal(&request).await?;
        let approval_id = id("approval", &request.into_inner().approval_id).map_err(status)?;
        let found = self
            .gateway
            .engine
            .approval(principal.acting(), approval_id);
        approval_reply(found.await.map_err(status)?)
    }

    async fn wait_for_decision(
        &self,
        request: Request<proto::WaitRequest>,
    ) -> Reply<proto::ApprovalReply> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let approval_id = id("approval", &request.approval_id).map_err(status)?;
        let timeout = Duration::from_millis(request.timeout_ms).min(LONGEST_WAIT);
        let engine = &self.gateway.engine;
        let decided = engine.wait_for_decision(principal.acting(), approval_id, timeout);
        approval_reply(decided.await.map_err(status)?)
    }

    async fn withdraw(
        &self,
        request: Request<proto::ApprovalRequest>,
    ) -> Reply<proto::ApprovalReply> {
        let principal = self.principal(&request).await?;
        let approval_id = id("approval", &request.into_inner().approval_id).map_err(status)?;
        let engine = &self.gateway.engine;
        let held = engine
            .approval(principal.acting(), approval_id)
            .await
            .map_err(status)?;
        // The call's own caller withdraws it, or an admin.
        let own = held.requested_by.as_deref() == Some(principal.actor().as_str());
        if !own {
            principal
                .require(Role::Admin, "withdrawing another principal's held call")
                .map_err(status)?;
        }
        let withdrawn = engine.withdraw(principal.acting(), approval_id, principal.actor());
        approval_reply(withdrawn.await.map_err(status)?)
    }

    async fn list_sessions(
        &self,
        request: Request<proto::ListSessionsRequest>,
    ) -> Reply<proto::SessionList> {
        let principal = self.principal(&request).await?;
        let reader = principal.reader();
        let sessions = self
            .gateway
            .engine
            .sessions(principal.acting(), &reader)
            .await;
        Ok(Response::new(proto::SessionList {
            record_json: (sessions.map_err(status)?.iter())
                .map(|s| serde_json::to_string(s).unwrap_or_default())
                .collect(),
        }))
    }

    async fn export_session(
        &self,
        request: Request<proto::SessionRequest>,
    ) -> Reply<proto::SnapshotReply> {
        let principal = self.principal(&request).await?;
        let session = admin::session_id(&request.into_inner().session_id).map_err(status)?;
        let reader = principal.reader();
        let body = (self.gateway.engine).snapshot(principal.acting(), &session, &reader);
        let body = body.await;
        Ok(Response::new(proto::SnapshotReply {
            body_json: body.map_err(status)?.to_string(),
        }))
    }

    async fn list_notifications(
        &self,
        request: Request<proto::ListNotificationsRequest>,
    ) -> Reply<proto::NotificationList> {
        let principal = self.principal(&request).await?;
        let deliveries = links::local_deliveries(&self.gateway, &principal).map_err(status)?;
        Ok(Response::new(proto::NotificationList {
            record_json: (deliveries.iter())
                .map(|d| serde_json::to_string(d).unwrap_or_default())
                .collect(),
        }))
    }

    async fn list_session_effects(
        &self,
        request: Request<proto::SessionRequest>,
    ) -> Reply<proto::EffectList> {
        let principal = self.principal(&request).await?;
        let session = admin::session_id(&request.into_inner().session_id).map_err(status)?;
        let engine = &self.gateway.engine;
        let reader = principal.reader();
        let effects = engine
            .session_effects(principal.acting(), &session, &reader)
            .await;
        Ok(Response::new(proto::EffectList {
            effects: effects.map_err(status)?.iter().map(effect).collect(),
        }))
    }

    async fn begin_undo(
        &self,
        request: Request<proto::SessionRequest>,
    ) -> Reply<proto::RecordReply> {
        let principal = self.principal(&request).await?;
        admin::may_undo(&principal).map_err(status)?;
        let session = admin::session_id(&request.into_inner().session_id).map_err(status)?;
        let planned = self
            .gateway
            .engine
            .begin_undo(principal.acting(), &session)
            .await;
        record_reply(&planned.map_err(status)?)
    }

    async fn record_undo_step(
        &self,
        request: Request<proto::UndoStepRequest>,
    ) -> Reply<proto::RecordReply> {
        let principal = self.principal(&request).await?;
        admin::may_undo(&principal).map_err(status)?;
        let request = request.into_inner();
        let session = admin::session_id(&request.session_id).map_err(status)?;
        let effect_id: EffectId = id("effect", &request.effect_id).map_err(status)?;
        let step: StepBody = serde_json::from_str(&request.step_json)
            .map_err(|e| status(Error::BadRequest(format!("step_json: {e}"))))?;
        let (claim, outcome) = step.into_outcome();
        let counted = outcome.clone();
        let engine = &self.gateway.engine;
        let progress =
            engine.record_undo_step(principal.acting(), &session, &claim, effect_id, outcome);
        let progress = progress.await.map_err(status)?;
        self.gateway.metrics.undo_step(&counted);
        record_reply(&progress)
    }

    async fn open_undo(&self, request: Request<proto::SessionRequest>) -> Reply<proto::UndoOpened> {
        let principal = self.principal(&request).await?;
        admin::may_undo(&principal).map_err(status)?;
        let session = admin::session_id(&request.into_inner().session_id).map_err(status)?;
        let engine = self.local_engine()?;
        let run = engine
            .open_undo(&principal.org, &session)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::UndoOpened {
            holder: run.holder,
            not_undoable: run.not_undoable.iter().map(ToString::to_string).collect(),
        }))
    }

    async fn next_undo_step(
        &self,
        request: Request<proto::UndoHeld>,
    ) -> Reply<proto::NextUndoStepReply> {
        let principal = self.principal(&request).await?;
        admin::may_undo(&principal).map_err(status)?;
        let request = request.into_inner();
        let session = admin::session_id(&request.session_id).map_err(status)?;
        let engine = self.local_engine()?;
        let next = engine.next_undo_step(&principal.org, &session, &request.holder);
        Ok(Response::new(proto::NextUndoStepReply {
            effect: next.await.map_err(status)?.as_ref().map(effect),
        }))
    }

    async fn record_undo_try(
        &self,
        request: Request<proto::UndoTried>,
    ) -> Reply<proto::UndoTriedReply> {
        let principal = self.principal(&request).await?;
        admin::may_undo(&principal).map_err(status)?;
        let request = request.into_inner();
        let session = admin::session_id(&request.session_id).map_err(status)?;
        let tried: UndoStep = serde_json::from_str(&request.step_json)
            .map_err(|e| status(Error::BadRequest(format!("step_json: {e}"))))?;
        let engine = self.local_engine()?;
        let ended = engine.record_undo_try(&principal.org, &session, &request.holder, &tried);
        let ended = ended.await.map_err(status)?;
        self.gateway.metrics.undo_step(&tried.outcome);
        Ok(Response::new(proto::UndoTriedReply {
            ended: ended.map(|state| state.to_string()),
        }))
    }
}
