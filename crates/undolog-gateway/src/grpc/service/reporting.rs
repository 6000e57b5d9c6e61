//! The gateway's compensator in an undo asked over gRPC: each try told to the stream as it ends.

use super::*;

/// The gateway's compensator, telling the stream each try as it ends.
pub(super) struct Reporting<'g> {
    pub(super) inner: UpstreamCompensator<'g>,
    pub(super) updates: tokio::sync::mpsc::Sender<Result<proto::UndoUpdate, Status>>,
}

#[async_trait::async_trait]
impl Compensator for Reporting<'_> {
    async fn compensate(&self, effect: &EffectRecord) -> Result<Compensated, CompensationFailure> {
        let tried = self.inner.compensate(effect).await;
        let step = proto::StepTried {
            effect_id: effect.id.to_string(),
            tool: effect.tool.clone(),
            compensated: tried.is_ok(),
            error: tried.as_ref().err().map(|e| e.message().to_owned()),
        };
        let update = proto::UndoUpdate {
            update: Some(proto::undo_update::Update::Step(step)),
        };
        // A client that went away does not stop the undo: the log still gets every step.
        let _ = self.updates.send(Ok(update)).await;
        tried
    }
}
