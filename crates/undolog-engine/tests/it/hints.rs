//! Hints between engines on one PostgreSQL database (LISTEN/NOTIFY): sent only while another
//! engine is there to hear them, and heard by it however long both have been running.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};
use tokio::sync::broadcast;
use undolog_engine::{Engine, EngineConfig, Event};
use undolog_store::{
    Notifications, PostgresOptions, PostgresStore, Store, scratch::ScratchDatabase,
};

use crate::*;

/// How long an engine of these tests sends hints after it last heard another (default 6 s).
const SILENCE: Duration = Duration::from_millis(300);

async fn store(db: &ScratchDatabase) -> Arc<PostgresStore> {
    Arc::new(
        PostgresStore::open(PostgresOptions::new(db.url()))
            .await
            .unwrap(),
    )
}

async fn engine(db: &ScratchDatabase) -> Engine {
    let config = EngineConfig {
        peer_silence: SILENCE,
        ..EngineConfig::default()
    };
    Engine::new(store(db).await, config)
}

/// Returns once `heard` hears what `listener` sends: its LISTEN has begun.
async fn listening(listener: &dyn Notifications, heard: &mut broadcast::Receiver<String>) {
    let probe = "probe".to_owned();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            listener
                .publish(std::slice::from_ref(&probe))
                .await
                .unwrap();
            let answer = tokio::time::timeout(Duration::from_millis(200), heard.recv()).await;
            if matches!(answer, Ok(Ok(payload)) if payload == probe) {
                return;
            }
        }
    })
    .await
    .expect("the listener hears itself within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_alone_on_its_store_sends_hellos_and_no_hint_of_its_changes() {
    let db = ScratchDatabase::new("undolog_test_hints");
    // A listener that is no engine: it says no hello.
    let listener = store(&db).await.notifications().unwrap();
    let mut heard = listener.subscribe();
    listening(&*listener, &mut heard).await;
    let engine = engine(&db).await;
    tokio::time::sleep(SILENCE * 2).await;
    while heard.try_recv().is_ok() {}

    run(&engine, transfer("s1", 1), json!({"id": 1})).await;
    let mut hints = Vec::new();
    let until = tokio::time::Instant::now() + SILENCE * 2;
    while let Ok(Ok(payload)) = tokio::time::timeout_at(until, heard.recv()).await {
        hints.push(serde_json::from_str::<Value>(&payload).unwrap());
    }
    assert!(!hints.is_empty(), "no hello in {:?}", SILENCE * 2);
    for hint in &hints {
        assert_eq!(
            (&hint["hello"], &hint["events"]),
            (&json!(true), &json!([])),
            "{hint}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_on_one_store_hear_each_others_changes_long_after_they_started() {
    let db = ScratchDatabase::new("undolog_test_hints");
    let a = engine(&db).await;
    let b = engine(&db).await;
    tokio::time::sleep(SILENCE * 4).await;

    for (n, (from, to)) in [(&a, &b), (&b, &a)].into_iter().enumerate() {
        let mut events = to.subscribe();
        let id = run(from, transfer("s1", n as i64), json!({"id": n})).await;
        let committed = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match events.recv().await.unwrap() {
                    Event::EffectCommitted { effect_id, .. } if effect_id == id => return,
                    _ => continue,
                }
            }
        })
        .await;
        assert!(committed.is_ok(), "the other engine never heard of {id}");
    }
}
