//! Tool calls as tasks (the 2026-07-28 tasks extension, SEP-2663), for clients that declare it.
//!
//! A call that waits for a person, or of a tool configured `task = "optional" | "required"`,
//! answers at once with a `CreateTaskResult` and goes on in the background. The task is the
//! call's effect: its id is the effect id, and the effect is in the log before the task is
//! answered, so `tasks/get` finds it at once and after a restart too. While this gateway runs
//! the call it also knows what the log does not: that the task waits for the client's input (an
//! upstream's `input_required` round, answered with `tasks/update`) or was cancelled.
//!
//! `tasks/cancel` cancels the upstream request of a running call, and withdraws the approval
//! request of a call still waiting for a person (nobody is asked any more).

mod follow;
mod view;

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rmcp::{
    ErrorData,
    model::{GetTaskResult, InputRequests, InputResponses, Task, TaskStatus},
};
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;
use undolog_types::{ApprovalId, EffectId, OrgId, Timestamp};

use crate::{
    Error, Gateway, Principal,
    calls::{Caller, InputRound, Outcome, OwnedRun, ToolCall},
};

/// How often a client is asked to poll.
const POLL_INTERVAL_MS: u64 = 500;

/// How long a finished task's live state is kept (its effect stays in the log for good).
const KEEP_FINISHED: Duration = Duration::from_secs(24 * 60 * 60);

/// The tasks this gateway runs.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    runs: Mutex<HashMap<EffectId, Arc<TaskRun>>>,
}

impl Tasks {
    /// Drops a run that never became a task (its call answered within the window).
    fn forget(&self, id: EffectId) {
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
}

/// One task this gateway runs: whose, and where it stands.
#[derive(Debug)]
pub(crate) struct TaskRun {
    org: OrgId,
    /// Who made the call (its principal's actor): the one, besides an admin, who may cancel it.
    owner: String,
    created_at: Timestamp,
    cancel: CancellationToken,
    state: Mutex<RunState>,
    /// Woken when `tasks/update` answers the last pending input request.
    answered: Notify,
    /// Where the call's outcome goes while the client still waits for it; taken (and dropped)
    /// when the client gets a task instead.
    answer: Mutex<Option<oneshot::Sender<Result<Outcome, Error>>>>,
}

#[derive(Debug, Clone)]
enum RunState {
    Working {
        message: Option<String>,
        updated_at: Timestamp,
    },
    /// The upstream asked for the client's input; `answers` are those given so far.
    InputRequired {
        requests: InputRequests,
        request_state: Option<String>,
        answers: InputResponses,
        updated_at: Timestamp,
    },
    Finished {
        outcome: Result<Outcome, ErrorData>,
        updated_at: Timestamp,
        at: Instant,
    },
    Cancelled {
        updated_at: Timestamp,
        at: Instant,
    },
}

impl TaskRun {
    fn set(&self, state: RunState) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = state;
    }

    fn state(&self) -> RunState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The client gets a task now, unless the outcome was answered already (then false).
    fn become_task(&self) -> bool {
        self.take_answer().is_some()
    }

