//! intercept + commit of a compensable call on the embedded store, the hot path of every tool call.
//!
//! Run: cargo bench -p undolog-engine --bench intercept_commit
//! Each iteration is a new call (new arguments), so every one writes a pending effect, then commits
//! it: two durable transactions. Reported for both disk-sync settings.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use undolog_engine::{Call, Engine, EngineConfig, Intercept, ToolPolicy};
use undolog_store::{Compensation, SqliteOptions, SqliteStore, Synchronous};
use undolog_types::{Args, OrgId, SessionId, Tier};

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("intercept_commit");
    group.throughput(Throughput::Elements(1));
    for (name, synchronous) in [
        ("sqlite_sync_full", Synchronous::Full),
        ("sqlite_sync_normal", Synchronous::Normal),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions {
            synchronous,
            ..SqliteOptions::file(dir.path().join("bench.db"))
        };
        let store = runtime.block_on(SqliteStore::open(options)).unwrap();
        let engine = Engine::new(Arc::new(store), EngineConfig::default());
        let org = OrgId::new("bench").unwrap();
        let session = SessionId::new("bench-session").unwrap();
        let policy = ToolPolicy::new(Tier::Compensable).with_compensation(Compensation::Upstream {
            tool: "refund".into(),
            args: json!({"id": "{{result.id}}"}),
        });
        let counter = AtomicU64::new(0);
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| async {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let args =
                    Args::try_from(json!({"from": "alice", "to": "bob", "amount": n})).unwrap();
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
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
