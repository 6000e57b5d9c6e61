//! Executors that die: a call stranded by a crashed gateway is in doubt as soon as the gateway is
//! back (or another one notices it stopped beating), never after a long lease; a live executor's
//! lease is renewed while its tool runs.

use std::{sync::Arc, time::Duration};

use undolog_engine::{Engine, EngineConfig, Intercept, Rejection};
use undolog_store::{SqliteOptions, SqliteStore, Store};

use crate::{org, transfer};

async fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::open(SqliteOptions::file(dir.path().join("log.db")))
            .await
            .unwrap(),
    )
}

/// A gateway process on `store`: its own executor id, beating fast.
fn gateway(store: &Arc<dyn Store>, lease: Duration) -> Engine {
    let config = EngineConfig {
        lease,
        heartbeat: Duration::from_millis(50),
        executor_timeout: Duration::from_millis(300),
        poll_interval: Duration::from_millis(20),
        ..EngineConfig::default()
    };
    Engine::new(store.clone(), config)
}

fn is_in_doubt(answer: &Intercept) -> bool {
    matches!(
        answer,
        Intercept::Rejected {
            reason: Rejection::InDoubt,
            ..
        }
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_stranded_by_a_crash_is_in_doubt_as_soon_as_its_gateway_restarts_or_is_taken_for_dead()
 {
    struct Case {
        name: &'static str,
        /// The name the second gateway starts under: the first's (a restart) or its own.
        second_name: &'static str,
        /// The answer must come within this long of the second gateway starting.
        within: Duration,
    }
    let cases = [
        Case {
            name: "the same gateway restarted",
            second_name: "host:8080",
            within: Duration::from_millis(200),
        },
        Case {
            name: "another gateway on the store, which sees the first stop beating",
            second_name: "host:9090",
            within: Duration::from_secs(3),
        },
    ];
    for case in cases {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        // Leases of a minute: without executors, the retry would wait the whole minute.
        let first = gateway(&store, Duration::from_secs(60));
        first.start_executor("host:8080").await.unwrap();
        let Intercept::Execute { effect_id, .. } =
            first.intercept(transfer("s1", 10)).await.unwrap()
        else {
            panic!("{}: the first call runs", case.name);
        };
        drop(first); // the process dies with the tool running: no commit, no more beats

        let second = gateway(&store, Duration::from_secs(60));
        let started = std::time::Instant::now();
        second.start_executor(case.second_name).await.unwrap();
        let retry = tokio::time::timeout(
            Duration::from_secs(10),
            second.intercept(transfer("s1", 10)),
        )
        .await
        .unwrap_or_else(|_| panic!("{}: the retry is still waiting after 10 s", case.name))
        .unwrap();
        let took = started.elapsed();
        assert!(is_in_doubt(&retry), "{}: {retry:?}", case.name);
        assert!(took < case.within, "{}: in doubt after {took:?}", case.name);
        let listed: Vec<_> = second
            .in_doubt(&org())
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(
            listed,
            vec![effect_id],
            "{}: listed for an operator",
            case.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_lease_is_renewed_while_the_tool_runs_so_an_identical_call_waits_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let gw = gateway(&store, Duration::from_millis(300));
    gw.start_executor("host:8080").await.unwrap();
    let Intercept::Execute {
        effect_id,
        lease_token,
        ..
    } = gw.intercept(transfer("s1", 10)).await.unwrap()
    else {
        panic!("the first call runs");
    };
    // The tool runs for five leases; an identical call arrives meanwhile.
    let runner = {
        let gw = gw.clone();
        tokio::spawn(async move {
            gw.while_running(
                &org(),
                effect_id,
                &lease_token,
                tokio::time::sleep(Duration::from_millis(1_500)),
            )
            .await;
            gw.commit(
                &org(),
                effect_id,
                &lease_token,
                serde_json::json!({"moved": 10}),
            )
            .await
            .unwrap();
        })
    };
    tokio::time::sleep(Duration::from_millis(600)).await;
    let identical = gw.intercept(transfer("s1", 10)).await.unwrap();
    runner.await.unwrap();
    assert!(
        matches!(identical, Intercept::Replay { effect_id: e, .. } if e == effect_id),
        "the lease held while the tool ran, so the identical call waited and replayed: {identical:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_says_how_long_it_waits_hears_still_running_before_it_gives_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let gw = gateway(&store, Duration::from_secs(60)); // waits up to a minute unless told less
    let Intercept::Execute { effect_id, .. } = gw.intercept(transfer("s1", 10)).await.unwrap()
    else {
        panic!("the first call runs");
    };
    let started = std::time::Instant::now();
    let err = gw
        .intercept(transfer("s1", 10).with_wait(Duration::from_millis(200)))
        .await
        .expect_err("the identical call is still running");
    let took = started.elapsed();
    assert!(
        matches!(err, undolog_engine::Error::StillRunning { effect, waited }
            if effect == effect_id && waited == Duration::from_millis(200)),
        "{err:?}"
    );
    assert!(
        (Duration::from_millis(200)..Duration::from_secs(2)).contains(&took),
        "bounded by the caller's wait, not the engine's minute: {took:?}"
    );
}