    fn take_answer(&self) -> Option<oneshot::Sender<Result<Outcome, Error>>> {
        self.answer.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn finished_long_ago(&self) -> bool {
        match self.state() {
            RunState::Finished { at, .. } | RunState::Cancelled { at, .. } => {
                at.elapsed() > KEEP_FINISHED
            }
            _ => false,
        }
    }
}

/// How a task begins.
#[derive(Debug)]
pub(crate) enum Start {
    /// The call waits for a person's decision on this approval.
    Approval(ApprovalId),
    /// The engine let the call run: it runs upstream now.
    Running(Box<OwnedRun>),
    /// The call ran upstream, and the upstream made it a task of its own
    /// ([`Outcome::UpstreamTask`]): the gateway's task follows it.
    Following(Box<Outcome>),
}

impl Gateway {
    /// Runs `call` (whose effect is `effect_id`) in the background, and answers its outcome if
    /// it comes within `answer_within`, else a task that follows it (zero: a task at once). The
    /// call goes on with `caller`'s cancellation replaced by the task's.
    pub(crate) async fn start_task(
        self: &Arc<Self>,
        effect_id: EffectId,
        call: ToolCall,
        caller: &Caller,
        start: Start,
        answer_within: Duration,
    ) -> Result<Outcome, Error> {
        let now = Timestamp::now();
        let (answer, first) = oneshot::channel();
        let run = Arc::new(TaskRun {
            org: call.org.clone(),
            owner: call.caller.clone(),
            created_at: now,
            cancel: CancellationToken::new(),
            state: Mutex::new(RunState::Working {
                message: match &start {
                    Start::Approval(approval) => Some(awaiting(*approval)),
                    Start::Running(_) | Start::Following(_) => None,
                },
                updated_at: now,
            }),
            answered: Notify::new(),
            answer: Mutex::new(Some(answer)),
        });
        {
            let mut runs = self.tasks.runs.lock().unwrap_or_else(|p| p.into_inner());
            runs.retain(|_, r| !r.finished_long_ago());
            runs.insert(effect_id, run.clone());
        }
        let detached = Caller {
            // Progress and upstream requests reach the client while it waits for the answer;
            // a task announced at once has nobody waiting.
            requester: if answer_within.is_zero() {
                None
            } else {
                caller.requester.clone()
            },
            cancel: run.cancel.clone(),
            never_hold: false,
            hold: Some(self.config.approvals.timeout),
            in_task: true,
            ..caller.clone()
        };
        let gateway = self.clone();
        let task = gateway.run_task(effect_id, run.clone(), call, detached, start);
        tokio::spawn(task);
        let task = Outcome::Task {
            effect_id,
            created_at: now,
            ttl: self.task_ttl(),
        };
        if answer_within.is_zero() {
            run.become_task();
            return Ok(task);
        }
        let mut first = first;
        tokio::select! {
            outcome = &mut first => outcome.unwrap_or(Ok(task)),
            () = tokio::time::sleep(answer_within) => {
                if run.become_task() {
                    Ok(task)
                } else {
                    // The outcome came just now: the call answers after all.
                    first.await.unwrap_or(Ok(task))
                }
            }
            () = caller.cancel.cancelled() => {
                run.cancel.cancel();
                Err(Error::Cancelled)
            }
        }
    }

