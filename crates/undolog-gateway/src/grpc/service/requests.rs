//! What the service's methods share: a request's principal and parts, the replies of recorded outcomes.

use super::*;

impl EngineService {
    /// Approve or Deny: the HTTP routes' own decision.
    pub(super) async fn decide(
        &self,
        request: Request<proto::DecideRequest>,
        verdict: fn(Option<String>) -> admin::Verdict,
    ) -> Reply<proto::ApprovalReply> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        let approval_id: ApprovalId = id("approval", &request.approval_id).map_err(status)?;
        let verdict = verdict(request.reason);
        let via = admin::Via::of_record(request.via.as_deref()).map_err(status)?;
        let decided = admin::decide(&self.gateway, &principal, approval_id, verdict, &via)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::ApprovalReply {
            approval: Some(approval(&decided)),
        }))
    }

    /// This process's engine: an engine serves only what it holds.
    pub(super) fn local_engine(&self) -> Result<&undolog_engine::Engine, Status> {
        (self.gateway.engine.local()).ok_or_else(|| {
            status(Error::Startup(
                "this engine asks another; ask that one".into(),
            ))
        })
    }

    /// A gateway's call, as `principal` makes it, checked as an SDK call is.
    pub(super) async fn call(
        &self,
        principal: &Principal,
        call: Option<proto::InterceptRequest>,
    ) -> Result<Call, Status> {
        let call = call.ok_or_else(|| status(Error::BadRequest("name the call".into())))?;
        let body = intercept_body(call).map_err(status)?;
        sdk::sdk_call(&self.gateway, principal, body)
            .await
            .map_err(status)
    }

    /// A note's principal, effect, note and verdicts.
    pub(super) async fn note(&self, request: Request<proto::NoteRequest>) -> Result<Noted, Status> {
        let principal = self.principal(&request).await?;
        let request = request.into_inner();
        Ok(Noted {
            principal,
            effect_id: id("effect", &request.effect_id).map_err(status)?,
            token: sdk::presented_token(Some(&request.lease_token)).map_err(status)?,
            note: json_text("note_json", &request.note_json).map_err(status)?,
            verdicts: optional_json("verdicts_json", request.verdicts_json)?,
        })
    }

    /// The reply to a recorded outcome: the effect read back, unless the caller has no use for it
    /// (the gateway's own link never has: it saves the engine a read per call).
    pub(super) async fn outcome_reply(
        &self,
        principal: &Principal,
        id: EffectId,
        without_effect: bool,
    ) -> Reply<proto::EffectReply> {
        if without_effect {
            return Ok(Response::new(proto::EffectReply { effect: None }));
        }
        self.effect_reply(principal, id).await
    }

    pub(super) async fn effect_reply(
        &self,
        principal: &Principal,
        id: EffectId,
    ) -> Reply<proto::EffectReply> {
        let (engine, reader) = (&self.gateway.engine, principal.reader());
        let record = engine.effect_read_by(principal.acting(), id, &reader).await;
        let record = record.map_err(status)?;
        Ok(Response::new(proto::EffectReply {
            effect: Some(effect(&record)),
        }))
    }
}
