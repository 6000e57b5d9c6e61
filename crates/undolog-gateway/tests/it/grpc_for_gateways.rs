//! The RPCs a gateway in front of the engine asks (`serve --engine`) are open to anyone who can
//! reach the engine, so each is checked as the HTTP API checks the same act: no credential, no
//! answer; another org's records are not there; undoing takes an admin; a held call is
//! withdrawn by its own caller alone; a lease asked for is at most the SDK's.

use futures::future::BoxFuture;
use serde_json::json;
use tonic::{Code, Status};
use undolog_gateway::grpc::proto::{
    self, ApprovalRequest, AuthenticateRequest, EffectRequest, HealthRequest, ImplicitRunRequest,
    InterceptRequest, ListNotificationsRequest, ListSessionsRequest, NoteRequest,
    RecordReadRequest, RejectRequest, RenewLeaseRequest, SessionRequest, Tier, UndoHeld,
    UndoStepRequest, UndoTried, WaitRequest, effect_engine_client::EffectEngineClient,
    intercept_reply::Decision,
};
use undolog_types::Role;

use crate::grpc::{TestEngine, authed, pay};

type Client = EffectEngineClient<tonic::transport::Channel>;
type Asked = BoxFuture<'static, Result<(), Status>>;

/// Every gateway RPC, asked with `key` about `effect`, `approval` and session `session`.
fn every_rpc(client: &Client, key: Option<&str>, ids: &Ids) -> Vec<(&'static str, Asked)> {
    let (key, ids) = (key.map(str::to_owned), ids.clone());
    let ask = |name: &'static str, f: fn(Client, Option<String>, Ids) -> Asked| {
        (name, f(client.clone(), key.clone(), ids.clone()))
    };
    vec![
        ask("Authenticate", |mut c, k, _| {
            Box::pin(async move {
                c.authenticate(authed(k.as_deref(), AuthenticateRequest {}))
                    .await
                    .map(drop)
            })
        }),
        ask("ImplicitRun", |mut c, k, _| {
            let request = ImplicitRunRequest { idle_ms: 60_000 };
            Box::pin(async move {
                c.implicit_run(authed(k.as_deref(), request))
                    .await
                    .map(drop)
            })
        }),
        ask("RecordRead", |mut c, k, ids| {
            let request = RecordReadRequest {
                call: Some(read(&ids.session)),
                effect_id: uuid::Uuid::now_v7().to_string(),
                started_at_ms: 0,
                outcome: Some(proto::record_read_request::Outcome::ResultJson("{}".into())),
                verdicts_json: None,
            };
            Box::pin(async move { c.record_read(authed(k.as_deref(), request)).await.map(drop) })
        }),
        ask("Reject", |mut c, k, ids| {
            let request = RejectRequest {
                call: Some(read(&ids.session)),
                reason: "refused by a test".into(),
                verdicts_json: None,
            };
            Box::pin(async move { c.reject(authed(k.as_deref(), request)).await.map(drop) })
        }),
        ask("Doubt", |mut c, k, ids| {
            let request = note(&ids.effect);
            Box::pin(async move { c.doubt(authed(k.as_deref(), request)).await.map(drop) })
        }),
        ask("RenewLease", |mut c, k, ids| {
            let request = RenewLeaseRequest {
                effect_id: ids.effect,
                lease_token: MADE_UP_TOKEN.into(),
            };
            Box::pin(async move { c.renew_lease(authed(k.as_deref(), request)).await.map(drop) })
        }),
        ask("GetEffect", |mut c, k, ids| {
            let request = EffectRequest {
                effect_id: ids.effect,
            };
            Box::pin(async move { c.get_effect(authed(k.as_deref(), request)).await.map(drop) })
        }),
        ask("GetApproval", |mut c, k, ids| {
            let request = ApprovalRequest {
                approval_id: ids.approval,
            };
            Box::pin(async move {
                c.get_approval(authed(k.as_deref(), request))
                    .await
                    .map(drop)
            })
        }),
        ask("WaitForDecision", |mut c, k, ids| {
            let request = WaitRequest {
                approval_id: ids.approval,
                timeout_ms: 10,
            };
            Box::pin(async move {
                c.wait_for_decision(authed(k.as_deref(), request))
                    .await
                    .map(drop)
            })
        }),
        ask("Withdraw", |mut c, k, ids| {
            let request = ApprovalRequest {
                approval_id: ids.approval,
            };
            Box::pin(async move { c.withdraw(authed(k.as_deref(), request)).await.map(drop) })
        }),
        ask("ListSessions", |mut c, k, _| {
            Box::pin(async move {
                c.list_sessions(authed(k.as_deref(), ListSessionsRequest {}))
                    .await
                    .map(drop)
            })
        }),
        ask("ListNotifications", |mut c, k, _| {
            let request = ListNotificationsRequest {};
            Box::pin(async move {
                c.list_notifications(authed(k.as_deref(), request))
                    .await
                    .map(drop)
            })
        }),
        ask("ListSessionEffects", |mut c, k, ids| {
            let request = SessionRequest {
                session_id: ids.session,
            };
            Box::pin(async move {
                c.list_session_effects(authed(k.as_deref(), request))
                    .await
                    .map(drop)
            })
        }),
        ask("BeginUndo", |mut c, k, ids| {
            let request = SessionRequest {
                session_id: ids.session,
            };
            Box::pin(async move { c.begin_undo(authed(k.as_deref(), request)).await.map(drop) })
        }),
        ask("RecordUndoStep", |mut c, k, ids| {
            let request = UndoStepRequest {
                session_id: ids.session,
                effect_id: ids.effect,
                step_json: json!({"outcome": "already_undone", "claim": "x"}).to_string(),
            };
            Box::pin(async move {
                c.record_undo_step(authed(k.as_deref(), request))
                    .await
                    .map(drop)
            })
        }),
        ask("OpenUndo", |mut c, k, ids| {
            let request = SessionRequest {
                session_id: ids.session,
            };
            Box::pin(async move { c.open_undo(authed(k.as_deref(), request)).await.map(drop) })
        }),
        ask("NextUndoStep", |mut c, k, ids| {
            let request = UndoHeld {
                session_id: ids.session,
                holder: "x".into(),
            };
            Box::pin(async move {
                c.next_undo_step(authed(k.as_deref(), request))
                    .await
                    .map(drop)
            })
        }),
        ask("RecordUndoTry", |mut c, k, ids| {
            let step = json!({"effect_id": ids.effect, "tool": "pay", "attempts": 1,
                              "outcome": {"kind": "failed", "error": "x"}});
            let request = UndoTried {
                session_id: ids.session,
                holder: "x".into(),
                step_json: step.to_string(),
            };
            Box::pin(async move {
                c.record_undo_try(authed(k.as_deref(), request))
                    .await
                    .map(drop)
            })
        }),
    ]
}

