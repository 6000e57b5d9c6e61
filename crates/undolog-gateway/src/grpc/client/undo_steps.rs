//! The engine's saga asked over gRPC, one request per move.

use super::*;

/// The remote engine, asked with the credentials of the client an undo runs for.
#[derive(Debug)]
pub(crate) struct Presenting<'a> {
    pub(crate) remote: &'a RemoteEngine,
    pub(crate) presented: &'a Presented,
}

/// The engine's saga, one request per move, with this gateway running each compensation
/// through its own upstreams and interceptor chain (which knows what this session read).
#[async_trait::async_trait]
impl UndoSteps for Presenting<'_> {
    type Error = Error;

    async fn open_undo(&self, _: &OrgId, id: &SessionId) -> Result<UndoRun, Error> {
        let request = proto::SessionRequest {
            session_id: id.to_string(),
        };
        let mut client = self.remote.client();
        let reply = client
            .open_undo(RemoteEngine::request(self.presented, request))
            .await;
        let opened = reply.map_err(|s| self.remote.refused(&s))?.into_inner();
        Ok(UndoRun {
            holder: opened.holder,
            not_undoable: (opened.not_undoable.iter())
                .map(|id| self.remote.parsed("effect_id", id))
                .collect::<Result<_, _>>()?,
        })
    }

    async fn next_undo_step(
        &self,
        _: &OrgId,
        id: &SessionId,
        holder: &str,
    ) -> Result<Option<Effect>, Error> {
        let request = proto::UndoHeld {
            session_id: id.to_string(),
            holder: holder.to_owned(),
        };
        let mut client = self.remote.client();
        let reply = client
            .next_undo_step(RemoteEngine::request(self.presented, request))
            .await;
        let next = reply.map_err(|s| self.remote.refused(&s))?.into_inner();
        next.effect
            .map(|e| self.remote.effect_of(Some(e)))
            .transpose()
    }

    async fn record_undo_try(
        &self,
        _: &OrgId,
        id: &SessionId,
        holder: &str,
        tried: &UndoStep,
    ) -> Result<Option<SessionState>, Error> {
        let request = proto::UndoTried {
            session_id: id.to_string(),
            holder: holder.to_owned(),
            step_json: serde_json::to_string(tried).unwrap_or_default(),
        };
        let mut client = self.remote.client();
        let reply = client
            .record_undo_try(RemoteEngine::request(self.presented, request))
            .await;
        let reply = reply.map_err(|s| self.remote.refused(&s))?.into_inner();
        (reply.ended.as_deref())
            .map(|state| self.remote.parsed("ended", state))
            .transpose()
    }

    fn retries(&self) -> (u32, Duration) {
        (
            self.remote.config.compensation_attempts,
            self.remote.config.compensation_backoff,
        )
    }
}