    /// The rest of a task's call: the decision it waits for, the input rounds its upstream
    /// asks for, to the end.
    async fn run_task(
        self: Arc<Self>,
        effect_id: EffectId,
        run: Arc<TaskRun>,
        call: ToolCall,
        caller: Caller,
        start: Start,
    ) {
        let (mut outcome, approval) = match start {
            Start::Approval(approval) => (
                self.call_tool_in_task(call.clone(), &caller).await,
                Some(approval),
            ),
            Start::Running(run_upstream) => (
                self.execute_owned(&call, &run_upstream, &caller).await,
                None,
            ),
            Start::Following(outcome) => (Ok(*outcome), None),
        };
        if let Some(answer) = run.take_answer() {
            if !matches!(outcome, Ok(Outcome::UpstreamTask { .. })) {
                // Answered within the window: the client has it; there is no task to follow.
                self.tasks.forget(effect_id);
                let _ = answer.send(outcome);
                return;
            }
            // The upstream made it a task: the client gets the gateway's at once.
            let _ = answer.send(Ok(Outcome::Task {
                effect_id,
                created_at: run.created_at,
                ttl: self.task_ttl(),
            }));
        }
        loop {
            outcome = match outcome {
                Ok(Outcome::UpstreamTask {
                    effect_id,
                    lease_token,
                    upstream,
                    task_id,
                    poll,
                }) => {
                    let task = follow::UpstreamTask {
                        effect_id,
                        lease_token,
                        upstream,
                        task_id,
                        poll,
                    };
                    self.follow(&run, &call, &caller, task).await
                }
                other => other,
            };
            let completed = matches!(outcome, Ok(Outcome::Executed { .. }));
            if run.cancel.is_cancelled() && !completed {
                if let Some(approval) = approval
                    && let Err(e) = self
                        .engine
                        .withdraw(call.acting(), approval, run.owner.clone())
                        .await
                {
                    tracing::debug!(%approval, error = %e, "the approval request was not withdrawn");
                }
                run.set(RunState::Cancelled {
                    updated_at: Timestamp::now(),
                    at: Instant::now(),
                });
                return;
            }
            let Ok(Outcome::InputRequired { result, .. }) = &outcome else {
                run.set(RunState::Finished {
                    outcome: outcome.map_err(|e| e.to_jsonrpc()),
                    updated_at: Timestamp::now(),
                    at: Instant::now(),
                });
                return;
            };
            let Some((requests, request_state)) = input_requests(result) else {
                run.set(RunState::Finished {
                    outcome: Err(ErrorData::internal_error(
                        "the upstream asked for input it did not name",
                        None,
                    )),
                    updated_at: Timestamp::now(),
                    at: Instant::now(),
                });
                return;
            };
            run.set(RunState::InputRequired {
                requests,
                request_state,
                answers: InputResponses::new(),
                updated_at: Timestamp::now(),
            });
            tokio::select! {
                () = run.answered.notified() => {}
                () = run.cancel.cancelled() => continue,
            }
            let RunState::InputRequired {
                answers,
                request_state,
                ..
            } = run.state()
            else {
                continue;
            };
            run.set(RunState::Working {
                message: None,
                updated_at: Timestamp::now(),
            });
            let mut round = call.clone();
            round.round = InputRound::of(Some(answers), request_state);
            outcome = self.call_tool_in_task(round, &caller).await;
        }
    }

