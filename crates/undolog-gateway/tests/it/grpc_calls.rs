//! `Calls` carries many operations on one stream, each with credentials of its own: every one is
//! answered exactly as its own request would be (the same reply, the same refusal), to its own
//! id, and one org's operations never reach another's records however they are mixed.

use std::collections::HashMap;

use futures::StreamExt as _;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status};
use undolog_gateway::grpc::proto::{
    Answer, CommitRequest, EffectRequest, FailRequest, InterceptRequest, Operation, Operations,
    RecordReadRequest, Tier, answer::Reply, intercept_reply::Decision, operation::Request as Asked,
    record_read_request::Outcome,
};
use undolog_types::{EffectId, Role};

use crate::grpc::{TestEngine, authed, code, pay};

/// An operation with `key` (none: no credentials) as its `authorization`.
fn operation(id: u64, key: Option<&str>, request: Asked) -> Operation {
    let metadata = key.map(|key| ("authorization".to_owned(), format!("Bearer {key}")));
    Operation {
        id,
        metadata: metadata.into_iter().collect(),
        request: Some(request),
    }
}

/// Sends `messages` on one `Calls` stream, all before any answer is read, and gathers the
/// answers by id (each must come once).
async fn on_one_stream(engine: &TestEngine, messages: Vec<Vec<Operation>>) -> HashMap<u64, Reply> {
    let expected: usize = messages.iter().map(Vec::len).sum();
    let (send, outgoing) = mpsc::channel(messages.len().max(1));
    for operations in messages {
        send.send(Operations { operations }).await.unwrap();
    }
    let mut answers = (engine.client().calls(ReceiverStream::new(outgoing)).await)
        .unwrap()
        .into_inner();
    let mut by_id = HashMap::new();
    while by_id.len() < expected {
        let message = answers
            .next()
            .await
            .expect("the stream answers each")
            .unwrap();
        for Answer { id, reply } in message.answers {
            let reply = reply.expect("an answer carries a reply");
            assert!(
                by_id.insert(id, reply).is_none(),
                "operation {id} answered twice"
            );
        }
    }
    by_id
}

/// What an answer comes to, to compare with the unary request's.
#[derive(Debug, PartialEq)]
enum Seen {
    Decided(&'static str),
    Recorded,
    Refused {
        code: Code,
        message: String,
        undolog: String,
    },
}

fn refused(status: Status) -> Seen {
    Seen::Refused {
        code: status.code(),
        undolog: code(&status).to_owned(),
        message: status.message().to_owned(),
    }
}

fn seen(reply: Reply) -> Seen {
    match reply {
        Reply::Intercept(reply) => Seen::Decided(match reply.decision {
            Some(Decision::Execute(_)) => "execute",
            Some(Decision::Replay(_)) => "replay",
            Some(Decision::Failed(_)) => "failed",
            Some(Decision::AwaitingApproval(_)) => "awaiting_approval",
            Some(Decision::Rejected(_)) => "rejected",
            None => "none",
        }),
        Reply::Effect(_) | Reply::RecordRead(_) => Seen::Recorded,
        Reply::Refusal(refusal) => Seen::Refused {
            code: Code::from(refusal.code),
            undolog: refusal
                .metadata
                .get("x-undolog-code")
                .cloned()
                .unwrap_or_default(),
            message: refusal.message,
        },
    }
}

/// The same request as its own: its reply or refusal, as [`seen`] reads an answer.
async fn unary(engine: &TestEngine, key: Option<&str>, request: Asked) -> Seen {
    let mut client = engine.client();
    let replied = match request {
        Asked::Intercept(m) => client
            .intercept(authed(key, m))
            .await
            .map(|r| seen(Reply::Intercept(r.into_inner()))),
        Asked::Commit(m) => client.commit(authed(key, m)).await.map(|_| Seen::Recorded),
        Asked::Fail(m) => client.fail(authed(key, m)).await.map(|_| Seen::Recorded),
        Asked::RecordRead(m) => client
            .record_read(authed(key, m))
            .await
            .map(|_| Seen::Recorded),
    };
    replied.unwrap_or_else(refused)
}

fn commit(owned: &Owned) -> Asked {
    Asked::Commit(CommitRequest {
        effect_id: owned.effect.clone(),
        result_json: json!({"ok": true}).to_string(),
        verdicts_json: None,
        without_effect: true,
        lease_token: owned.token.clone(),
    })
}

fn fail(owned: &Owned) -> Asked {
    Asked::Fail(FailRequest {
        effect_id: owned.effect.clone(),
        error: "the bank said no".into(),
        details_json: None,
        verdicts_json: None,
        without_effect: true,
        lease_token: owned.token.clone(),
    })
}

/// An effect, with the lease token that settles it.
#[derive(Debug, Clone)]
struct Owned {
    effect: String,
    token: String,
}

impl Owned {
    /// The same effect with a token it was never given.
    fn forged(&self) -> Owned {
        Owned {
            token: format!("lt_{}", "7".repeat(64)),
            ..self.clone()
        }
    }

