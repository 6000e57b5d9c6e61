//! A call that waits: for an identical call in flight (its answer is replayed), or for a
//! person's decision on an approval; a client that follows progress hears that it is waiting.

use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, RequestMetaObject};
use undolog_engine::{Call, Intercept};
use undolog_types::{ApprovalId, ApprovalState};

use super::{Caller, ToolCall};
use crate::{Error, Gateway};

impl Gateway {
    /// The engine's decision on a call. One identical to a call in flight waits for it (up to
    /// `limits.identical_call_wait_secs`, or the client's `_meta` wait); a client that follows
    /// progress hears every [`WAITING_PROGRESS_EVERY`] that it is waiting, which keeps a timeout
    /// reset by progress from running out first.
    pub(super) async fn intercept(
        &self,
        engine_call: &Call,
        call: &ToolCall,
        caller: &Caller,
    ) -> Result<Intercept, Error> {
        let token = call
            .meta
            .as_ref()
            .and_then(RequestMetaObject::get_progress_token);
        let peer = caller.requester.as_ref().and_then(|r| r.peer.as_ref());
        let (Some(peer), Some(token)) = (peer, token) else {
            return self
                .engine
                .intercept(call.acting(), engine_call.clone())
                .await;
        };
        let limit = self.engine.config().wait_timeout;
        let total = engine_call.wait.map_or(limit, |w| w.min(limit));
        let deadline = tokio::time::Instant::now() + total;
        let mut ticks = 0u32;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let slice = engine_call
                .clone()
                .with_wait(left.min(WAITING_PROGRESS_EVERY));
            match self.engine.intercept(call.acting(), slice).await {
                Err(Error::Engine(undolog_engine::Error::StillRunning { effect, .. }))
                    if !left.is_zero() =>
                {
                    ticks += 1;
                    let mut progress =
                        ProgressNotificationParam::new(token.clone(), f64::from(ticks));
                    progress.message = Some(format!(
                        "waiting for the identical call in flight (effect {effect}); its answer is replayed here"
                    ));
                    if let Err(e) = peer.notify_progress(progress).await {
                        tracing::debug!(error = %e, "progress not sent");
                    }
                }
                Err(Error::Engine(undolog_engine::Error::StillRunning { effect, .. })) => {
                    return Err(undolog_engine::Error::StillRunning {
                        effect,
                        waited: total,
                    }
                    .into());
                }
                other => return other,
            }
        }
    }

    /// Waits for a person's decision, sending progress if the client asked for it: the
    /// approval's state once it is not pending (approved, denied, expired or withdrawn), `None`
    /// if the hold time ran out first.
    pub(super) async fn hold(
        &self,
        call: &ToolCall,
        approval_id: ApprovalId,
        caller: &Caller,
    ) -> Result<Option<ApprovalState>, Error> {
        let deadline =
            tokio::time::Instant::now() + caller.hold.unwrap_or(self.config.approvals.hold);
        let token = call
            .meta
            .as_ref()
            .and_then(RequestMetaObject::get_progress_token);
        let mut ticks = 0u32;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let slice = left.min(Duration::from_secs(5));
            let decided = tokio::select! {
                decided = self.engine.wait_for_decision(call.acting(), approval_id, slice) => decided,
                () = caller.cancel.cancelled() => return Err(Error::Cancelled),
            };
            match decided {
                Ok(approval) if approval.state != ApprovalState::Pending => {
                    return Ok(Some(approval.state));
                }
                Ok(_) => {}
                Err(Error::Engine(undolog_engine::Error::ApprovalWaitTimedOut(_))) => {}
                Err(other) => return Err(other),
            }
            ticks += 1;
            let peer = caller.requester.as_ref().and_then(|r| r.peer.as_ref());
            if let (Some(peer), Some(token)) = (peer, &token) {
                let mut progress = ProgressNotificationParam::new(token.clone(), f64::from(ticks));
                progress.message = Some(format!(
                    "waiting for a person to decide approval {approval_id}"
                ));
                if let Err(e) = peer.notify_progress(progress).await {
                    tracing::debug!(error = %e, "progress not sent");
                }
            }
        }
    }
}

/// How often a call waiting for an identical one in flight tells a client that follows progress.
const WAITING_PROGRESS_EVERY: Duration = Duration::from_secs(2);
