//! An approved call upstream: the tool runs (renewing its lease), its answer goes through the
//! response phase of the interceptor chain, and how it ended is recorded — later, in the
//! background, when the store refuses it for now.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ServerResult};
use serde_json::Value;
use undolog_engine::{Call, ReadOutcome, Rejection, crash_points};
use undolog_types::{EffectId, LeaseToken, OrgId, Timestamp};

use undolog_identity::{Acting, Presented};

use super::{Caller, Outcome, ToolCall};
use crate::{
    Error, Gateway,
    engine_link::EngineLink,
    interceptors::{self, ResponseVerdict},
    metrics::UpstreamOutcome,
    results, traces,
    upstream::UpstreamError,
};

impl Gateway {
    /// Runs the tool upstream for an effect the engine handed out, puts the answer through the
    /// response phase, and records how it went (with the chain verdicts).
    pub(super) async fn execute(
        &self,
        call: &ToolCall,
        run: Run<'_>,
        caller: &Caller,
    ) -> Result<Outcome, Error> {
        let Run {
            upstream,
            upstream_name,
            effect_id,
            read_only,
            idempotent,
            recording,
            context,
            request_record,
            schema,
        } = run;
        let conn = self.upstreams.connection(upstream);
        let mut params = CallToolRequestParams::new(upstream_name.to_owned());
        params.arguments = Some(call.args.as_map().clone());
        params.meta = call.meta.clone();
        if let Some(round) = &call.round {
            params.input_responses = round.responses.clone();
            params.request_state = round.state.clone();
        }
        let traced =
            (self.traces).upstream_call(upstream_name, &conn.config.name, &mut params.meta);
        let sent_at = std::time::Instant::now();
        let ticket = caller
            .requester
            .clone()
            .map(|requester| conn.relay.register(requester, params.meta.as_ref()));
        let send = async || {
            let sent = conn.call_tool(
                caller.era,
                &caller.cancel,
                ticket.as_ref(),
                params.clone(),
                caller.upstream_meta.clone(),
                schema,
            );
            match recording {
                // Nothing recorded, so no lease to keep.
                Recording::After(..) => sent.await,
                // The lease is renewed while the upstream works: it runs out only if we die.
                Recording::Owned(token) => {
                    let engine = &self.engine;
                    engine
                        .while_running(call.acting(), effect_id, token, sent)
                        .await
                }
            }
        };
        crash_points::crash_point("call::after_intent");
        let mut answer = send().await;
        if let Err(e) = &answer
            && idempotent
            && e.may_have_run()
            && !matches!(e, UpstreamError::Cancelled)
        {
            // Running it twice is harmless, so a lost answer is asked for once more.
            tracing::info!(%effect_id, error = %e, "answer lost; the idempotent call is sent once more");
            answer = send().await;
        }
        let answered = UpstreamOutcome::of(&answer);
        self.metrics.upstream(upstream, answered, sent_at.elapsed());
        if let Some(cx) = traced {
            let failure = (answered != UpstreamOutcome::Answered).then(|| answered.as_str());
            traces::end_call(&cx, failure, Vec::new());
        }
        let failed = |error: String, result: Option<Value>| Outcome::Failed {
            effect_id,
            error,
            result,
            replayed: false,
        };
        let (mut blocked, mut answered, mut response_record) = (None, None, None);
        let outcome = match answer {
            Ok(ServerResult::CallToolResult(result)) => {
                let result = results::stored(&result);
                let response = self.interceptors.tool_response(&result, context);
                answered = match self.traces.interceptors("response", response).await {
                    // No chain looks at results: the client gets the result as it is logged.
                    None => None,
                    Some(ResponseVerdict::Pass { result, record }) => {
                        response_record = record;
                        Some(result)
                    }
                    Some(ResponseVerdict::Blocked { error, record }) => {
                        blocked = Some(error);
                        response_record = Some(record);
                        None
                    }
                };
                // The log keeps what the upstream answered; the chains' verdicts go apart.
                match results::tool_error(&result) {
                    Some(error) => failed(error, Some(result)),
                    None => Outcome::Executed { effect_id, result },
                }
            }
            Ok(ServerResult::InputRequiredResult(asked)) => Outcome::InputRequired {
                effect_id,
                result: serde_json::to_value(&asked).unwrap_or(Value::Null),
            },
            // Recorded when the upstream's task ends; the effect stays pending (its lease renewed)
            // while the gateway follows it.
            Ok(ServerResult::CreateTaskResult(created)) => match recording {
                Recording::Owned(token) => Outcome::UpstreamTask {
                    effect_id,
                    lease_token: token.clone(),
                    upstream,
                    task_id: created.task.task_id,
                    poll: Duration::from_millis(created.task.poll_interval_ms.unwrap_or(1000)),
                },
                // Such calls are not sent unrecorded (see `read_outcome`).
                Recording::After(..) => failed(
                    "the upstream made a task of a call sent without a record".into(),
                    None,
                ),
            },
            Ok(_) => failed(
                "the upstream answered in a form this gateway does not know".into(),
                None,
            ),
            // The upstream's own JSON-RPC error (invalid params, a capability the client lacks...)
            // is the client's answer too, code and data unchanged.
            Err(UpstreamError::Refused { error, .. }) => Outcome::Refused { effect_id, error },
            // Not sent: nothing ran. Recorded rejected, so an identical retry runs afresh once
            // the upstream is back (a failure would be replayed to it forever).
            Err(UpstreamError::Unavailable { upstream, reason }) => {
                let verdicts = || interceptors::verdicts(request_record, None);
                let why = format!("upstream `{upstream}` cannot be reached: {reason}");
                let refused = match recording {
                    Recording::After(sent, at) => {
                        let record = || (ReadOutcome::NotSent(why.clone()), verdicts());
                        self.record_read(call, (sent, at), effect_id, record)
                            .await?
                    }
                    Recording::Owned(token) => {
                        let engine = &self.engine;
                        let recorded =
                            engine.not_sent(call.acting(), effect_id, token, why, verdicts());
                        if let Err(e) = recorded.await {
                            tracing::warn!(%effect_id, error = %e, "a call not sent is not recorded");
                        }
                        None
                    }
                };
                if let Some(refused) = refused {
                    return Ok(refused); // its session closed meanwhile
                }
                return Err(Error::NotSent {
                    effect_id,
                    upstream,
                    reason,
                });
            }
            Err(e) if e.may_have_run() && !read_only => Outcome::InDoubt {
                effect_id,
                message: format!(
                    "{e}. The tool may or may not have run there, so the call is in doubt: an \
                     operator records what happened (GET /v1/effects/in_doubt), and it is not run \
                     again on a guess"
                ),
                replayed: false,
            },
            Err(e) => failed(e.to_string(), None),
        };
        crash_points::crash_point("call::before_commit");
        let verdicts = interceptors::verdicts(request_record, response_record.as_ref());
        if let Recording::After(sent, at) = recording {
            // Read only: one record, finished. If the store cannot take it, nothing is recorded
            // and a retry is harmless (503, as for any call the store refused).
            let record = || (read_outcome(&outcome), verdicts.clone());
            let refused = self.record_read(call, (sent, at), effect_id, record);
            if let Some(refused) = refused.await? {
                return Ok(refused);
            }
        } else if let Recording::Owned(token) = recording {
            let owner = (effect_id, token);
            let record = record_outcome(
                &self.engine,
                call.acting(),
                owner,
                &outcome,
                verdicts.clone(),
            );
            let recorded = self.store_op("record_outcome", record).await;
            // The tool has run (or failed) upstream: if the log cannot take the outcome, say so
            // plainly, and keep trying to record it (the store may be back in a moment); until
            // then the effect is pending, and in doubt for an operator once its lease ends.
            if let Err(e) = recorded {
                record_later(
                    self.engine.clone(),
                    (call.org.clone(), call.presented.clone()),
                    (effect_id, token.clone()),
                    outcome,
                    verdicts,
                );
                return Err(Error::OutcomeNotRecorded {
                    effect_id,
                    reason: e.to_string(),
                });
            }
        }
        crash_points::crash_point("call::before_reply");
        if let Some(error) = blocked {
            return Err(Error::Intercepted {
                effect_id: Some(effect_id),
                error,
            });
        }
        // The client gets what the response phase let through; the log keeps the upstream's.
        Ok(match (outcome, answered) {
            (Outcome::Executed { effect_id, .. }, Some(result)) => {
                Outcome::Executed { effect_id, result }
            }
            (
                Outcome::Failed {
                    effect_id,
                    error,
                    replayed,
                    ..
                },
                Some(result),
            ) => Outcome::Failed {
                effect_id,
                error,
                result: Some(result),
                replayed,
            },
            (outcome, _) => outcome,
        })
    }
    /// [`Gateway::execute`] for a run a task carries.
    pub(crate) async fn execute_owned(
        &self,
        call: &ToolCall,
        run: &OwnedRun,
        caller: &Caller,
    ) -> Result<Outcome, Error> {
        let borrowed = Run {
            upstream: run.upstream,
            upstream_name: &run.upstream_name,
            effect_id: run.effect_id,
            read_only: run.read_only,
            idempotent: run.idempotent,
            recording: Recording::Owned(&run.lease_token),
            context: &run.context,
            request_record: run.request_record.as_ref(),
            schema: None,
        };
        self.execute(call, borrowed, caller).await
    }

