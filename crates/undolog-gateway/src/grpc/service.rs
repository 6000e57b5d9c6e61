//! `EffectEngine` over a gateway's engine. Every request is authenticated from its metadata by
//! [`Gateway::authenticate`], the HTTP API's own check, and each method asks for the role its
//! HTTP route asks for, through the same helpers (`sdk::intercept_effect`, `admin::decider`).

use std::{pin::Pin, sync::Arc};

use futures::{Stream, StreamExt};
use serde_json::{Map, Value};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use undolog_engine::{Compensated, Compensator, Intercept, Rejection, Resolution};
use undolog_store::{Compensation, Effect as EffectRecord};
use undolog_types::{ApprovalId, ApprovalState, EffectId, Tier};

use super::{proto, status::status};
use crate::{
    Error, Gateway, Principal,
    compensate::UpstreamCompensator,
    http::{admin, events, sdk},
};

/// The service, over the gateway that holds the engine, its store and its credentials.
#[derive(Debug, Clone)]
pub(crate) struct EngineService {
    pub(crate) gateway: Arc<Gateway>,
}

type Reply<T> = Result<Response<T>, Status>;
type Streamed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

impl EngineService {
    /// Who sent `request`: its `authorization` metadata, read as the HTTP API reads the header.
    async fn principal<T>(&self, request: &Request<T>) -> Result<Principal, Status> {
        let headers = request.metadata().clone().into_headers();
        self.gateway.authenticate(&headers).await.map_err(status)
    }
}

fn json_text(what: &str, text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| Error::BadRequest(format!("{what}: not JSON: {e}")))
}

fn id<T: std::str::FromStr>(what: &str, text: &str) -> Result<T, Error> {
    admin::parse_id(what, text)
}

fn tier(tier: i32) -> Result<Tier, Error> {
    match proto::Tier::try_from(tier) {
        Ok(proto::Tier::ReadOnly) => Ok(Tier::ReadOnly),
        Ok(proto::Tier::Compensable) => Ok(Tier::Compensable),
        Ok(proto::Tier::Irreversible) => Ok(Tier::Irreversible),
        _ => Err(Error::BadRequest(
            "tier: name one: TIER_READ_ONLY, TIER_COMPENSABLE or TIER_IRREVERSIBLE".into(),
        )),
    }
}

/// The request as the SDK's HTTP body says it, checked by the same code.
fn intercept_body(request: proto::InterceptRequest) -> Result<sdk::InterceptBody, Error> {
    let arguments = match request.arguments_json.trim() {
        "" => Map::new(),
        text => match json_text("arguments_json", text)? {
            Value::Object(map) => map,
            _ => {
                return Err(Error::BadRequest(
                    "arguments_json: must be a JSON object".into(),
                ));
            }
        },
    };
    let compensation = request
        .compensation_json
        .map(|text| {
            serde_json::from_str::<Compensation>(&text).map_err(|e| {
                Error::BadRequest(format!(
                    "compensation_json: {e}; send {{\"kind\": \"local\", \"function\": \"…\"}} \
                     or {{\"kind\": \"upstream\", \"tool\": \"…\", \"args\": {{…}}}}"
                ))
            })
        })
        .transpose()?;
    Ok(sdk::InterceptBody {
        session_id: request.session_id,
        tool: request.tool,
        arguments,
        step: request.step,
        tier: tier(request.tier)?,
        compensation,
        idempotent: request.idempotent,
        requires_approval: request.requires_approval,
        idempotency_key: request.idempotency_key,
    })
}

fn decision(decided: Intercept) -> proto::InterceptReply {
    use proto::intercept_reply::Decision;
    let decision = match decided {
        Intercept::Execute {
            effect_id,
            lease_expires_at,
        } => Decision::Execute(proto::Execute {
            effect_id: effect_id.to_string(),
            lease_expires_at_ms: lease_expires_at.as_millis(),
        }),
        Intercept::Replay { effect_id, result } => Decision::Replay(proto::Replay {
            effect_id: effect_id.to_string(),
            result_json: result.to_string(),
        }),
        Intercept::Failed {
            effect_id,
            error,
            result,
        } => Decision::Failed(proto::Failed {
            effect_id: effect_id.to_string(),
            error,
            result_json: result.map(|r| r.to_string()),
        }),
        Intercept::AwaitingApproval {
            effect_id,
            approval_id,
            expires_at,
        } => Decision::AwaitingApproval(proto::AwaitingApproval {
            effect_id: effect_id.to_string(),
            approval_id: approval_id.to_string(),
            expires_at_ms: expires_at.as_millis(),
        }),
        Intercept::Rejected { effect_id, reason } => Decision::Rejected(proto::Rejected {
            effect_id: effect_id.map(|id| id.to_string()),
            in_doubt: reason == Rejection::InDoubt,
            reason: reason.message(),
        }),
    };
    proto::InterceptReply {
        decision: Some(decision),
    }
}

