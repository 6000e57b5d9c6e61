//! Chain executor semantics beyond the fixtures: ordering, parallelism, severities, audit,
//! timeouts, config and error codes. Local interceptors only (the wire is covered elsewhere).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use undolog_interceptors::chain::ChainStatus;
use undolog_interceptors::wire::{Mutation, Severity, Validation, ValidationMessage};
use undolog_interceptors::{
    Chain, ChainRequest, Descriptor, Direction, Error, Interceptor, InterceptorType, Invocation,
    Member, Mode, Outcome, Phase, PriorityHint,
};

/// A test interceptor: waits, then validates with a fixed answer or appends its name to
/// `arguments.trail`.
#[derive(Debug)]
struct Scripted {
    d: Descriptor,
    delay: Duration,
    answer: Option<Validation>,
    crash: bool,
}

fn validator(name: &str, answer: Validation) -> Scripted {
    let d = Descriptor::new(
        name,
        InterceptorType::Validation,
        &["tools/*"],
        &[Phase::Request, Phase::Response],
    );
    Scripted {
        d,
        delay: Duration::ZERO,
        answer: Some(answer),
        crash: false,
    }
}

fn mutator(name: &str) -> Scripted {
    let d = Descriptor::new(
        name,
        InterceptorType::Mutation,
        &["tools/call"],
        &[Phase::Request, Phase::Response],
    );
    Scripted {
        d,
        delay: Duration::ZERO,
        answer: None,
        crash: false,
    }
}

impl Scripted {
    fn delayed(mut self, ms: u64) -> Self {
        self.delay = Duration::from_millis(ms);
        self
    }
    fn edit(mut self, f: impl FnOnce(&mut Descriptor)) -> Self {
        f(&mut self.d);
        self
    }
    fn crashing(mut self) -> Self {
        self.crash = true;
        self
    }
    fn arc(self) -> Arc<dyn Interceptor> {
        Arc::new(self)
    }
}

#[async_trait]
impl Interceptor for Scripted {
    fn descriptor(&self) -> &Descriptor {
        &self.d
    }

    async fn invoke(&self, inv: Invocation) -> Result<Outcome, Error> {
        tokio::time::sleep(self.delay).await;
        if self.crash {
            return Err(Error::Handler {
                name: self.d.name.clone(),
                reason: "scripted crash".into(),
            });
        }
        if let Some(answer) = &self.answer {
            return Ok(Outcome::Validation(answer.clone()));
        }
        let mut payload = inv.payload;
        payload["arguments"]["trail"]
            .as_array_mut()
            .expect("trail")
            .push(json!(self.d.name));
        Ok(Outcome::Mutation(Mutation::changed(payload)))
    }
}

fn call() -> Value {
    json!({"name": "echo", "arguments": {"trail": []}})
}

fn chain(members: Vec<Arc<dyn Interceptor>>) -> Chain {
    members
        .into_iter()
        .try_fold(Chain::new(), Chain::with)
        .expect("chain builds")
}

fn warn(message: &str) -> Validation {
    Validation {
        valid: false,
        severity: Some(Severity::Warn),
        messages: vec![ValidationMessage {
            path: None,
            message: message.into(),
            severity: Severity::Warn,
        }],
        info: None,
    }
}

#[tokio::test]
async fn mutators_run_by_priority_then_name() {
    let c = chain(vec![
        mutator("c").arc(),
        mutator("a").arc(),
        mutator("b")
            .edit(|d| {
                d.priority_hint = Some(PriorityHint::PerPhase {
                    request: Some(-1.0),
                    response: Some(5.0),
                })
            })
            .arc(),
    ]);
    let r = c
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    assert_eq!(
        r.final_payload.unwrap()["arguments"]["trail"],
        json!(["b", "a", "c"])
    );
    let r = c
        .execute(ChainRequest::new("tools/call", Phase::Response, call()))
        .await;
    assert_eq!(
        r.final_payload.unwrap()["arguments"]["trail"],
        json!(["a", "c", "b"])
    );
}

#[tokio::test]
async fn every_validation_completes_before_a_rejection_and_validators_run_in_parallel() {
    let c = chain(vec![
        validator("fast-deny", Validation::deny("no")).arc(),
        validator("slow-warn", warn("hmm")).delayed(150).arc(),
        validator("slow-pass", Validation::pass())
            .delayed(150)
            .arc(),
    ]);
    let started = Instant::now();
    let r = c
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    assert!(
        started.elapsed() < Duration::from_millis(290),
        "validators ran one after another"
    );
    assert_eq!(r.status, ChainStatus::ValidationFailed);
    assert_eq!(r.results.len(), 3);
    assert_eq!(
        (r.validation_summary.errors, r.validation_summary.warnings),
        (1, 1)
    );
    assert_eq!(
        r.aborted_at.unwrap().interceptor.as_deref(),
        Some("fast-deny")
    );
    assert!(
        r.final_payload.is_none(),
        "an aborted chain lets nothing through"
    );
}

#[tokio::test]
async fn only_severity_error_blocks_and_audit_never_does() {
    let c = chain(vec![
        validator("warns", warn("careful")).arc(),
        validator("audited", Validation::deny("would block"))
            .edit(|d| d.mode = Mode::Audit)
            .arc(),
    ]);
    let r = c
        .execute(ChainRequest::new("tools/list", Phase::Request, call()))
        .await;
    assert_eq!(r.status, ChainStatus::Success);
    assert_eq!(
        r.validation_summary.errors, 1,
        "audit findings are still counted"
    );
}

