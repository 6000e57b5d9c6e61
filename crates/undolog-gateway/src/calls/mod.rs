//! The tool-call path every surface shares (MCP, REST): classify, ask the engine, run the tool
//! upstream when told to, and record the outcome — in hold mode, waiting for a person first.
//!
//! Here: what a call is ([`ToolCall`], [`Caller`], [`Outcome`]) and its way from the surface to
//! the engine's decision. `waiting` waits for an identical call in flight or a person's decision;
//! `execute` runs an approved call upstream and records how it ended.

mod execute;
mod outcome;
mod waiting;

pub(crate) use execute::OwnedRun;
use execute::{Recording, Run};
pub(crate) use outcome::Outcome;

use std::{future::Future, sync::Arc, time::Duration};

use futures::FutureExt as _;
use opentelemetry::{KeyValue, context::FutureExt as _};
use tracing::Instrument as _;

use rmcp::{
    ErrorData,
    model::{InputResponses, RequestMetaObject},
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use undolog_engine::{Call, Intercept, Rejection};
use undolog_types::{ApprovalId, ApprovalState, Args, EffectId, OrgId, SessionId, Tier, Timestamp};

use undolog_interceptors::builtin::secrets::redact_value;

use undolog_identity::{Acting, Presented};

use crate::{
    Error, Gateway,
    config::{ApprovalMode, TaskSupport},
    interceptors::{self, RequestVerdict, ResponseVerdict},
    results,
    runs::CallSession,
    tasks::Start,
    traces::{self, CallRequest},
    upstream::{Era, Requester},
};

/// One tool call as a surface received it.
#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    pub(crate) org: OrgId,
    pub(crate) session: CallSession,
    /// The exposed tool name.
    pub(crate) tool: String,
    pub(crate) args: Args,
    pub(crate) idempotency_key: Option<String>,
    /// A step number, part of the signature: a new step runs an identical call again.
    pub(crate) step: Option<u64>,
    /// The MCP request's `_meta` (progress token and the like), passed upstream.
    pub(crate) meta: Option<RequestMetaObject>,
    /// A retry that answers an upstream's `input_required` round (2026-07-28), passed upstream.
    pub(crate) round: Option<InputRound>,
    /// Who made the call (the principal's actor), recorded with its approval for four eyes.
    pub(crate) caller: String,
    /// The credentials it came with, presented to a remote engine for each of its requests.
    pub(crate) presented: Presented,
    /// How long the client waits for an answer, when it said so: a call identical to one in
    /// flight answers "still running" before then.
    pub(crate) wait: Option<Duration>,
}

/// What a 2026-07-28 client sends back after an `input_required` answer: the responses to the
/// upstream's input requests and the state it echoes. Each distinct round is its own effect.
#[derive(Debug, Clone, Default)]
pub(crate) struct InputRound {
    pub(crate) responses: Option<InputResponses>,
    pub(crate) state: Option<String>,
}

impl InputRound {
    /// `None` when the request carries neither field (a first round, or no round at all).
    pub(crate) fn of(responses: Option<InputResponses>, state: Option<String>) -> Option<Self> {
        (responses.is_some() || state.is_some()).then_some(InputRound { responses, state })
    }

    /// The key that tells this round's effect from the first call's and from other rounds' of
    /// any call (an identical retry of the same round replays, as any identical call does).
    fn key(&self, tool: &str, args: &Args) -> String {
        let both = serde_json::json!({
            "tool": tool,
            "arguments": args.as_map(),
            "inputResponses": self.responses,
            "requestState": self.state,
        });
        // Numbers a double cannot carry exactly fall back to serde's text: still one key per round.
        let canonical =
            undolog_types::canonical::to_string(&both).unwrap_or_else(|_| both.to_string());
        format!(
            "mcp-input-round:{}",
            blake3::hash(canonical.as_bytes()).to_hex()
        )
    }
}

impl ToolCall {
    /// Whom the engine requests of this call act for.
    pub(crate) fn acting(&self) -> Acting<'_> {
        Acting {
            org: &self.org,
            presented: &self.presented,
        }
    }

    /// The call as the engine sees it, in `session`, classified by `policy`.
    fn to_engine(&self, session: &SessionId, policy: undolog_engine::ToolPolicy) -> Call {
        let call = Call::new(
            self.org.clone(),
            session.clone(),
            self.tool.clone(),
            self.args.clone(),
            policy,
        )
        .with_caller(self.caller.clone());
        let call = match self.wait {
            Some(wait) => call.with_wait(wait),
            None => call,
        };
        let call = match self.step {
            Some(step) => call.with_step(step),
            None => call,
        };
        let round = self.round.as_ref().map(|r| r.key(&self.tool, &self.args));
        match self.idempotency_key.clone().or(round) {
            Some(key) => call.with_idempotency_key(key),
            None => call,
        }
    }
}

