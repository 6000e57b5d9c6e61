//! Undoing a whole session on the embedded store: claim, then per step begin, compensate (a
//! compensator that does nothing) and record, newest first. Every step plans the undo again from
//! what the log holds, so this shows how the cost grows with the session's length.
//!
//! Run: cargo bench -p undolog-engine --bench undo_session

use std::{sync::Arc, time::Duration};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use undolog_engine::{
    Call, Compensated, CompensationFailure, Compensator, Engine, EngineConfig, Intercept,
    ToolPolicy,
};
use undolog_store::{Compensation, Effect, SqliteStore};
use undolog_types::{Args, OrgId, SessionId, Tier};

struct Nothing;

#[async_trait::async_trait]
impl Compensator for Nothing {
    async fn compensate(&self, _effect: &Effect) -> Result<Compensated, CompensationFailure> {
        Ok(Compensated::AlreadyUndone)
    }
}

/// An engine whose session `s` holds `n` committed compensable effects.
async fn session_of(n: usize) -> Engine {
    let store = SqliteStore::in_memory().await.unwrap();
    let engine = Engine::new(Arc::new(store), EngineConfig::default());
    let org = OrgId::new("bench").unwrap();
    let policy = ToolPolicy::new(Tier::Compensable).with_compensation(Compensation::Upstream {
        tool: "refund".into(),
        args: json!({"id": "{{args.id}}"}),
    });
    for i in 0..n {
        let args = Args::try_from(json!({"id": i})).unwrap();
        let call = Call::new(
            org.clone(),
            SessionId::new("s").unwrap(),
            "charge",
            args,
            policy.clone(),
        );
        let Intercept::Execute {
            effect_id,
            lease_token,
            ..
        } = engine.intercept(call).await.unwrap()
        else {
            panic!("a new call runs");
        };
        engine
            .commit(&org, effect_id, &lease_token, json!({"charged": i}))
            .await
            .unwrap();
    }
    engine
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("undo_session");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for n in [100, 1_000] {
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_batched(
                || runtime.block_on(session_of(n)),
                |engine| {
                    runtime.block_on(async {
                        let org = OrgId::new("bench").unwrap();
                        let report = engine
                            .undo(&org, &SessionId::new("s").unwrap(), &Nothing)
                            .await;
                        assert_eq!(report.unwrap().steps.len(), n);
                    });
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