#[tokio::test]
async fn audit_mutations_are_recorded_not_applied() {
    let c = chain(vec![
        mutator("shadow").edit(|d| d.mode = Mode::Audit).arc(),
        mutator("real").arc(),
    ]);
    let r = c
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    assert_eq!(
        r.final_payload.unwrap()["arguments"]["trail"],
        json!(["real"])
    );
    let shadow = r
        .results
        .iter()
        .find(|e| e.interceptor == "shadow")
        .unwrap();
    assert_eq!(shadow.applied, Some(false));
    // "real" sorts first, so the audit mutator saw (and would have extended) its output.
    assert_eq!(
        shadow.mutation.as_ref().unwrap().payload["arguments"]["trail"],
        json!(["real", "shadow"])
    );
}

#[tokio::test]
async fn direction_decides_the_order_of_stages() {
    let needs_mark = validator("needs-mark", Validation::deny("unmarked"));
    #[derive(Debug)]
    struct MarkCheck(Scripted);
    #[async_trait]
    impl Interceptor for MarkCheck {
        fn descriptor(&self) -> &Descriptor {
            &self.0.d
        }
        async fn invoke(&self, inv: Invocation) -> Result<Outcome, Error> {
            let marked = inv.payload["arguments"]["trail"]
                .as_array()
                .is_some_and(|t| !t.is_empty());
            Ok(Outcome::Validation(if marked {
                Validation::pass()
            } else {
                Validation::deny("unmarked")
            }))
        }
    }
    let c = chain(vec![Arc::new(MarkCheck(needs_mark)), mutator("mark").arc()]);
    let sending = c
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    assert_eq!(sending.status, ChainStatus::Success);
    let receiving = c
        .execute(
            ChainRequest::new("tools/call", Phase::Request, call())
                .with_direction(Direction::Receiving),
        )
        .await;
    assert_eq!(receiving.status, ChainStatus::ValidationFailed);
}

#[tokio::test]
async fn per_interceptor_timeouts_fail_closed_unless_fail_open() {
    let slow = |fail_open| {
        validator("slow", Validation::pass())
            .delayed(500)
            .edit(|d| {
                d.timeout_ms = Some(30);
                d.fail_open = fail_open;
            })
            .arc()
    };
    let r = chain(vec![slow(false)])
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    assert_eq!(r.status, ChainStatus::Timeout);
    assert_eq!(r.to_error().unwrap().code.0, -32000);
    let r = chain(vec![slow(true)])
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    assert_eq!(r.status, ChainStatus::Success);
    assert!(r.results[0].skipped && r.results[0].error.is_some());
}

#[tokio::test]
async fn the_whole_chain_has_a_deadline() {
    let c = chain(vec![
        mutator("m1").delayed(60).arc(),
        mutator("m2").delayed(60).arc(),
    ])
    .with_timeout(Duration::from_millis(90));
    let r = c
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    assert_eq!(r.status, ChainStatus::Timeout);
    assert_eq!(r.aborted_at.unwrap().interceptor, None);
}

#[tokio::test]
async fn failures_map_to_json_rpc_codes() {
    let deny = chain(vec![validator("deny", Validation::deny("no")).arc()]);
    let r = deny
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    let error = r.to_error().unwrap();
    assert_eq!(error.code.0, -32602);
    assert!(error.message.contains("deny: no"), "{}", error.message);
    let crash = chain(vec![mutator("boom").crashing().arc()]);
    let r = crash
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    assert_eq!(
        (r.status, r.to_error().unwrap().code.0),
        (ChainStatus::MutationFailed, -32603)
    );
    let crash = chain(vec![validator("boom", Validation::pass()).crashing().arc()]);
    let r = crash
        .execute(ChainRequest::new("tools/call", Phase::Request, call()))
        .await;
    assert_eq!(
        (r.status, r.to_error().unwrap().code.0),
        (ChainStatus::ExecutionFailed, -32603)
    );
}

#[tokio::test]
async fn only_matching_events_and_phases_run() {
    let c = chain(vec![
        validator("deny", Validation::deny("no"))
            .edit(|d| d.hooks.retain(|h| h.phase == Phase::Response))
            .arc(),
    ]);
    assert!(
        c.execute(ChainRequest::new("tools/call", Phase::Request, call()))
            .await
            .is_allowed()
    );
    assert!(
        c.execute(ChainRequest::new("prompts/get", Phase::Response, call()))
            .await
            .is_allowed()
    );
    assert!(
        !c.execute(ChainRequest::new("tools/list", Phase::Response, call()))
            .await
            .is_allowed()
    );
}

#[test]
fn config_is_checked_when_a_member_joins() {
    let with_schema = || {
        mutator("configured")
            .edit(|d| d.config_schema = Some(json!({"type": "object", "required": ["level"]})))
            .arc()
    };
    let mut c = Chain::new();
    let err = c
        .push(Member::new(with_schema()).with_config(json!({})))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
    c.push(Member::new(with_schema()).with_config(json!({"level": 2})))
        .unwrap();
    assert!(matches!(
        c.push(Member::new(with_schema())),
        Err(Error::DuplicateName(_))
    ));
}
