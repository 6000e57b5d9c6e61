//! The engine over gRPC (`undolog.engine.v1.EffectEngine`) as a proxy in another language uses
//! it: the generated tonic client over a real HTTP/2 connection to `serve_engine`. Credentials
//! travel as metadata and are checked as the HTTP API checks them: the org comes from the key,
//! deciding needs an approver who is not the caller, undo and resolution need an admin.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};
use tonic::{Code, Request, transport::Channel};
use undolog_gateway::{
    ConfigSource, Gateway, GatewayConfig,
    grpc::proto::{
        self, CommitRequest, DecideRequest, EventsRequest, InterceptRequest, ListInDoubtRequest,
        ResolveRequest, Tier, UndoRequest, effect_engine_client::EffectEngineClient,
        intercept_reply::Decision, resolve_request::Verdict, undo_update::Update,
    },
};
use undolog_types::{OrgId, Role};

pub(crate) struct TestEngine {
    gateway: Arc<Gateway>,
    channel: Channel,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TestEngine {
    /// `undolog engine` in this process on a fresh SQLite file, with this TOML.
    pub(crate) async fn start(toml: &str) -> TestEngine {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("undolog.toml");
        std::fs::write(&file, toml).unwrap();
        let config = GatewayConfig::load(&ConfigSource {
            file: Some(file),
            listen: None,
            store: Some(format!("sqlite://{}", dir.path().join("u.db").display())),
            engine: None,
        })
        .unwrap();
        let gateway = Gateway::build(config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(undolog_gateway::serve_engine(
            gateway.clone(),
            listener,
            async move {
                let _ = stopped.await;
            },
        ));
        let channel = Channel::from_shared(url).unwrap().connect().await.unwrap();
        TestEngine {
            gateway,
            channel,
            _dir: dir,
            _stop: stop,
        }
    }

    pub(crate) async fn key(&self, org: &str, role: Role) -> String {
        let store = &**self.gateway.store().unwrap();
        let key = undolog_gateway::create_key(store, OrgId::new(org).unwrap(), role, None);
        key.await.unwrap().secret
    }

    pub(crate) fn client(&self) -> EffectEngineClient<Channel> {
        EffectEngineClient::new(self.channel.clone())
    }
}

/// `message` with `Authorization: Bearer key` in its metadata (none: no credentials).
pub(crate) fn authed<T>(key: Option<&str>, message: T) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(key) = key {
        let value = format!("Bearer {key}").parse().unwrap();
        request.metadata_mut().insert("authorization", value);
    }
    request
}

pub(crate) fn pay(session: &str, amount: u64) -> InterceptRequest {
    InterceptRequest {
        session_id: session.into(),
        tool: "pay".into(),
        arguments_json: json!({"to": "bob", "amount": amount}).to_string(),
        tier: Tier::Compensable as i32,
        compensation_json: Some(
            json!({"kind": "upstream", "tool": "transfer",
                   "args": {"from_account": "bob", "to_account": "alice", "amount": amount}})
            .to_string(),
        ),
        ..InterceptRequest::default()
    }
}

pub(crate) fn code(status: &tonic::Status) -> &str {
    status
        .metadata()
        .get("x-undolog-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intercept_commit_and_replay_with_the_org_of_the_key() {
    let engine = TestEngine::start("").await;
    let (acme, other) = (
        engine.key("acme", Role::Agent).await,
        engine.key("other", Role::Agent).await,
    );
    let mut client = engine.client();

    let refused = client
        .intercept(authed(None, pay("g-1", 5)))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let forged = client
        .intercept(authed(Some("ul_deadbeef_00"), pay("g-1", 5)))
        .await
        .unwrap_err();
    assert_eq!(forged.code(), Code::Unauthenticated, "{forged:?}");

    let answer = client.intercept(authed(Some(&acme), pay("g-1", 5))).await;
    let Some(Decision::Execute(run)) = answer.unwrap().into_inner().decision else {
        panic!("a new call runs");
    };
    // Another org can neither see nor commit acme's effect.
    let commit = |key: &str| {
        authed(
            Some(key),
            CommitRequest {
                effect_id: run.effect_id.clone(),
                result_json: json!({"paid": 5}).to_string(),
                verdicts_json: None,
                without_effect: false,
                lease_token: run.lease_token.clone(),
            },
        )
    };
    let stolen = client.commit(commit(&other)).await.unwrap_err();
    assert_eq!(stolen.code(), Code::NotFound, "{stolen:?}");
    let committed = client.commit(commit(&acme)).await.unwrap().into_inner();
    let effect = committed.effect.unwrap();
    assert_eq!(
        (effect.state.as_str(), effect.tool.as_str()),
        ("committed", "pay")
    );

    let again = client.intercept(authed(Some(&acme), pay("g-1", 5))).await;
    let Some(Decision::Replay(replay)) = again.unwrap().into_inner().decision else {
        panic!("the identical call replays");
    };
    assert_eq!(replay.effect_id, run.effect_id);
    let result: Value = serde_json::from_str(&replay.result_json).unwrap();
    assert_eq!(result, json!({"paid": 5}));
    // The same call in the other org is another call.
    let theirs = client.intercept(authed(Some(&other), pay("g-1", 5))).await;
    assert!(matches!(
        theirs.unwrap().into_inner().decision,
        Some(Decision::Execute(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_with_what_to_send() {
    let engine = TestEngine::start("").await;
    let key = engine.key("acme", Role::Agent).await;
    let mut client = engine.client();
    let cases: Vec<(&str, InterceptRequest, &str)> = vec![
        (
            "arguments not JSON",
            InterceptRequest {
                arguments_json: "{".into(),
                ..pay("g-2", 1)
            },
            "arguments_json: not JSON",
        ),
        (
            "arguments not an object",
            InterceptRequest {
                arguments_json: "[1]".into(),
                ..pay("g-2", 1)
            },
            "must be a JSON object",
        ),
        (
            "no tier",
            InterceptRequest {
                tier: Tier::Unspecified as i32,
                ..pay("g-2", 1)
            },
            "TIER_COMPENSABLE",
        ),
        (
            "an undeclared upstream compensation",
            InterceptRequest {
                compensation_json: Some(
                    json!({"kind": "upstream", "tool": "send_email", "args": {}}).to_string(),
                ),
                ..pay("g-2", 1)
            },
            "not declared as a compensation",
        ),
        (
            "a compensation on a read-only call",
            InterceptRequest {
                tier: Tier::ReadOnly as i32,
                ..pay("g-2", 1)
            },
            "only a compensable effect takes one",
        ),
        (
            "a bad session id",
            InterceptRequest {
                session_id: String::new(),
                ..pay("g-2", 1)
            },
            "session_id",
        ),
    ];
    for (name, request, says) in cases {
        let refused = client
            .intercept(authed(Some(&key), request))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{name}: {refused:?}");
        assert!(
            refused.message().contains(says),
            "{name}: {}",
            refused.message()
        );
    }
    let bad_id = client
        .commit(authed(
            Some(&key),
            CommitRequest {
                effect_id: "nope".into(),
                result_json: "{}".into(),
                verdicts_json: None,
                without_effect: false,
                lease_token: String::new(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(
        (bad_id.code(), code(&bad_id)),
        (Code::InvalidArgument, "bad_request")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_is_decided_by_another_approver_and_then_runs() {
    let engine = TestEngine::start("").await;
    let agent = engine.key("acme", Role::Agent).await;
    let approver = engine.key("acme", Role::Approver).await;
    let stranger = engine.key("other", Role::Approver).await;
    let mut client = engine.client();
    let mut events = client
        .events(authed(Some(&agent), EventsRequest {}))
        .await
        .unwrap()
        .into_inner();
    let mut theirs = client
        .events(authed(Some(&stranger), EventsRequest {}))
        .await
        .unwrap()
        .into_inner();

    let email = || InterceptRequest {
        session_id: "g-3".into(),
        tool: "send_email".into(),
        arguments_json: json!({"to": "ceo@example.com"}).to_string(),
        tier: Tier::Irreversible as i32,
        ..InterceptRequest::default()
    };
    let held = client.intercept(authed(Some(&agent), email())).await;
    let Some(Decision::AwaitingApproval(held)) = held.unwrap().into_inner().decision else {
        panic!("an irreversible call waits for a person");
    };
    let decide = |key: &str, via: Option<&str>| {
        authed(
            Some(key),
            DecideRequest {
                approval_id: held.approval_id.clone(),
                reason: Some("looks right".into()),
                via: via.map(str::to_owned),
            },
        )
    };
    for (who, key, via, want, why) in [
        (
            "the agent itself",
            &agent,
            None,
            Code::PermissionDenied,
            "forbidden",
        ),
        (
            "an approver of another org",
            &stranger,
            None,
            Code::NotFound,
            "unknown_approval",
        ),
        (
            "an approver naming no channel there is",
            &approver,
            Some("link:"),
            Code::InvalidArgument,
            "bad_request",
        ),
    ] {
        let refused = client.approve(decide(key, via)).await.unwrap_err();
        assert_eq!(
            (refused.code(), code(&refused)),
            (want, why),
            "{who}: {refused:?}"
        );
    }
    let approved = client
        .approve(decide(&approver, Some("link:email")))
        .await
        .unwrap()
        .into_inner();
    let approved = approved.approval.unwrap();
    assert_eq!(approved.state, "approved");
    let record: serde_json::Value = serde_json::from_str(&approved.record_json).unwrap();
    assert_eq!(record["decided_via"], "link:email", "{record}");
    let runs = client.intercept(authed(Some(&agent), email())).await;
    assert!(matches!(
        runs.unwrap().into_inner().decision,
        Some(Decision::Execute(_))
    ));

    // The org's stream heard the request and the decision; the other org's heard neither.
    let mut heard = Vec::new();
    while !heard.contains(&"approval_decided".to_owned()) {
        let next = tokio::time::timeout(Duration::from_secs(10), events.message()).await;
        heard.push(next.unwrap().unwrap().unwrap().r#type);
    }
    assert!(heard.contains(&"approval_required".to_owned()), "{heard:?}");
    let silent = tokio::time::timeout(Duration::from_millis(300), theirs.message()).await;
    assert!(silent.is_err(), "another org heard {silent:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_streams_each_step_and_the_report_and_needs_an_admin() {
    let engine = TestEngine::start("").await;
    let agent = engine.key("acme", Role::Agent).await;
    let admin = engine.key("acme", Role::Admin).await;
    let mut client = engine.client();
    for amount in [5, 7] {
        let answer = client
            .intercept(authed(Some(&agent), pay("g-4", amount)))
            .await;
        let Some(Decision::Execute(run)) = answer.unwrap().into_inner().decision else {
            panic!("runs");
        };
        // As the gateway's own link commits: nothing read back, the outcome recorded all the same.
        let commit = CommitRequest {
            effect_id: run.effect_id,
            result_json: json!({"paid": amount}).to_string(),
            verdicts_json: None,
            without_effect: true,
            lease_token: run.lease_token,
        };
        let reply = client.commit(authed(Some(&agent), commit)).await.unwrap();
        assert_eq!(reply.into_inner().effect, None, "no effect asked for");
    }
    let undo = || UndoRequest {
        session_id: "g-4".into(),
    };
    let refused = client.undo(authed(Some(&agent), undo())).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    let mut updates = client
        .undo(authed(Some(&admin), undo()))
        .await
        .unwrap()
        .into_inner();
    let mut steps = Vec::new();
    let report = loop {
        match updates.message().await.unwrap().unwrap().update.unwrap() {
            Update::Step(step) => steps.push(step),
            Update::Done(report) => break report,
        }
    };
    assert_eq!(report.state, "compensated", "{}", report.report_json);
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert!(
        steps.iter().all(|s| s.compensated && s.tool == "pay"),
        "{steps:?}"
    );
    // The stream told the steps in the order the report lists them (newest first).
    let report: Value = serde_json::from_str(&report.report_json).unwrap();
    assert_eq!(report["steps"][0]["effect_id"], steps[0].effect_id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_caller_went_silent_is_in_doubt_until_an_admin_resolves_it() {
    let engine = TestEngine::start("[limits]\nsdk_lease_secs = 1\n").await;
    let agent = engine.key("acme", Role::Agent).await;
    let admin = engine.key("acme", Role::Admin).await;
    let mut client = engine.client();
    let answer = client.intercept(authed(Some(&agent), pay("g-5", 3))).await;
    let Some(Decision::Execute(run)) = answer.unwrap().into_inner().decision else {
        panic!("runs");
    };
    // Nobody commits: once the lease ends the call may or may not have run.
    let listed = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let listed = client
            .list_in_doubt(authed(Some(&agent), ListInDoubtRequest {}))
            .await
            .unwrap()
            .into_inner()
            .effects;
        if !listed.is_empty() {
            break listed;
        }
    };
    assert_eq!(listed[0].effect_id, run.effect_id);
    let again = client.intercept(authed(Some(&agent), pay("g-5", 3))).await;
    let Some(Decision::Rejected(rejected)) = again.unwrap().into_inner().decision else {
        panic!("an identical call is not run on a guess");
    };
    assert!(rejected.in_doubt);

    let resolve = |key: &str| {
        authed(
            Some(key),
            ResolveRequest {
                effect_id: run.effect_id.clone(),
                verdict: Some(Verdict::CommittedResultJson(json!({"paid": 3}).to_string())),
            },
        )
    };
    let refused = client.resolve_in_doubt(resolve(&agent)).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let resolved = client
        .resolve_in_doubt(resolve(&admin))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resolved.effect.unwrap().state, "committed");
    let replayed = client.intercept(authed(Some(&agent), pay("g-5", 3))).await;
    assert!(matches!(
        replayed.unwrap().into_inner().decision,
        Some(Decision::Replay(proto::Replay { .. }))
    ));
}