/// Who asked, for relaying progress and server-to-client requests, and for cancellation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    /// The client declared the tasks extension: a call that waits or runs long may answer
    /// with a task.
    pub(crate) tasks: bool,
    /// This call already runs as a task (in the background): it answers when done.
    pub(crate) in_task: bool,
    /// How long a held call waits for a person, instead of `approvals.hold_secs`.
    pub(crate) hold: Option<Duration>,
    /// The MCP client request, when the call came over MCP.
    pub(crate) requester: Option<Requester>,
    pub(crate) cancel: CancellationToken,
    /// Answer "awaiting approval" at once even in hold mode (the REST surface).
    pub(crate) never_hold: bool,
    /// The client's protocol era, which the upstream request speaks too.
    pub(crate) era: Era,
    /// Per-request metadata that speaks for the client upstream (2026-07-28: its capabilities,
    /// so the upstream asks only for input the client can give).
    pub(crate) upstream_meta: Option<RequestMetaObject>,
}

/// The protocol revision of the client's request: its `_meta` says it (2026-07-28), or its
/// session negotiated it.
fn protocol_version(call: &ToolCall, caller: &Caller) -> Option<String> {
    let stated = call
        .meta
        .as_ref()
        .and_then(RequestMetaObject::protocol_version);
    let spoken = || caller.requester.as_ref()?.protocol_version.clone();
    stated.or_else(spoken).map(|v| v.to_string())
}

impl Gateway {
    /// Runs one tool call through the engine.
    ///
    /// The interceptor chain sees the request first: a blocked call is recorded as a rejected
    /// effect and never reaches the engine's decision or the upstream; a mutated call goes on
    /// with the mutated arguments (signed, recorded and sent as mutated).
    pub(crate) async fn call_tool(
        self: &Arc<Self>,
        call: ToolCall,
        caller: &Caller,
    ) -> Result<Outcome, Error> {
        let started = std::time::Instant::now();
        let trace = self.traces.tool_call(&CallRequest {
            tool: &call.tool,
            meta: call.meta.as_ref(),
            protocol_version: protocol_version(&call, caller),
            request_id: caller.requester.as_ref().map(|r| r.request.to_string()),
        });
        let span = tracing::info_span!(
            "call",
            tool = %call.tool,
            session = tracing::field::Empty,
            effect = tracing::field::Empty,
            trace_id = tracing::field::Empty,
        );
        if let Some(id) = traces::trace_id(&trace) {
            span.record("trace_id", id);
        }
        let tool = call.tool.clone();
        let org = call.org.clone();
        let (tier, answer) = self
            .routed_call(call, caller)
            .with_context(trace.clone())
            .instrument(span.clone())
            .await;
        let took = started.elapsed();
        let outcome = crate::metrics::outcome(&answer);
        let effect = match &answer {
            Ok(done) => done.effect_id(),
            Err(e) => e.effect_id(),
        };
        // Nothing is formatted for a span no log line will show, or a trace nobody exports.
        if let Some(effect) = effect
            && !span.is_disabled()
        {
            span.record("effect", effect.to_string());
        }
        span.in_scope(|| tracing::debug!(outcome, ms = took.as_millis() as u64, "tool call"));
        if self.traces.exporting() {
            let failure = match &answer {
                Ok(Outcome::Failed { .. }) => Some("tool_error"),
                Ok(Outcome::InDoubt { .. }) => Some("in_doubt"),
                Ok(Outcome::Rejected { .. }) => Some("rejected"),
                Ok(Outcome::Refused { .. }) => Some("upstream_error"),
                Ok(_) => None,
                Err(e) => Some(e.code()),
            };
            let mut attributes = vec![KeyValue::new("undolog.outcome", outcome)];
            if let Some(effect) = effect {
                attributes.push(KeyValue::new("undolog.effect.id", effect.to_string()));
            }
            traces::end_call(&trace, failure, attributes);
        }
        // The catalog's tool names alone are labels: `tier` is known only for them.
        let tool = tier.map(|_| tool);
        self.metrics.call(tool, tier, &answer, took);
        (self.overview).record(&org, outcome, took, Timestamp::now());
        answer
    }

