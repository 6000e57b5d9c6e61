//! The store's share of a tool call on PostgreSQL, at 1, 8 and 32 concurrent sessions.
//!
//! Run (PostgreSQL at `UNDOLOG_BENCH_POSTGRES_URL`, default the test server):
//! cargo bench -p undolog-store --bench postgres_calls
//!
//! One call is the two transactions the engine runs for intercept + commit of a new compensable
//! call: (1) lock the signature, read the session (row lock) and the latest effect with that
//! signature, insert the pending effect, write the session back; (2) read the effect, mark it
//! committed, push it onto the undo stack. Each session is its own task making calls one after
//! another; throughput is calls per second over all sessions. The scratch database is dropped at
//! the end. Compare with `bench/pg/pgbench_insert.sh` (PostgreSQL alone).

use std::{str::FromStr, sync::Arc, time::Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use sqlx::{ConnectOptions, postgres::PgConnectOptions};
use undolog_store::{Compensation, Effect, PostgresOptions, PostgresStore, Session, Store};
use undolog_types::{
    Args, CallIdentity, EffectId, EffectState, OrgId, SessionId, SessionState, Tier, Timestamp,
};

const SESSIONS: [usize; 3] = [1, 8, 32];

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = std::env::var("UNDOLOG_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let database = format!("undolog_bench_{}", std::process::id());
    let store = runtime.block_on(async {
        admin(&server, &format!("CREATE DATABASE \"{database}\"")).await;
        let url = PgConnectOptions::from_str(&server)
            .unwrap()
            .database(&database)
            .to_url_lossy()
            .to_string();
        let options = PostgresOptions {
            max_connections: 40,
            ..PostgresOptions::new(url)
        };
        Arc::new(PostgresStore::open(options).await.unwrap())
    });

    let mut group = c.benchmark_group("postgres_intercept_commit");
    for sessions in SESSIONS {
        group.throughput(Throughput::Elements(sessions as u64));
        group.bench_function(BenchmarkId::from_parameter(sessions), |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                let store = Arc::clone(&store);
                async move {
                    let start = Instant::now();
                    let tasks: Vec<_> = (0..sessions)
                        .map(|_| tokio::spawn(session_calls(Arc::clone(&store), iters)))
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

    runtime.block_on(async {
        store.close().await;
        admin(
            &server,
            &format!("DROP DATABASE IF EXISTS \"{database}\" WITH (FORCE)"),
        )
        .await;
    });
}

/// `calls` new calls, one after another, in a session of its own.
async fn session_calls(store: Arc<PostgresStore>, calls: u64) {
    let org = OrgId::new("bench").unwrap();
    let session = SessionId::new(EffectId::generate().to_string()).unwrap();
    let mut tx = store.begin(&org).await.unwrap();
    tx.put_session(&Session {
        org: org.clone(),
        id: session.clone(),
        state: SessionState::Active,
        next_seq: 0,
        failed_effect: None,
        undo_claim: None,
        run_of: None,
        opened_by: None,
        created_at: Timestamp::now(),
        updated_at: Timestamp::now(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    for n in 0..calls {
        let args = Args::try_from(json!({"from": "alice", "to": "bob", "amount": n})).unwrap();
        let signature = CallIdentity {
            org: &org,
            session: &session,
            tool: "transfer",
            args: &args,
            step: None,
        }
        .signature();

        let mut tx = store.begin(&org).await.unwrap();
        tx.lock(signature.lock_key()).await.unwrap();
        let mut s = tx.session(&session).await.unwrap().unwrap();
        assert!(
            tx.latest_effect_by_signature(&signature)
                .await
                .unwrap()
                .is_none()
        );
        let now = Timestamp::now();
        let mut effect = Effect {
            id: EffectId::generate(),
            org: org.clone(),
            session: session.clone(),
            seq: s.next_seq,
            tool: "transfer".into(),
            args,
            step: None,
            signature,
            idempotency_key: None,
            tier: Tier::Compensable,
            compensation: Some(Compensation::Upstream {
                tool: "refund".into(),
                args: json!({"id": "{{result.id}}"}),
            }),
            state: EffectState::Pending,
            result: None,
            error: None,
            verdicts: None,
            approval: None,
            lease: None,
            lease_token: None,
            created_at: now,
            updated_at: now,
            completed_at: None,
            resolved_by: None,
        };
        tx.insert_effect(&effect).await.unwrap();
        s.next_seq += 1;
        s.updated_at = now;
        tx.put_session(&s).await.unwrap();
        tx.commit().await.unwrap();

        let mut tx = store.begin(&org).await.unwrap();
        assert!(tx.effect(effect.id).await.unwrap().is_some());
        effect.state = EffectState::Committed;
        effect.result = Some(json!({"id": n}));
        effect.completed_at = Some(Timestamp::now());
        tx.update_effect(&effect).await.unwrap();
        tx.push_undo(&session, effect.id, Timestamp::now())
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
}

async fn admin(server: &str, sql: &str) {
    let mut conn = PgConnectOptions::from_str(server)
        .unwrap()
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {server} does not answer: {e}"));
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
