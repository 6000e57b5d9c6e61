//! A session belongs to the caller whose call opened it: the core refuses anyone else's calls in
//! it (no replay, nothing recorded), and a caller reads only its own sessions.

use serde_json::json;
use undolog_engine::{Error, Intercept, Reader, Rejection};

use crate::*;

#[tokio::test]
async fn only_the_caller_that_opened_a_session_calls_in_it_and_reads_it() {
    let (engine, _) = engine().await;
    let mine = |caller: Option<&str>| {
        let call = transfer("s1", 5);
        match caller {
            Some(caller) => call.with_caller(caller),
            None => call,
        }
    };
    let opened = must_own(&engine, mine(Some("api-key:a"))).await;
    engine
        .commit(&org(), opened.0, &opened.1, json!("paid"))
        .await
        .unwrap();

    // (who calls, whether the identical call replays for it)
    let rows = [
        (Some("api-key:a"), true),
        (Some("api-key:b"), false),
        (None, false),
    ];
    for (caller, replays) in rows {
        let answer = engine.intercept(mine(caller)).await.unwrap();
        match answer {
            Intercept::Replay { effect_id, .. } => {
                assert!(replays, "{caller:?} got a replay");
                assert_eq!(effect_id, opened.0);
            }
            Intercept::Rejected {
                effect_id: None,
                reason: Rejection::SessionOfAnother,
            } => assert!(!replays, "{caller:?} was refused"),
            other => panic!("{caller:?}: {other:?}"),
        }
    }
    let refused = engine
        .reject(&mine(Some("api-key:b")), "a guard said no", None)
        .await
        .unwrap();
    assert_eq!(refused, None, "nothing recorded in another's session");
    assert_eq!(
        engine
            .session_effects(&org(), &session("s1"))
            .await
            .unwrap()
            .len(),
        1
    );

    // A session with no opener (recorded before openers) is open to every caller.
    let open = must_own(&engine, transfer("legacy", 1)).await;
    let joined = engine
        .intercept(transfer("legacy", 2).with_caller("api-key:b"))
        .await
        .unwrap();
    assert!(matches!(joined, Intercept::Execute { .. }), "{joined:?}");
    let _ = open;

    // Reading.
    let b = Reader::Caller("api-key:b".into());
    let a = Reader::Caller("api-key:a".into());
    let ids = |sessions: Vec<undolog_store::Session>| {
        sessions
            .into_iter()
            .map(|s| s.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(engine.sessions_read_by(&org(), &a).await.unwrap()),
        ["legacy", "s1"]
    );
    assert_eq!(
        ids(engine.sessions_read_by(&org(), &b).await.unwrap()),
        ["legacy"]
    );
    assert_eq!(
        ids(engine.sessions_read_by(&org(), &Reader::Org).await.unwrap()),
        ["legacy", "s1"]
    );
    let hidden = engine
        .session_effects_read_by(&org(), &session("s1"), &b)
        .await;
    assert!(
        matches!(hidden, Err(Error::UnknownSession(_))),
        "{hidden:?}"
    );
    let hidden = engine.effect_read_by(&org(), opened.0, &b).await;
    assert!(matches!(hidden, Err(Error::UnknownEffect(_))), "{hidden:?}");
    let hidden = engine.snapshot_read_by(&org(), &session("s1"), &b).await;
    assert!(
        matches!(hidden, Err(Error::UnknownSession(_))),
        "{hidden:?}"
    );
    assert_eq!(
        engine
            .effect_read_by(&org(), opened.0, &a)
            .await
            .unwrap()
            .id,
        opened.0
    );
}

#[tokio::test]
async fn a_caller_lists_only_the_approvals_of_its_own_sessions() {
    let (engine, _) = engine().await;
    let held = engine
        .intercept(send_email("mine").with_caller("api-key:a"))
        .await
        .unwrap();
    assert!(
        matches!(held, Intercept::AwaitingApproval { .. }),
        "{held:?}"
    );
    for (reader, seen) in [
        (Reader::Caller("api-key:a".into()), 1),
        (Reader::Caller("api-key:b".into()), 0),
        (Reader::Org, 1),
    ] {
        let listed = engine
            .approvals_read_by(&org(), None, &reader)
            .await
            .unwrap();
        assert_eq!(listed.len(), seen, "{reader:?}");
        let doubtful = engine.in_doubt_read_by(&org(), &reader).await.unwrap();
        assert!(doubtful.is_empty(), "{reader:?}");
    }
}
