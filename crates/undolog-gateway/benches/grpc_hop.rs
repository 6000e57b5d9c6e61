//! What the gRPC hop to the engine costs: intercept + commit of a new compensable call, in
//! process (`Engine` called directly) and over gRPC (the generated client to `serve_engine` on
//! loopback, one HTTP/2 connection), on the same gateway and SQLite file (`synchronous=FULL`),
//! one call at a time and 32 at once.
//!
//! Run: cargo bench -p undolog-gateway --bench grpc_hop -- --warm-up-time 2 --measurement-time 8

use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::future::join_all;
use serde_json::json;
use tonic::transport::Channel;
use undolog_engine::{Call, Intercept, ToolPolicy};
use undolog_gateway::{
    ConfigSource, Gateway, GatewayConfig,
    grpc::proto::{
        CommitRequest, InterceptRequest, Tier as WireTier,
        effect_engine_client::EffectEngineClient, intercept_reply::Decision,
    },
};
use undolog_types::{Args, OrgId, SessionId, Tier};

static NEXT: AtomicU64 = AtomicU64::new(0);

async fn in_process(gateway: &Gateway) {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let args = Args::try_from(json!({"to": "bob", "amount": n})).unwrap();
    let call = Call::new(
        OrgId::new("default").unwrap(),
        SessionId::new(format!("hop-{}", n % 64)).unwrap(),
        "pay",
        args,
        ToolPolicy::new(Tier::Compensable),
    )
    .with_caller("local operator");
    let engine = gateway.engine().expect("a local engine");
    let Intercept::Execute {
        effect_id,
        lease_token,
        ..
    } = engine.intercept(call).await.unwrap()
    else {
        panic!("a new call runs");
    };
    let org = OrgId::new("default").unwrap();
    engine
        .commit(&org, effect_id, &lease_token, json!({"paid": n}))
        .await
        .unwrap();
}

async fn over_grpc(mut client: EffectEngineClient<Channel>) {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let request = InterceptRequest {
        session_id: format!("hop-{}", n % 64),
        tool: "pay".into(),
        arguments_json: json!({"to": "bob", "amount": n}).to_string(),
        tier: WireTier::Compensable as i32,
        ..InterceptRequest::default()
    };
    let answer = client.intercept(request).await.unwrap().into_inner();
    let Some(Decision::Execute(run)) = answer.decision else {
        panic!("a new call runs");
    };
    let commit = CommitRequest {
        effect_id: run.effect_id,
        result_json: json!({"paid": n}).to_string(),
        verdicts_json: None,
        without_effect: true,
        lease_token: run.lease_token,
    };
    client.commit(commit).await.unwrap();
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (gateway, client) = runtime.block_on(async {
        let config = GatewayConfig::load(&ConfigSource {
            store: Some(format!("sqlite://{}", dir.path().join("hop.db").display())),
            ..ConfigSource::default()
        })
        .unwrap();
        let gateway = Gateway::build(config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(undolog_gateway::serve_engine(
            gateway.clone(),
            listener,
            std::future::pending(),
        ));
        let channel = loop {
            let endpoint = Channel::from_shared(url.clone()).unwrap();
            if let Ok(channel) = endpoint.connect().await {
                break channel;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        (gateway, EffectEngineClient::new(channel))
    });
    for concurrent in [1usize, 32] {
        let mut group = c.benchmark_group(format!("grpc_hop/{concurrent}"));
        group.throughput(Throughput::Elements(concurrent as u64));
        group.bench_function("in_process", |b| {
            b.to_async(&runtime).iter(|| async {
                join_all((0..concurrent).map(|_| in_process(&gateway))).await;
            });
        });
        group.bench_function("grpc", |b| {
            b.to_async(&runtime).iter(|| async {
                join_all((0..concurrent).map(|_| over_grpc(client.clone()))).await;
            });
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
