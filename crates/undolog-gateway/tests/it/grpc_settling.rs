//! Over gRPC, as over HTTP, a call is settled only with the lease token its Execute answer
//! carried: a colleague's NotSent or AwaitInput on a running call used to end it, and the
//! caller's identical retry then ran the tool a second time.

use serde_json::json;
use tonic::{Code, Status};
use undolog_gateway::grpc::proto::{
    CommitRequest, FailRequest, InterceptRequest, NoteRequest, RenewLeaseRequest,
    effect_engine_client::EffectEngineClient, intercept_reply::Decision,
};
use undolog_types::Role;

use crate::grpc::{TestEngine, authed, code, pay};

type Client = EffectEngineClient<tonic::transport::Channel>;

/// A well-formed lease token that no Execute answer gave.
fn made_up() -> String {
    format!("lt_{}", "9".repeat(64))
}

/// Each way of settling a call, asked with `key` about `effect` with `token`.
async fn settle(
    client: &Client,
    act: &str,
    key: &str,
    effect: &str,
    token: String,
) -> Result<(), Status> {
    let mut client = client.clone();
    let note = || NoteRequest {
        effect_id: effect.into(),
        note_json: json!("nobody answered").to_string(),
        verdicts_json: None,
        lease_token: token.clone(),
    };
    match act {
        "NotSent" => client.not_sent(authed(Some(key), note())).await.map(drop),
        "AwaitInput" => client
            .await_input(authed(Some(key), note()))
            .await
            .map(drop),
        "Doubt" => client.doubt(authed(Some(key), note())).await.map(drop),
        "RenewLease" => {
            let request = RenewLeaseRequest {
                effect_id: effect.into(),
                lease_token: token,
            };
            client
                .renew_lease(authed(Some(key), request))
                .await
                .map(drop)
        }
        "Commit" => {
            let request = CommitRequest {
                effect_id: effect.into(),
                result_json: json!({"forged": true}).to_string(),
                lease_token: token,
                ..CommitRequest::default()
            };
            client.commit(authed(Some(key), request)).await.map(drop)
        }
        "Fail" => {
            let request = FailRequest {
                effect_id: effect.into(),
                error: "it did not run".into(),
                lease_token: token,
                ..FailRequest::default()
            };
            client.fail(authed(Some(key), request)).await.map(drop)
        }
        other => panic!("no such act {other}"),
    }
}

const ACTS: [&str; 6] = [
    "NotSent",
    "AwaitInput",
    "Doubt",
    "RenewLease",
    "Commit",
    "Fail",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_token_of_the_execute_answer_settles_a_call_over_grpc() {
    let engine = TestEngine::start("").await;
    let caller = engine.key("acme", Role::Agent).await;
    let colleague = engine.key("acme", Role::Agent).await;
    let admin = engine.key("acme", Role::Admin).await;
    let stranger = engine.key("other", Role::Admin).await;
    let client = engine.client();
    let call = || InterceptRequest {
        wait_ms: Some(100),
        ..pay("grpc-own", 12)
    };
    let answer = client
        .clone()
        .intercept(authed(Some(&caller), call()))
        .await;
    let Some(Decision::Execute(run)) = answer.unwrap().into_inner().decision else {
        panic!("a new call runs");
    };

    // (who, their key, the token they present, the refusal's gRPC and UndoLog codes)
    let rows = [
        (
            "a colleague",
            &colleague,
            made_up(),
            Code::PermissionDenied,
            "not_owner",
        ),
        (
            "the caller, a token it was not given",
            &caller,
            made_up(),
            Code::PermissionDenied,
            "not_owner",
        ),
        (
            "an admin",
            &admin,
            made_up(),
            Code::PermissionDenied,
            "not_owner",
        ),
        (
            "the caller, no token",
            &caller,
            String::new(),
            Code::InvalidArgument,
            "bad_request",
        ),
        (
            "another org",
            &stranger,
            run.lease_token.clone(),
            Code::NotFound,
            "unknown_effect",
        ),
    ];
    for (who, key, token, expected, undolog) in rows {
        for act in ACTS {
            let refused = settle(&client, act, key, &run.effect_id, token.clone()).await;
            let refused = refused.expect_err(&format!("{who}: {act} is refused"));
            assert_eq!(
                (refused.code(), code(&refused)),
                (expected, undolog),
                "{who}: {act}: {refused:?}"
            );
        }
    }

    // Nothing ended the call: an identical retry does not run it again.
    let retried = client
        .clone()
        .intercept(authed(Some(&caller), call()))
        .await;
    if let Ok(retried) = &retried {
        let decision = &retried.get_ref().decision;
        assert!(
            !matches!(decision, Some(Decision::Execute(_))),
            "the call runs once: {decision:?}"
        );
    }
    // Its owner renews and commits it.
    for act in ["RenewLease", "Commit"] {
        let settled = settle(
            &client,
            act,
            &caller,
            &run.effect_id,
            run.lease_token.clone(),
        )
        .await;
        settled.unwrap_or_else(|e| panic!("the owner's {act}: {e:?}"));
    }
    let again = client
        .clone()
        .intercept(authed(Some(&caller), call()))
        .await;
    let decision = again.unwrap().into_inner().decision;
    assert!(
        matches!(decision, Some(Decision::Replay(_))),
        "{decision:?}"
    );
}