    /// [`Gateway::call_tool`] once traced: the tool's upstream, its tier (when it has one) and
    /// how the call went.
    async fn routed_call(
        self: &Arc<Self>,
        call: ToolCall,
        caller: &Caller,
    ) -> (Option<Tier>, Result<Outcome, Error>) {
        let route = match self.upstreams.tool(caller.era, &call.tool).await {
            Ok(route) => route,
            Err(unlisted) => {
                let error = match unlisted.is_empty() {
                    true => Error::UnknownTool(call.tool.clone()),
                    false => Error::UpstreamUnavailable {
                        tool: call.tool.clone(),
                        upstreams: unlisted,
                    },
                };
                return (None, Err(error));
            }
        };
        let policy = self.classify(&call.tool, &route);
        let tier = policy.tier;
        (
            Some(tier),
            // Boxed: a call's future is moved whole at each await that makes it, and awaited
            // futures can take twice their size in the future around them; below this point
            // the call is one allocation, not copies at every layer above (the lab log, `bench/lab/`).
            Box::pin(self.classified_call(call, caller, route, policy)).await,
        )
    }

    /// [`Gateway::call_tool`] once the tool's upstream and policy are known.
    async fn classified_call(
        self: &Arc<Self>,
        mut call: ToolCall,
        caller: &Caller,
        route: Arc<crate::upstream::Route<rmcp::model::Tool>>,
        policy: undolog_engine::ToolPolicy,
    ) -> Result<Outcome, Error> {
        let (read_only, idempotent) = (policy.tier == Tier::ReadOnly, policy.idempotent);
        let task_support = self.task_support(&call.tool);
        if task_support == TaskSupport::Required && !caller.tasks && !caller.in_task {
            return Err(Error::TasksRequired(call.tool.clone()));
        }
        let as_task = caller.tasks && !caller.in_task;
        let session = self.join(&call.session).await?;
        tracing::Span::current().record("session", session.as_str());
        let mut context = interceptors::context(&call.org, &session, call.meta.as_ref());
        let request = self
            .interceptors
            .tool_request(&call.tool, &call.args, &context);
        let request_record = match self.traces.interceptors("request", request).await {
            RequestVerdict::Pass { args, record } => {
                call.args = args;
                record
            }
            RequestVerdict::Blocked { error, record } => {
                // The log keeps what was refused with every recognised secret replaced: a guard
                // that stopped a token must not leave it in the log instead.
                let mut args = Value::Object(call.args.as_map().clone());
                redact_value(&mut args);
                call.args = Args::try_from(args).map_err(undolog_engine::Error::from)?;
                let rejected = call.to_engine(&session, policy);
                let mut verdicts = serde_json::json!({ "request": record });
                redact_value(&mut verdicts);
                let why = error.message.to_string();
                let reject = (self.engine).reject(call.acting(), &rejected, why, Some(verdicts));
                let effect_id = self.store_op("reject", reject).await?;
                return Err(Error::Intercepted { effect_id, error });
            }
        };
        let mut engine_call = call.to_engine(&session, policy);
        // A read-only call changes nothing: it runs first and is recorded once, finished (one
        // write, committed with whatever else is being written), unless it needs what only a
        // record before it gives: an approval, a key or input round (replayed, told apart), a task.
        if read_only
            && !engine_call.policy.needs_approval()
            && engine_call.idempotency_key.is_none()
            && !caller.tasks
            && !caller.in_task
        {
            self.engine.validate(&engine_call)?;
            let run = Run {
                upstream: route.upstream,
                upstream_name: &route.name,
                effect_id: EffectId::generate(),
                read_only,
                idempotent,
                recording: Recording::After(&engine_call, self.engine.now()),
                context: &context,
                request_record: request_record.as_ref(),
                schema: Some(&route.item.input_schema),
            };
            return self.execute(&call, run, caller).await;
        }
        let (mut waited_for_approval, mut rejoined) = (false, false);
        loop {
            let intercept = self.intercept(&engine_call, &call, caller);
            let decision = self.store_op("intercept", intercept).await?;
            if let Intercept::Rejected {
                effect_id: None,
                reason: Rejection::SessionClosed { .. },
            } = decision
                && !rejoined
                && let Some(run) = self.rejoin(&call.session, &engine_call.session).await?
            {
                // Nothing was recorded: the call is decided again in the principal's next run.
                tracing::Span::current().record("session", run.as_str());
                context.session_id = Some(run.to_string());
                engine_call.session = run;
                rejoined = true;
                continue;
            }
            match decision {
                Intercept::Execute {
                    effect_id,
                    lease_token,
                    ..
                } if as_task && task_support != TaskSupport::Never => {
                    let run = OwnedRun {
                        upstream: route.upstream,
                        upstream_name: route.name.clone(),
                        effect_id,
                        lease_token,
                        read_only,
                        idempotent,
                        context: context.clone(),
                        request_record: request_record.clone(),
                    };
                    let within = self.task_after(&call.tool);
                    return self
                        .start_task(
                            effect_id,
                            call,
                            caller,
                            Start::Running(Box::new(run)),
                            within,
                        )
                        .await;
                }
                Intercept::Execute {
                    effect_id,
                    lease_token,
                    ..
                } => {
                    let run = Run {
                        upstream: route.upstream,
                        upstream_name: &route.name,
                        effect_id,
                        read_only,
                        idempotent,
                        recording: Recording::Owned(&lease_token),
                        context: &context,
                        request_record: request_record.as_ref(),
                        schema: Some(&route.item.input_schema),
                    };
                    let outcome = self.execute(&call, run, caller).await?;
                    if let Outcome::UpstreamTask { .. } = &outcome
                        && !caller.in_task
                    {
                        // The client declared tasks (the upstream would not make one otherwise):
                        // it gets the gateway's task, which follows the upstream's.
                        let start = Start::Following(Box::new(outcome));
                        return self
                            .start_task(effect_id, call, caller, start, Duration::ZERO)
                            .await;
                    }
                    return Ok(outcome);
                }
                Intercept::Replay { effect_id, result } => {
                    // The recorded answer goes through the response phase like a fresh one.
                    let response = self.interceptors.tool_response(&result, &context);
                    let result = match self.traces.interceptors("response", response).await {
                        None => result,
                        Some(ResponseVerdict::Pass { result, .. }) => result,
                        Some(ResponseVerdict::Blocked { error, .. }) => {
                            return Err(Error::Intercepted {
                                effect_id: Some(effect_id),
                                error,
                            });
                        }
                    };
                    return Ok(Outcome::Replayed { effect_id, result });
                }
                // The first outcome is kept: the tool's own error result when it gave one.
                Intercept::Failed {
                    effect_id,
                    error,
                    result,
                } => {
                    return Ok(Outcome::Failed {
                        effect_id,
                        error,
                        result: result.filter(|r| results::tool_error(r).is_some()),
                        replayed: true,
                    });
                }
                Intercept::Rejected {
                    effect_id: Some(effect_id),
                    reason: reason @ undolog_engine::Rejection::InDoubt,
                } => {
                    return Ok(Outcome::InDoubt {
                        effect_id,
                        message: reason.message(),
                        replayed: true,
                    });
                }
                Intercept::Rejected { effect_id, reason } => {
                    return Ok(Outcome::Rejected {
                        effect_id,
                        message: reason.message(),
                    });
                }
                Intercept::AwaitingApproval {
                    effect_id,
                    approval_id,
                    expires_at,
                } => {
                    if as_task {
                        let start = Start::Approval(approval_id);
                        return self
                            .start_task(effect_id, call, caller, start, Duration::ZERO)
                            .await;
                    }
                    let waiting = Outcome::AwaitingApproval {
                        effect_id,
                        approval_id,
                        expires_at,
                    };
                    // A task waits for the decision however the request would (deferring, a
                    // task's call would end with the approval still pending).
                    let deferred =
                        self.config.approvals.mode == ApprovalMode::Defer && !caller.in_task;
                    if deferred || caller.never_hold || waited_for_approval {
                        return Ok(waiting);
                    }
                    waited_for_approval = true;
                    match self.hold(&call, approval_id, caller).await? {
                        None => return Ok(waiting),
                        // Fail closed: the call this request held is denied, and it says why
                        // (asking the engine again would only open a new request).
                        Some(ApprovalState::Expired) => {
                            return Ok(Outcome::Rejected {
                                effect_id: Some(effect_id),
                                message: format!(
                                    "nobody decided on approval {approval_id} before it expired, \
                                     so the call was denied and did not run; calling it again \
                                     asks a person again"
                                ),
                            });
                        }
                        // Decided: the engine answers the identical call (runs it, or refuses it
                        // with the person's reason).
                        Some(_) => {}
                    }
                }
            }
        }
    }

    /// One store operation of a call (`intercept`, `record_read`...), timed and traced; a
    /// combinator, not an `async fn`, for the reason `Traces::within` gives.
    fn store_op<T>(
        &self,
        operation: &'static str,
        work: impl Future<Output = T>,
    ) -> impl Future<Output = T> {
        let started = std::time::Instant::now();
        (self.traces.store(operation, work))
            .inspect(move |_| self.metrics.store(operation, started.elapsed()))
    }

    /// How the calls of the tool exposed as `tool` run as tasks.
    fn task_support(&self, tool: &str) -> TaskSupport {
        self.config
            .tools
            .get(tool)
            .map(|t| t.task)
            .unwrap_or_default()
    }

    /// How long a call of `tool` may run before it becomes a task.
    fn task_after(&self, tool: &str) -> Duration {
        self.config
            .tools
            .get(tool)
            .and_then(|t| t.task_after)
            .unwrap_or(crate::config::DEFAULT_TASK_AFTER)
    }
}

#[cfg(test)]
mod tests;
