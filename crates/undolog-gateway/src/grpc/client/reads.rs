//! What the log holds, read from the engine over gRPC: effects, sessions, snapshots, calls in
//! doubt and the notifications the engine sent.

use super::*;

impl RemoteEngine {
    pub(crate) async fn effect(
        &self,
        presented: &Presented,
        id: EffectId,
    ) -> Result<Effect, Error> {
        let mut client = self.client();
        let request = proto::EffectRequest {
            effect_id: id.to_string(),
        };
        let reply = client.get_effect(Self::request(presented, request)).await;
        let reply = reply.map_err(|s| self.refused(&s))?.into_inner();
        self.effect_of(reply.effect)
    }

    pub(super) fn effect_of(&self, effect: Option<proto::Effect>) -> Result<Effect, Error> {
        let effect = effect.ok_or_else(|| self.garbled("no effect".into()))?;
        self.json("record_json", &effect.record_json)
    }

    pub(super) fn effects_of(&self, list: proto::EffectList) -> Result<Vec<Effect>, Error> {
        list.effects
            .into_iter()
            .map(|e| self.effect_of(Some(e)))
            .collect()
    }

    pub(crate) async fn in_doubt(&self, presented: &Presented) -> Result<Vec<Effect>, Error> {
        let mut client = self.client();
        let reply = client
            .list_in_doubt(Self::request(presented, proto::ListInDoubtRequest {}))
            .await;
        self.effects_of(reply.map_err(|s| self.refused(&s))?.into_inner())
    }

    pub(crate) async fn resolve_in_doubt(
        &self,
        presented: &Presented,
        effect: EffectId,
        resolution: Resolution,
    ) -> Result<(), Error> {
        use proto::resolve_request::Verdict;
        let verdict = match resolution {
            Resolution::Committed(result) => Verdict::CommittedResultJson(result.to_string()),
            Resolution::Failed(error) => Verdict::FailedError(error),
            Resolution::Compensated => Verdict::Compensated(true),
            Resolution::NotCompensated(error) => Verdict::NotCompensatedError(error),
        };
        let mut client = self.client();
        let request = proto::ResolveRequest {
            effect_id: effect.to_string(),
            verdict: Some(verdict),
        };
        let reply = client
            .resolve_in_doubt(Self::request(presented, request))
            .await;
        reply.map_err(|s| self.refused(&s))?;
        Ok(())
    }

    pub(crate) async fn sessions(&self, presented: &Presented) -> Result<Vec<Session>, Error> {
        let mut client = self.client();
        let reply = client
            .list_sessions(Self::request(presented, proto::ListSessionsRequest {}))
            .await;
        let list = reply.map_err(|s| self.refused(&s))?.into_inner();
        (list.record_json.iter())
            .map(|text| self.json("record_json", text))
            .collect()
    }

    /// A session's whole history, exported (and kept) by the engine.
    pub(crate) async fn snapshot(
        &self,
        presented: &Presented,
        session: &SessionId,
    ) -> Result<Value, Error> {
        let mut client = self.client();
        let request = proto::SessionRequest {
            session_id: session.to_string(),
        };
        let reply = client
            .export_session(Self::request(presented, request))
            .await;
        let reply = reply.map_err(|s| self.refused(&s))?.into_inner();
        self.json("body_json", &reply.body_json)
    }

    /// What the engine's process told of the org's held calls.
    pub(crate) async fn notifications(&self, presented: &Presented) -> Result<Vec<Value>, Error> {
        let mut client = self.client();
        let request = Self::request(presented, proto::ListNotificationsRequest {});
        let reply = client.list_notifications(request).await;
        let list = reply.map_err(|s| self.refused(&s))?.into_inner();
        (list.record_json.iter())
            .map(|text| self.json("record_json", text))
            .collect()
    }

    pub(crate) async fn session_effects(
        &self,
        presented: &Presented,
        session: &SessionId,
    ) -> Result<Vec<Effect>, Error> {
        let mut client = self.client();
        let request = proto::SessionRequest {
            session_id: session.to_string(),
        };
        let reply = client
            .list_session_effects(Self::request(presented, request))
            .await;
        self.effects_of(reply.map_err(|s| self.refused(&s))?.into_inner())
    }
}
