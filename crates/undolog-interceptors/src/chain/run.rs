//! One chain run: select, order, validate in parallel, mutate in sequence.

use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::Value;

use super::result::{
    AbortedAt, ChainEntry, ChainExecutionResult, ChainStatus, EntryError, ValidationSummary,
};
use super::{ChainRequest, Member};
use crate::descriptor::{InterceptorType, Mode};
use crate::error::Error;
use crate::event::Direction;
use crate::interceptor::Invocation;
use crate::registry::{DEFAULT_TIMEOUT, call};
use crate::wire::{Mutation, Outcome, Validation};

/// Why a stage stopped the chain.
struct Abort {
    status: ChainStatus,
    interceptor: Option<String>,
    reason: String,
}

/// An invocation's failure: the interceptor's own, or the whole chain's deadline.
enum Failure {
    Interceptor(Error),
    ChainDeadline,
}

struct Run<'a> {
    request: &'a ChainRequest,
    deadline: Instant,
    chain_timeout: Duration,
    payload: Value,
    results: Vec<ChainEntry>,
    summary: ValidationSummary,
}

pub(super) async fn execute(
    members: &[Member],
    chain_timeout: Duration,
    request: ChainRequest,
) -> ChainExecutionResult {
    let started = Instant::now();
    let phase = request.phase;
    let selected: Vec<&Member> = members
        .iter()
        .filter(|m| m.descriptor().intercepts(&request.event, phase))
        .collect();
    let validators: Vec<&Member> = selected
        .iter()
        .copied()
        .filter(|m| m.descriptor().kind == InterceptorType::Validation)
        .collect();
    let mut mutators: Vec<&Member> = selected
        .iter()
        .copied()
        .filter(|m| m.descriptor().kind == InterceptorType::Mutation)
        .collect();
    mutators.sort_by(|a, b| {
        let (a, b) = (a.descriptor(), b.descriptor());
        a.priority(phase)
            .total_cmp(&b.priority(phase))
            .then_with(|| a.name.cmp(&b.name))
    });

    let mut run = Run {
        request: &request,
        deadline: started + chain_timeout,
        chain_timeout,
        payload: request.payload.clone(),
        results: Vec::new(),
        summary: ValidationSummary::default(),
    };
    let abort = match request.direction {
        Direction::Sending => match run.mutate(&mutators).await {
            None => run.validate(&validators).await,
            abort => abort,
        },
        Direction::Receiving => match run.validate(&validators).await {
            None => run.mutate(&mutators).await,
            abort => abort,
        },
    };
    let total_duration_ms = started.elapsed().as_millis() as u64;
    let (status, final_payload, aborted_at) = match abort {
        None => (ChainStatus::Success, Some(run.payload), None),
        Some(a) => (
            a.status,
            None,
            Some(AbortedAt {
                interceptor: a.interceptor,
                phase,
                reason: a.reason,
            }),
        ),
    };
    ChainExecutionResult {
        status,
        event: request.event.clone(),
        phase,
        direction: request.direction,
        results: run.results,
        final_payload,
        validation_summary: run.summary,
        aborted_at,
        total_duration_ms,
    }
}