    fn of(effect: &str) -> Owned {
        Owned {
            effect: effect.into(),
            token: format!("lt_{}", "0".repeat(64)),
        }
    }
}

/// An effect id no call has.
const UNKNOWN: &str = "0192c5f0-0000-7000-8000-000000000000";

/// A read-only call that ran with no intent record, in `session`.
fn read(session: &str) -> Asked {
    Asked::RecordRead(RecordReadRequest {
        call: Some(InterceptRequest {
            tool: "get_balance".into(),
            tier: Tier::ReadOnly as i32,
            ..pay(session, 1)
        }),
        effect_id: EffectId::generate().to_string(),
        started_at_ms: 1,
        outcome: Some(Outcome::ResultJson(json!({"balance": 3}).to_string())),
        verdicts_json: None,
    })
}

/// A pending call of `key`'s, for a row to commit or fail.
async fn pending(engine: &TestEngine, key: &str, session: &str) -> Owned {
    let answer = engine
        .client()
        .intercept(authed(Some(key), pay(session, 7)))
        .await;
    match answer.unwrap().into_inner().decision {
        Some(Decision::Execute(execute)) => Owned {
            effect: execute.effect_id,
            token: execute.lease_token,
        },
        other => panic!("a new call runs, not {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_operation_is_answered_as_its_own_request_would_be() {
    let engine = TestEngine::start("").await;
    let acme = engine.key("acme", Role::Agent).await;
    let stranger = engine.key("other", Role::Agent).await;
    // (row, whose credentials, the request; for each of unary and the stream, a session or a
    // pending effect of its own where the row changes something).
    type Row = (&'static str, Option<String>, fn(&str, &Owned) -> Asked);
    let rows: Vec<Row> = vec![
        ("a new call", Some(acme.clone()), |session, _| {
            Asked::Intercept(pay(session, 5))
        }),
        ("no credentials", None, |session, _| {
            Asked::Intercept(pay(session, 5))
        }),
        ("a key no one made", Some("ul_nope".into()), |session, _| {
            Asked::Intercept(pay(session, 5))
        }),
        (
            "a commit of its own call",
            Some(acme.clone()),
            |_, effect| commit(effect),
        ),
        (
            "a commit of its own call with a token it was not given",
            Some(acme.clone()),
            |_, effect| commit(&effect.forged()),
        ),
        (
            "a commit of another org's call",
            Some(stranger.clone()),
            |_, effect| commit(effect),
        ),
        (
            "a failure of another org's call",
            Some(stranger.clone()),
            |_, effect| fail(effect),
        ),
        ("a commit of no call", Some(acme.clone()), |_, _| {
            commit(&Owned::of(UNKNOWN))
        }),
        ("a commit of no id", Some(acme.clone()), |_, _| {
            commit(&Owned::of("not-an-id"))
        }),
        ("a read's outcome", Some(acme.clone()), |session, _| {
            read(session)
        }),
        (
            "another org's read",
            Some(stranger.clone()),
            |session, _| read(session),
        ),
        ("an intercept of no session", Some(acme.clone()), |_, _| {
            Asked::Intercept(pay("", 5))
        }),
    ];

    let mut expected = Vec::new();
    let mut operations = Vec::new();
    for (i, (row, key, request)) in rows.iter().enumerate() {
        let (unary_session, stream_session) = (format!("u-{i}"), format!("s-{i}"));
        let unary_effect = pending(&engine, &acme, &format!("pu-{i}")).await;
        let stream_effect = pending(&engine, &acme, &format!("ps-{i}")).await;
        let alone = unary(
            &engine,
            key.as_deref(),
            request(&unary_session, &unary_effect),
        )
        .await;
        // A refusal names the effect it was about: the stream's row has an effect of its own.
        let alone = match alone {
            Seen::Refused {
                code,
                message,
                undolog,
            } => Seen::Refused {
                code,
                message: message.replace(&unary_effect.effect, &stream_effect.effect),
                undolog,
            },
            other => other,
        };
        expected.push((*row, alone));
        let asked = request(&stream_session, &stream_effect);
        operations.push(operation(i as u64 + 1, key.as_deref(), asked));
    }
    // Two that no request could be: no request at all, and metadata no request could carry.
    operations.push(Operation {
        request: None,
        ..operation(100, Some(&acme), commit(&Owned::of(UNKNOWN)))
    });
    let mut bad_metadata = operation(101, Some(&acme), Asked::Intercept(pay("bad", 1)));
    bad_metadata.metadata.insert("not a key".into(), "x".into());
    operations.push(bad_metadata);

    let answers = on_one_stream(&engine, vec![operations]).await;
    for (i, (row, alone)) in expected.into_iter().enumerate() {
        let streamed = seen(answers[&(i as u64 + 1)].clone());
        assert_eq!(streamed, alone, "{row}: on the stream as alone");
    }
    for id in [100, 101] {
        let Seen::Refused { code, .. } = seen(answers[&id].clone()) else {
            panic!("operation {id} is refused: {:?}", answers[&id]);
        };
        assert_eq!(code, Code::InvalidArgument, "operation {id}");
    }
    // The rows that should change something did, and the refusals are the API's.
    let kinds: Vec<_> = (1..=5).map(|id| seen(answers[&id].clone())).collect();
    assert_eq!(kinds[0], Seen::Decided("execute"));
    assert!(
        matches!(
            &kinds[1],
            Seen::Refused {
                code: Code::Unauthenticated,
                ..
            }
        ),
        "{kinds:?}"
    );
    assert_eq!(kinds[3], Seen::Recorded);
    assert!(
        matches!(&kinds[4], Seen::Refused { code: Code::PermissionDenied, undolog, .. }
            if undolog == "not_owner"),
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_of_two_orgs_mixed_on_one_stream_each_reach_only_their_own_org() {
    let engine = TestEngine::start("").await;
    let keys = [
        engine.key("acme", Role::Agent).await,
        engine.key("other", Role::Agent).await,
    ];
    // 120 calls, alternating orgs, in four messages sent before any answer is read.
    let messages: Vec<Vec<Operation>> = (0..4)
        .map(|m| {
            (0..30)
                .map(|i| {
                    let id = m * 30 + i + 1;
                    let key = &keys[(id % 2) as usize];
                    operation(
                        id,
                        Some(key),
                        Asked::Intercept(pay(&format!("mix-{id}"), id)),
                    )
                })
                .collect()
        })
        .collect();
    let answers = on_one_stream(&engine, messages).await;
    assert_eq!(answers.len(), 120);
    let mut client = engine.client();
    for (id, reply) in answers {
        let Reply::Intercept(reply) = reply else {
            panic!("operation {id}: {reply:?}");
        };
        let Some(Decision::Execute(execute)) = reply.decision else {
            panic!("operation {id} is a new call: {reply:?}");
        };
        let (own, other) = (&keys[(id % 2) as usize], &keys[1 - (id % 2) as usize]);
        let request = || EffectRequest {
            effect_id: execute.effect_id.clone(),
        };
        let found = client
            .get_effect(authed(Some(own), request()))
            .await
            .unwrap();
        let record = found.into_inner().effect.unwrap();
        assert_eq!(record.session_id, format!("mix-{id}"), "operation {id}");
        let hidden = client
            .get_effect(authed(Some(other), request()))
            .await
            .unwrap_err();
        assert_eq!(hidden.code(), Code::NotFound, "operation {id}: {hidden:?}");
    }
}