    /// [`Gateway::call_tool`] from within a task, boxed: a call may start a task, whose run
    /// makes calls again, and the box is where that cycle of futures ends.
    fn call_tool_in_task<'a>(
        self: &'a Arc<Self>,
        call: ToolCall,
        caller: &'a Caller,
    ) -> Pin<Box<dyn Future<Output = Result<Outcome, Error>> + Send + 'a>> {
        Box::pin(self.call_tool(call, caller))
    }

    /// `tasks/get`: the task `task_id` of `org`, from what this gateway runs, else from the log.
    pub(crate) async fn task(
        &self,
        principal: &Principal,
        task_id: &str,
    ) -> Result<GetTaskResult, ErrorData> {
        let (org, acting) = (&principal.org, principal.acting());
        let id = task_id_of(task_id)?;
        if let Some(run) = self.live_task(org, id) {
            return Ok(GetTaskResult::new(view::of_run(id, &run, self.task_ttl())));
        }
        match self.engine.effect(acting, id).await {
            Ok(effect) => {
                let approval = match effect.approval {
                    Some(approval) => self.engine.approval(acting, approval).await.ok(),
                    None => None,
                };
                let ttl = self.task_ttl();
                let task = view::of_effect(&effect, approval.as_ref(), ttl, Timestamp::now());
                Ok(GetTaskResult::new(task))
            }
            Err(Error::Engine(undolog_engine::Error::UnknownEffect(_))) => Err(unknown(task_id)),
            Err(e) => Err(e.to_jsonrpc()),
        }
    }

    /// `tasks/cancel`: cancels the task's running call, or withdraws its approval request.
    /// Cancelling a finished task is acknowledged and changes nothing.
    pub(crate) async fn cancel_task(
        &self,
        principal: &Principal,
        task_id: &str,
    ) -> Result<(), ErrorData> {
        let id = task_id_of(task_id)?;
        if let Some(run) = self.live_task(&principal.org, id) {
            if run.owner != principal.actor()
                && !principal.role.includes(undolog_types::Role::Admin)
            {
                return Err(Error::Forbidden(format!(
                    "task {task_id} was started by {}; only it or an admin may cancel it",
                    run.owner
                ))
                .to_jsonrpc());
            }
            run.cancel.cancel();
            run.answered.notify_one();
            return Ok(());
        }
        // Not running here (it ended, or the gateway restarted): only a request for approval is
        // left to take back.
        let effect = match self.engine.effect(principal.acting(), id).await {
            Ok(effect) => effect,
            Err(Error::Engine(undolog_engine::Error::UnknownEffect(_))) => {
                return Err(unknown(task_id));
            }
            Err(e) => return Err(e.to_jsonrpc()),
        };
        if effect.state == undolog_types::EffectState::AwaitingApproval
            && let Some(approval) = effect.approval
        {
            let pending = self.engine.approval(principal.acting(), approval).await;
            let own = pending
                .as_ref()
                .is_ok_and(|a| a.requested_by.as_deref() == Some(principal.actor().as_str()));
            if own || principal.role.includes(undolog_types::Role::Admin) {
                self.engine
                    .withdraw(principal.acting(), approval, principal.actor())
                    .await
                    .map_err(|e| e.to_jsonrpc())?;
            }
        }
        Ok(())
    }

    /// `tasks/update`: answers to the input requests a task waits on; unknown or already
    /// answered keys are ignored. The task goes on once every request is answered. Only the
    /// caller who started the task may answer for it.
    pub(crate) async fn update_task(
        &self,
        principal: &Principal,
        task_id: &str,
        responses: InputResponses,
    ) -> Result<(), ErrorData> {
        let id = task_id_of(task_id)?;
        let Some(run) = self.live_task(&principal.org, id) else {
            return match self.engine.effect(principal.acting(), id).await {
                Ok(_) => Ok(()), // nothing waits for input: nothing to take
                Err(Error::Engine(undolog_engine::Error::UnknownEffect(_))) => {
                    Err(unknown(task_id))
                }
                Err(e) => Err(e.to_jsonrpc()),
            };
        };
        if run.owner != principal.actor() {
            return Err(Error::Forbidden(format!(
                "task {task_id} was started by {}; only it may answer for the task",
                run.owner
            ))
            .to_jsonrpc());
        }
        let mut state = run.state.lock().unwrap_or_else(|p| p.into_inner());
        if let RunState::InputRequired {
            requests,
            answers,
            updated_at,
            ..
        } = &mut *state
        {
            for (key, value) in responses {
                if requests.contains_key(&key) && !answers.contains_key(&key) {
                    answers.insert(key, value);
                }
            }
            *updated_at = Timestamp::now();
            if requests.keys().all(|k| answers.contains_key(k)) {
                run.answered.notify_one();
            }
        }
        Ok(())
    }

    /// How long, from its creation, a task stays known: the longest wait for a person, and a
    /// day after that.
    fn task_ttl(&self) -> Duration {
        self.config.approvals.timeout + KEEP_FINISHED
    }

    fn live_task(&self, org: &OrgId, id: EffectId) -> Option<Arc<TaskRun>> {
        let runs = self.tasks.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.get(&id).filter(|r| r.org == *org).cloned()
    }
}

/// The seed state of a task, as `CreateTaskResult` carries it.
pub(crate) fn seed(effect_id: EffectId, created_at: Timestamp, ttl: Duration) -> Task {
    let at = created_at.to_string();
    Task::new(effect_id.to_string(), TaskStatus::Working, at.clone(), at)
        .with_poll_interval_ms(POLL_INTERVAL_MS)
        .with_ttl_ms(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
}

fn awaiting(approval: ApprovalId) -> String {
    format!("waiting for a person to approve the call (approval {approval})")
}

fn task_id_of(task_id: &str) -> Result<EffectId, ErrorData> {
    task_id.parse().map_err(|_| unknown(task_id))
}

fn unknown(task_id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no task {task_id:?} in this org"), None)
}

/// The input requests and request state of an upstream's `input_required` answer.
fn input_requests(result: &Value) -> Option<(InputRequests, Option<String>)> {
    let requests: InputRequests =
        serde_json::from_value(result.get("inputRequests")?.clone()).ok()?;
    let state = result
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_owned);
    (!requests.is_empty()).then_some((requests, state))
}