impl Run<'_> {
    /// Invoke one member on the current payload within its own and the chain's time.
    async fn invoke(&self, member: &Member, payload: Value) -> (Result<Outcome, Failure>, u64) {
        let started = Instant::now();
        let remaining = self.deadline.saturating_duration_since(started);
        let own = member
            .timeout
            .or(member.descriptor().timeout_ms.map(Duration::from_millis))
            .unwrap_or(DEFAULT_TIMEOUT);
        let invocation = Invocation {
            event: self.request.event.clone(),
            phase: self.request.phase,
            payload,
            config: member.config.clone(),
            context: self.request.context.clone(),
        };
        let result = match call(
            member.interceptor.as_ref(),
            invocation,
            Some(own.min(remaining)),
        )
        .await
        {
            Err(Error::Timeout { .. }) if remaining <= own => Err(Failure::ChainDeadline),
            other => other.map_err(Failure::Interceptor),
        };
        (result, started.elapsed().as_millis() as u64)
    }

    fn chain_deadline(&self) -> Abort {
        Abort {
            status: ChainStatus::Timeout,
            interceptor: None,
            reason: format!(
                "the chain ran out of its {} ms",
                self.chain_timeout.as_millis()
            ),
        }
    }

    /// Run every validator in parallel on the same payload; report a block only after all finished.
    async fn validate(&mut self, validators: &[&Member]) -> Option<Abort> {
        let runs = join_all(
            validators
                .iter()
                .map(|m| self.invoke(m, self.payload.clone())),
        )
        .await;
        let mut blocked: Option<Abort> = None;
        let mut failed: Option<Abort> = None;
        let mut deadline_hit = false;
        for (member, (result, duration_ms)) in validators.iter().zip(runs) {
            let d = member.descriptor();
            let mut entry = entry(member, duration_ms);
            let result = result.and_then(|o| match o {
                Outcome::Validation(v) => Ok(v),
                other => Err(wrong_type(d, &other)),
            });
            match result {
                Ok(v) => {
                    self.summary.add(&v);
                    if d.mode == Mode::Active && v.blocks() && blocked.is_none() {
                        blocked = Some(Abort {
                            status: ChainStatus::ValidationFailed,
                            interceptor: Some(d.name.clone()),
                            reason: denial_reason(&d.name, &v),
                        });
                    }
                    entry.validation = Some(v);
                }
                Err(Failure::ChainDeadline) => deadline_hit = true,
                Err(Failure::Interceptor(e)) => {
                    entry.skipped = d.fail_open || d.mode == Mode::Audit;
                    if !entry.skipped && failed.is_none() {
                        failed = Some(failure(&d.name, &e, ChainStatus::ExecutionFailed));
                    }
                    entry.error = Some(EntryError {
                        code: e.code(),
                        message: e.to_string(),
                    });
                }
            }
            self.results.push(entry);
        }
        if deadline_hit {
            return Some(self.chain_deadline());
        }
        blocked.or(failed)
    }

    /// Run mutators one after another; each sees the payload the previous one produced.
    async fn mutate(&mut self, mutators: &[&Member]) -> Option<Abort> {
        for member in mutators {
            let d = member.descriptor();
            let (result, duration_ms) = self.invoke(member, self.payload.clone()).await;
            let mut entry = entry(member, duration_ms);
            let result = result.and_then(|o| match o {
                Outcome::Mutation(m) => Ok(m),
                other => Err(wrong_type(d, &other)),
            });
            match result {
                Ok(Mutation {
                    modified,
                    payload,
                    info,
                }) => {
                    let apply = modified && d.mode == Mode::Active;
                    entry.applied = Some(apply);
                    entry.mutation = Some(Mutation {
                        modified,
                        payload: payload.clone(),
                        info,
                    });
                    if apply {
                        self.payload = payload;
                    }
                }
                Err(Failure::ChainDeadline) => {
                    self.results.push(entry);
                    return Some(self.chain_deadline());
                }
                Err(Failure::Interceptor(e)) => {
                    entry.skipped = d.fail_open || d.mode == Mode::Audit;
                    entry.error = Some(EntryError {
                        code: e.code(),
                        message: e.to_string(),
                    });
                    if !entry.skipped {
                        self.results.push(entry);
                        return Some(failure(&d.name, &e, ChainStatus::MutationFailed));
                    }
                }
            }
            self.results.push(entry);
        }
        None
    }
}

fn entry(member: &Member, duration_ms: u64) -> ChainEntry {
    let d = member.descriptor();
    ChainEntry {
        interceptor: d.name.clone(),
        kind: d.kind,
        mode: d.mode,
        validation: None,
        mutation: None,
        applied: None,
        error: None,
        skipped: false,
        duration_ms,
    }
}

fn failure(name: &str, error: &Error, otherwise: ChainStatus) -> Abort {
    // A remote interceptor's own timeout arrives as JSON-RPC −32000.
    let status = if error.code() == crate::error::TIMEOUT {
        ChainStatus::Timeout
    } else {
        otherwise
    };
    Abort {
        status,
        interceptor: Some(name.to_string()),
        reason: error.to_string(),
    }
}

fn denial_reason(name: &str, v: &Validation) -> String {
    let messages: Vec<&str> = v.messages.iter().map(|m| m.message.as_str()).collect();
    if messages.is_empty() {
        format!("{name} rejected the message")
    } else {
        format!("{name}: {}", messages.join("; "))
    }
}

/// `call` already refuses an outcome of the wrong type; this keeps the chain total anyway.
fn wrong_type(d: &crate::descriptor::Descriptor, got: &Outcome) -> Failure {
    Failure::Interceptor(Error::WrongResultType {
        name: d.name.clone(),
        declared: d.kind.as_str(),
        got: got.kind().as_str(),
    })
}