    /// Records a read-only call sent without a record (the engine call, and when it was sent),
    /// finished, with what `record` gives (its outcome and verdicts); the refusal to answer
    /// instead when its session closed meanwhile. A run closed the moment before is not the
    /// call's to keep: it is recorded in the principal's next run (see [`Gateway::rejoin`]).
    async fn record_read(
        &self,
        asked: &ToolCall,
        (call, started): (&Call, Timestamp),
        effect_id: EffectId,
        record: impl Fn() -> (ReadOutcome, Option<Value>),
    ) -> Result<Option<Outcome>, Error> {
        let recorded = |call: Call| {
            let (read, verdicts) = record();
            let acting = asked.acting();
            let record =
                (self.engine).record_read(acting, call, effect_id, started, read, verdicts);
            self.store_op("record_read", record)
        };
        let mut refused = recorded(call.clone()).await?;
        if let Some(Rejection::SessionClosed { .. }) = refused
            && let Some(run) = self.rejoin(&asked.session, &call.session).await?
        {
            refused = recorded(Call {
                session: run,
                ..call.clone()
            })
            .await?;
        }
        Ok(refused.map(|reason| Outcome::Rejected {
            effect_id: None,
            message: reason.message(),
        }))
    }
}

/// An engine-approved call's upstream run, owned, for a task to carry out in the background.
#[derive(Debug)]
pub(crate) struct OwnedRun {
    pub(crate) upstream: usize,
    pub(crate) upstream_name: String,
    pub(crate) effect_id: EffectId,
    /// The effect's lease token, which settles it.
    pub(crate) lease_token: LeaseToken,
    pub(crate) read_only: bool,
    pub(crate) idempotent: bool,
    pub(crate) context: undolog_interceptors::InvocationContext,
    pub(crate) request_record: Option<undolog_interceptors::ChainExecutionResult>,
}

