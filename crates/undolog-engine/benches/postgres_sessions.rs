//! intercept + commit on PostgreSQL at 1, 8 and 32 concurrent sessions: the engine's real path
//! (advisory lock, session row lock, RLS role and org per transaction, two transactions per call).
//!
//! Run: bench/pg/engine_vs_pgbench.sh (which also measures pgbench in the same run), or
//! `cargo bench -p undolog-engine --bench postgres_sessions` with PostgreSQL at
//! `UNDOLOG_TEST_POSTGRES_URL` (default the machine's server). Each session is a task making new
//! calls one after another; criterion's throughput is calls per second over all sessions. A second
//! group has 32 such tasks share one session (a stateless client's implicit run). The scratch
//! database is dropped at the end.

use std::{sync::Arc, time::Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use undolog_engine::{Call, Engine, EngineConfig, Intercept, ToolPolicy};
use undolog_store::{Compensation, PostgresOptions, PostgresStore, scratch::ScratchDatabase};
use undolog_types::{Args, OrgId, SessionId, Tier};

const SESSIONS: [usize; 3] = [1, 8, 32];

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let database = ScratchDatabase::new("undolog_bench_engine");
    let url = database.url();
    let engine = runtime.block_on(async {
        let options = PostgresOptions {
            max_connections: 40,
            ..PostgresOptions::new(url)
        };
        let store = PostgresStore::open(options).await.unwrap();
        Engine::new(Arc::new(store), EngineConfig::default())
    });

    let mut group = c.benchmark_group("postgres_intercept_commit");
    group.sample_size(20);
    for sessions in SESSIONS {
        group.throughput(Throughput::Elements(sessions as u64));
        group.bench_function(BenchmarkId::from_parameter(sessions), |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                let engine = engine.clone();
                async move {
                    let start = Instant::now();
                    let tasks: Vec<_> = (0..sessions)
                        .map(|_| {
                            let session =
                                SessionId::new(format!("s-{}", uuid::Uuid::now_v7())).unwrap();
                            tokio::spawn(session_calls(engine.clone(), session, 0, iters))
                        })
                        .collect();
                    for task in tasks {
                        task.await.unwrap();
                    }
                    start.elapsed()
                }
            });
        });
    }
    group.finish();

    // 32 tasks in one session, as a stateless client's calls all fall into its implicit run:
    // they take turns on the session's row, in per-session batches.
    let mut group = c.benchmark_group("postgres_intercept_commit_one_session");
    group.sample_size(20);
    let tasks = 32;
    group.throughput(Throughput::Elements(tasks));
    group.bench_function(BenchmarkId::from_parameter(tasks), |b| {
        b.to_async(&runtime).iter_custom(|iters| {
            let engine = engine.clone();
            async move {
                let session = SessionId::new(format!("s-{}", uuid::Uuid::now_v7())).unwrap();
                let start = Instant::now();
                let calls: Vec<_> = (0..tasks)
                    .map(|task| {
                        let (engine, session) = (engine.clone(), session.clone());
                        tokio::spawn(session_calls(engine, session, task * iters, iters))
                    })
                    .collect();
                for call in calls {
                    call.await.unwrap();
                }
                start.elapsed()
            }
        });
    });
    group.finish();
    drop(engine);
    drop(database);
}

/// `calls` new compensable calls in `session`, one after another, numbered from `first`.
async fn session_calls(engine: Engine, session: SessionId, first: u64, calls: u64) {
    let org = OrgId::new("bench").unwrap();
    let policy = ToolPolicy::new(Tier::Compensable).with_compensation(Compensation::Upstream {
        tool: "refund".into(),
        args: json!({"id": "{{result.id}}"}),
    });
    for n in first..first + calls {
        let args = Args::try_from(json!({"from": "alice", "to": "bob", "amount": n})).unwrap();
        let call = Call::new(
            org.clone(),
            session.clone(),
            "transfer",
            args,
            policy.clone(),
        );
        let Intercept::Execute {
            effect_id,
            lease_token,
            ..
        } = engine.intercept(call).await.unwrap()
        else {
            panic!("a new call executes");
        };
        engine
            .commit(&org, effect_id, &lease_token, json!({"id": n}))
            .await
            .unwrap();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