/// What the RPCs are asked about: a held call of acme's agent, in its session.
#[derive(Clone)]
struct Ids {
    session: String,
    effect: String,
    approval: String,
}

fn read(session: &str) -> InterceptRequest {
    InterceptRequest {
        session_id: session.into(),
        tool: "lookup".into(),
        tier: Tier::ReadOnly as i32,
        ..InterceptRequest::default()
    }
}

fn note(effect: &str) -> NoteRequest {
    NoteRequest {
        effect_id: effect.into(),
        note_json: json!("no answer came").to_string(),
        verdicts_json: None,
        lease_token: MADE_UP_TOKEN.into(),
    }
}

/// A well-formed lease token that no Execute answer gave.
const MADE_UP_TOKEN: &str = "lt_0000000000000000000000000000000000000000000000000000000000000000";

/// What an agent's key may not ask: undoing takes an admin, reading deliveries an approver.
const NOT_FOR_AGENTS: [&str; 6] = [
    "BeginUndo",
    "RecordUndoStep",
    "OpenUndo",
    "NextUndoStep",
    "RecordUndoTry",
    "ListNotifications",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rpc_a_gateway_asks_is_refused_as_the_http_api_refuses_it() {
    let engine = TestEngine::start("").await;
    let agent = engine.key("acme", Role::Agent).await;
    let colleague = engine.key("acme", Role::Agent).await;
    let stranger = engine.key("other", Role::Admin).await;
    let mut client = engine.client();
    let email = InterceptRequest {
        session_id: "g-held".into(),
        tool: "send_email".into(),
        arguments_json: json!({"to": "ceo@example.com"}).to_string(),
        tier: Tier::Irreversible as i32,
        ..InterceptRequest::default()
    };
    let held = client.intercept(authed(Some(&agent), email)).await.unwrap();
    let Some(Decision::AwaitingApproval(held)) = held.into_inner().decision else {
        panic!("an irreversible call is held");
    };
    let ids = Ids {
        session: "g-held".into(),
        effect: held.effect_id,
        approval: held.approval_id,
    };

    // Keys exist: no credential is no answer, from every RPC; health needs none.
    for (name, asked) in every_rpc(&client, None, &ids) {
        let refused = asked.await.expect_err(name);
        assert_eq!(refused.code(), Code::Unauthenticated, "{name}: {refused:?}");
    }
    let health = client.health(HealthRequest {}).await.unwrap().into_inner();
    assert!(health.ready, "{health:?}");
    assert_eq!(health.backend, "sqlite");

    // An agent does not undo, nor read what people were told.
    for (name, asked) in every_rpc(&client, Some(&agent), &ids) {
        if NOT_FOR_AGENTS.contains(&name) {
            let refused = asked.await.expect_err(name);
            assert_eq!(
                refused.code(),
                Code::PermissionDenied,
                "{name}: {refused:?}"
            );
        }
    }
    // Another org's admin finds none of acme's records.
    for (name, asked) in every_rpc(&client, Some(&stranger), &ids) {
        if [
            "GetEffect",
            "GetApproval",
            "WaitForDecision",
            "Withdraw",
            "RenewLease",
            "Doubt",
        ]
        .contains(&name)
        {
            let refused = asked.await.expect_err(name);
            assert_eq!(refused.code(), Code::NotFound, "{name}: {refused:?}");
        }
    }
    // A colleague may not withdraw the agent's held call; the agent may.
    let withdraw = |key: &str| {
        let request = ApprovalRequest {
            approval_id: ids.approval.clone(),
        };
        let mut client = client.clone();
        let request = authed(Some(key), request);
        async move { client.withdraw(request).await }
    };
    let refused = withdraw(&colleague).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let withdrawn = withdraw(&agent).await.unwrap().into_inner();
    assert_eq!(withdrawn.approval.unwrap().state, "withdrawn");

    // Who a key is, as the engine says it.
    let me = client
        .authenticate(authed(Some(&agent), AuthenticateRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (me.org.as_str(), me.role.as_str(), me.credential.as_str()),
        ("acme", "agent", "api_key")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_asked_for_is_at_most_the_sdks() {
    let engine = TestEngine::start("[limits]\nsdk_lease_secs = 5\n").await;
    let agent = engine.key("acme", Role::Agent).await;
    let mut client = engine.client();
    for (asked_ms, at_most_ms) in [
        (Some(1_000), 1_000),
        (Some(86_400_000), 5_000),
        (None, 5_000),
    ] {
        let call = InterceptRequest {
            lease_ms: asked_ms,
            ..pay(&format!("lease-{asked_ms:?}"), 1)
        };
        let before = undolog_types::Timestamp::now().as_millis();
        let answer = client.intercept(authed(Some(&agent), call)).await.unwrap();
        let Some(Decision::Execute(run)) = answer.into_inner().decision else {
            panic!("a new call runs");
        };
        let lease = run.lease_expires_at_ms - before;
        assert!(
            (0..=at_most_ms + 200).contains(&lease),
            "asked {asked_ms:?}: a lease of {lease} ms"
        );
    }
}