/// Where and how one engine-approved call runs.
pub(super) struct Run<'a> {
    pub(super) upstream: usize,
    pub(super) upstream_name: &'a str,
    pub(super) effect_id: EffectId,
    /// A read-only call changes nothing: when its answer is lost it simply failed.
    pub(super) read_only: bool,
    /// Running it twice is harmless: a call whose answer was lost is sent once more.
    pub(super) idempotent: bool,
    pub(super) recording: Recording<'a>,
    pub(super) context: &'a undolog_interceptors::InvocationContext,
    pub(super) request_record: Option<&'a undolog_interceptors::ChainExecutionResult>,
    /// The tool's input schema, when known here: whether its arguments travel as headers too.
    pub(super) schema: Option<&'a rmcp::model::JsonObject>,
}

/// How a call's run is recorded.
#[derive(Debug, Clone, Copy)]
pub(super) enum Recording<'a> {
    /// Recorded before it was sent: the engine handed this process the effect with its lease
    /// token, which alone settles it.
    Owned(&'a LeaseToken),
    /// A read-only call sent with no record before it (the engine call, and when it was sent):
    /// it is recorded once, finished, after it ran.
    After(&'a Call, Timestamp),
}

/// How a read-only call without a record ended, for its one record.
fn read_outcome(outcome: &Outcome) -> ReadOutcome {
    match outcome {
        Outcome::Executed { result, .. } => ReadOutcome::Answered(result.clone()),
        Outcome::Failed { error, result, .. } => ReadOutcome::Failed {
            error: error.clone(),
            details: result.clone(),
        },
        Outcome::Refused { error, .. } => ReadOutcome::Failed {
            error: format!("the upstream refused the call: {}", error.message),
            details: Some(serde_json::json!({ "error": error })),
        },
        Outcome::InputRequired { result, .. } => ReadOutcome::InputRequired(result.clone()),
        // An upstream task needs a record to follow; such calls are not sent unrecorded.
        other => ReadOutcome::Failed {
            error: format!("an answer a call sent without a record cannot follow: {other:?}"),
            details: None,
        },
    }
}

/// Records how a call that was sent upstream ended.
async fn record_outcome(
    engine: &EngineLink,
    acting: Acting<'_>,
    (effect_id, token): (EffectId, &LeaseToken),
    outcome: &Outcome,
    verdicts: Option<Value>,
) -> Result<(), Error> {
    match outcome {
        Outcome::Executed { result, .. } => {
            let result = result.clone();
            engine
                .commit_with(acting, effect_id, token, result, verdicts)
                .await
        }
        Outcome::Failed { error, result, .. } => {
            // The tool's own error result, to replay as it was.
            let (error, result) = (error.clone(), result.clone());
            (engine.fail_with(acting, effect_id, token, error, result, verdicts)).await
        }
        Outcome::Refused { error, .. } => {
            let details = Some(serde_json::json!({ "error": error }));
            let error = format!("the upstream refused the call: {}", error.message);
            (engine.fail_with(acting, effect_id, token, error, details, verdicts)).await
        }
        // Not done and not to be undone: the client's answer is a call of its own.
        Outcome::InputRequired { result, .. } => {
            let request = result.clone();
            (engine.await_input(acting, effect_id, token, request, verdicts)).await
        }
        Outcome::InDoubt { message, .. } => {
            let message = message.clone();
            (engine.doubt(acting, effect_id, token, message, verdicts)).await
        }
        _ => Ok(()),
    }
}

/// How long an outcome the store refused is tried again: the store may be back in seconds (a
/// database restart, a disk freed); after this the effect is left in doubt for an operator.
const RECORD_LATER_FOR: Duration = Duration::from_secs(10 * 60);

/// Keeps trying to record `outcome` in the background, backing off from 250 ms to 5 s, until it
/// is recorded, the effect is no longer pending (an operator resolved it), or
/// [`RECORD_LATER_FOR`] has passed.
fn record_later(
    engine: EngineLink,
    (org, presented): (OrgId, Presented),
    (effect_id, token): (EffectId, LeaseToken),
    outcome: Outcome,
    verdicts: Option<Value>,
) {
    tokio::spawn(async move {
        let acting = Acting {
            org: &org,
            presented: &presented,
        };
        let deadline = tokio::time::Instant::now() + RECORD_LATER_FOR;
        let mut pause = Duration::from_millis(250);
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(pause).await;
            let owner = (effect_id, &token);
            match record_outcome(&engine, acting, owner, &outcome, verdicts.clone()).await {
                Ok(()) => {
                    tracing::info!(%effect_id, "an outcome the store had refused is recorded now");
                    return;
                }
                // Decided meanwhile, or taken over by another executor once the lease ran out.
                Err(Error::Engine(
                    undolog_engine::Error::NotPending { .. } | undolog_engine::Error::NotOwner(_),
                )) => return,
                Err(e) => tracing::debug!(%effect_id, error = %e, "outcome still not recorded"),
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
        tracing::warn!(%effect_id, "outcome never recorded; the call is in doubt for an operator");
    });
}