/// A record's text field as the HTTP API's JSON names it.
fn named(record: &Value, field: &str) -> String {
    record[field].as_str().unwrap_or_default().to_owned()
}

fn effect(record: &EffectRecord) -> proto::Effect {
    let json = serde_json::to_value(record).unwrap_or(Value::Null);
    proto::Effect {
        effect_id: record.id.to_string(),
        session_id: record.session.to_string(),
        tool: record.tool.clone(),
        state: named(&json, "state"),
        record_json: json.to_string(),
    }
}

fn approval(record: &undolog_store::Approval) -> proto::Approval {
    let json = serde_json::to_value(record).unwrap_or(Value::Null);
    proto::Approval {
        approval_id: record.id.to_string(),
        effect_id: record.effect.to_string(),
        session_id: record.session.to_string(),
        state: named(&json, "state"),
        record_json: json.to_string(),
    }
}

impl EngineService {
    /// Approve or Deny: the HTTP routes' own decision.
    async fn decide(
        &self,
        request: Request<proto::DecideRequest>,
        verdict: fn(Option<String>) -> admin::Verdict,
    ) -> Reply<proto::ApprovalReply> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let approval_id: ApprovalId = id("approval", &request.approval_id).map_err(status)?;
        let verdict = verdict(request.reason);
        let decided = admin::decide(&self.gateway, &principal, approval_id, verdict)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::ApprovalReply {
            approval: Some(approval(&decided)),
        }))
    }

    async fn effect_reply(&self, principal: &Principal, id: EffectId) -> Reply<proto::EffectReply> {
        let record = (self.gateway.engine.effect(&principal.org, id).await).map_err(status)?;
        Ok(Response::new(proto::EffectReply {
            effect: Some(effect(&record)),
        }))
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
        let decided = sdk::intercept_effect(&self.gateway, &principal, body)
            .await
            .map_err(status)?;
        Ok(Response::new(decision(decided)))
    }

    async fn commit(&self, request: Request<proto::CommitRequest>) -> Reply<proto::EffectReply> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let effect_id: EffectId = id("effect", &request.effect_id).map_err(status)?;
        let result = json_text("result_json", &request.result_json).map_err(status)?;
        (self
            .gateway
            .engine
            .commit(&principal.org, effect_id, result)
            .await)
            .map_err(status)?;
        self.effect_reply(&principal, effect_id).await
    }

    async fn fail(&self, request: Request<proto::FailRequest>) -> Reply<proto::EffectReply> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let effect_id: EffectId = id("effect", &request.effect_id).map_err(status)?;
        let failed = self
            .gateway
            .engine
            .fail(&principal.org, effect_id, request.error);
        failed.await.map_err(status)?;
        self.effect_reply(&principal, effect_id).await
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
        let approvals = (self
            .gateway
            .engine
            .approvals(&principal.org, Some(state))
            .await)
            .map_err(status)?;
        Ok(Response::new(proto::ApprovalList {
            approvals: approvals.iter().map(approval).collect(),
        }))
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
        let effects = (self.gateway.engine.in_doubt(&principal.org).await).map_err(status)?;
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
            None => {
                return Err(status(Error::BadRequest(
                    "name the verdict: committed_result_json (it ran) or failed_error (it did not)"
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
        let org = self.principal(&request).await?.org;
        let events = events::of_org(&self.gateway, org).map(|(name, json)| {
            Ok(proto::Event {
                r#type: name,
                event_json: json.to_string(),
            })
        });
        Ok(Response::new(Box::pin(events)))
    }
}

/// The gateway's compensator, telling the stream each try as it ends.
struct Reporting<'g> {
    inner: UpstreamCompensator<'g>,
    updates: tokio::sync::mpsc::Sender<Result<proto::UndoUpdate, Status>>,
}

#[async_trait::async_trait]
impl Compensator for Reporting<'_> {
    async fn compensate(&self, effect: &EffectRecord) -> Result<Compensated, String> {
        let tried = self.inner.compensate(effect).await;
        let step = proto::StepTried {
            effect_id: effect.id.to_string(),
            tool: effect.tool.clone(),
            compensated: tried.is_ok(),
            error: tried.as_ref().err().cloned(),
        };
        let update = proto::UndoUpdate {
            update: Some(proto::undo_update::Update::Step(step)),
        };
        // A client that went away does not stop the undo: the log still gets every step.
        let _ = self.updates.send(Ok(update)).await;
        tried
    }
}
