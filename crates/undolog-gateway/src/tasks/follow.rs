//! Following an upstream's own task: the upstream answered `tools/call` with a `CreateTaskResult`
//! (it serves the tasks extension and the client declared it). The gateway's task, whose id is
//! the call's effect, mirrors the upstream's: working, its input requests (the client answers
//! them with `tasks/update` to the gateway, which passes the answers on), its end. `tasks/cancel`
//! is passed on too, and the upstream decides how its task ends. The effect stays pending, its
//! lease renewed, until the upstream's task ends; then its result goes through the response phase
//! and is recorded like any call's.

use std::time::{Duration, Instant};

use rmcp::{
    ErrorData,
    model::{
        CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest,
        ServerResult, TaskPayload, UpdateTaskParams, UpdateTaskRequest,
    },
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use undolog_types::{EffectId, LeaseToken, Tier, Timestamp};

use super::{RunState, TaskRun};
use crate::{
    Error, Gateway,
    calls::{Caller, Outcome, ToolCall},
    interceptors::{self, ResponseVerdict},
    results,
};

/// An upstream's task, as the call that made it left it.
#[derive(Debug)]
pub(super) struct UpstreamTask {
    pub(super) effect_id: EffectId,
    /// The effect's lease token, which settles it.
    pub(super) lease_token: LeaseToken,
    pub(super) upstream: usize,
    pub(super) task_id: String,
    /// How often the upstream asks to be polled (kept within [`POLL_RANGE`]).
    pub(super) poll: Duration,
}

impl UpstreamTask {
    /// The effect, and the token that settles it.
    fn owner(&self) -> (EffectId, &LeaseToken) {
        (self.effect_id, &self.lease_token)
    }
}

/// The polling interval the gateway keeps to, whatever the upstream asks.
const POLL_RANGE: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

impl Gateway {
    /// Follows `task` to its end and records the call's effect then. `Err(Cancelled)` when the
    /// upstream's task ended cancelled because this task was.
    pub(super) async fn follow(
        &self,
        run: &TaskRun,
        call: &ToolCall,
        caller: &Caller,
        task: UpstreamTask,
    ) -> Result<Outcome, Error> {
        let conn = self.upstreams.connection(task.upstream);
        let poll = task.poll.clamp(POLL_RANGE.0, POLL_RANGE.1);
        let never = CancellationToken::new();
        let ask = |request: ClientRequest| {
            conn.send(
                caller.era,
                &never,
                None,
                request,
                caller.upstream_meta.clone(),
            )
        };
        let id = || task.task_id.clone();
        let (mut cancel_sent, mut renewed) = (false, Instant::now());
        let mut unanswered_since: Option<Instant> = None;
        loop {
            if run.cancel.is_cancelled() && !cancel_sent {
                cancel_sent = true;
                let cancel = CancelTaskRequest::new(CancelTaskParams::new(id()));
                if let Err(e) = ask(ClientRequest::CancelTaskRequest(cancel)).await {
                    tracing::debug!(error = %e, "the upstream's task was not told to cancel");
                }
            }
            if renewed.elapsed() > self.engine.config().lease / 3 {
                (self.engine)
                    .renew_lease(call.acting(), task.effect_id, &task.lease_token)
                    .await?;
                renewed = Instant::now();
            }
            let get = GetTaskRequest::new(GetTaskParams::new(id()));
            match ask(ClientRequest::GetTaskRequest(get)).await {
                Ok(ServerResult::GetTaskResult(seen)) => {
                    unanswered_since = None;
                    match seen.task.payload {
                        TaskPayload::Working => run.set(RunState::Working {
                            message: seen.task.task.status_message,
                            updated_at: Timestamp::now(),
                        }),
                        TaskPayload::InputRequired { input_requests } => {
                            run.set(RunState::InputRequired {
                                requests: input_requests,
                                request_state: None,
                                answers: Default::default(),
                                updated_at: Timestamp::now(),
                            });
                            tokio::select! {
                                () = run.answered.notified() => {}
                                () = run.cancel.cancelled() => continue,
                            }
                            if let RunState::InputRequired { answers, .. } = run.state() {
                                run.set(RunState::Working {
                                    message: None,
                                    updated_at: Timestamp::now(),
                                });
                                let update =
                                    UpdateTaskRequest::new(UpdateTaskParams::new(id(), answers));
                                if let Err(e) = ask(ClientRequest::UpdateTaskRequest(update)).await
                                {
                                    tracing::debug!(error = %e, "answers not passed to the upstream's task");
                                }
                            }
                            continue;
                        }
                        TaskPayload::Completed { result } => {
                            return self
                                .record_task_result(call, task.owner(), Value::Object(result))
                                .await;
                        }
                        TaskPayload::Failed { error } => {
                            return self
                                .record_task_error(call, task.owner(), Value::Object(error))
                                .await;
                        }
                        TaskPayload::Cancelled => {
                            let why = if cancel_sent {
                                "its task was cancelled at the client's request"
                            } else {
                                "the upstream cancelled its task"
                            };
                            let outcome = self.doubt(call, task.owner(), why).await?;
                            return if cancel_sent {
                                Err(Error::Cancelled)
                            } else {
                                Ok(outcome)
                            };
                        }
                        // A status this gateway does not know yet: the task goes on.
                        _ => {}
                    }
                }
                Ok(_) => {
                    let why = "the upstream answered tasks/get with something that is not a task";
                    return self.doubt(call, task.owner(), why).await;
                }
                Err(e) => {
                    // Asked again until the upstream timeout has passed without an answer.
                    let since = *unanswered_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > self.config.limits.upstream_timeout {
                        let why = format!("the upstream stopped answering for its task: {e}");
                        return self.doubt(call, task.owner(), &why).await;
                    }
                    tracing::debug!(error = %e, "tasks/get to the upstream failed; asking again");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(poll) => {}
                () = run.cancel.cancelled(), if !cancel_sent => {}
            }
        }
    }

    /// The upstream's task completed with `result`: it goes through the response phase, and
    /// is recorded as the call's (a tool error as a failure).
    async fn record_task_result(
        &self,
        call: &ToolCall,
        (effect_id, token): (EffectId, &LeaseToken),
        result: Value,
    ) -> Result<Outcome, Error> {
        let session = self.engine.effect(call.acting(), effect_id).await?.session;
        let context = interceptors::context(&call.org, &session, call.meta.as_ref());
        let (answer, response_record) =
            match self.interceptors.tool_response(&result, &context).await {
                None => (Ok(result.clone()), None),
                Some(ResponseVerdict::Pass { result, record }) => (Ok(result), record),
                Some(ResponseVerdict::Blocked { error, record }) => (Err(error), Some(record)),
            };
        let verdicts = interceptors::verdicts(None, response_record.as_ref());
        let recorded = match results::tool_error(&result) {
            Some(error) => {
                let failed = Outcome::Failed {
                    effect_id,
                    error: error.clone(),
                    result: Some(result.clone()),
                    replayed: false,
                };
                self.engine
                    .fail_with(
                        call.acting(),
                        effect_id,
                        token,
                        error,
                        Some(result),
                        verdicts,
                    )
                    .await
                    .map(|()| failed)
            }
            None => self
                .engine
                .commit_with(call.acting(), effect_id, token, result, verdicts)
                .await
                .map(|()| Outcome::Executed {
                    effect_id,
                    result: Value::Null,
                }),
        };
        let outcome = recorded.map_err(|e| Error::OutcomeNotRecorded {
            effect_id,
            reason: e.to_string(),
        })?;
        match (outcome, answer) {
            (_, Err(error)) => Err(Error::Intercepted {
                effect_id: Some(effect_id),
                error,
            }),
            // The client gets what the response phase let through; the log keeps the upstream's.
            (Outcome::Executed { .. }, Ok(result)) => Ok(Outcome::Executed { effect_id, result }),
            (failed, Ok(_)) => Ok(failed),
        }
    }

    /// The upstream's task failed with a JSON-RPC `error`: the client gets it as it is.
    async fn record_task_error(
        &self,
        call: &ToolCall,
        (effect_id, token): (EffectId, &LeaseToken),
        error: Value,
    ) -> Result<Outcome, Error> {
        let error: ErrorData = serde_json::from_value(error.clone()).unwrap_or_else(|_| {
            ErrorData::internal_error(format!("the upstream's task failed: {error}"), None)
        });
        self.engine
            .fail_with(
                call.acting(),
                effect_id,
                token,
                format!("the upstream's task failed: {}", error.message),
                Some(json!({ "error": error })),
                None,
            )
            .await
            .map_err(|e| Error::OutcomeNotRecorded {
                effect_id,
                reason: e.to_string(),
            })?;
        Ok(Outcome::Refused { effect_id, error })
    }

    /// The upstream's task ended without a result the gateway can trust: the tool may or may
    /// not have done its work (a read-only one changed nothing: it simply failed).
    async fn doubt(
        &self,
        call: &ToolCall,
        (effect_id, token): (EffectId, &LeaseToken),
        why: &str,
    ) -> Result<Outcome, Error> {
        if self.engine.effect(call.acting(), effect_id).await?.tier == Tier::ReadOnly {
            self.engine
                .fail(call.acting(), effect_id, token, why)
                .await?;
            return Ok(Outcome::Failed {
                effect_id,
                error: why.to_owned(),
                result: None,
                replayed: false,
            });
        }
        let message = format!(
            "{why}; the tool may or may not have done its work there, so the call is in doubt: \
             an operator records what happened (GET /v1/effects/in_doubt)"
        );
        self.engine
            .doubt(call.acting(), effect_id, token, message.clone(), None)
            .await?;
        Ok(Outcome::InDoubt {
            effect_id,
            message,
            replayed: false,
        })
    }
}
