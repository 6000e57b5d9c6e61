//! What the interceptor chain costs per message: 0, 1, 4 and 16 in-process validators, and one
//! remote interceptor (the built-in redactor served by `undolog-builtin-interceptors` over stdio,
//! invoked over the MCP wire).
//!
//! Run: cargo bench -p undolog-interceptors --bench chain_cost

use std::sync::Arc;

use async_trait::async_trait;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use undolog_interceptors::{
    Chain, ChainRequest, Descriptor, Error, Interceptor, InterceptorClient, InterceptorType,
    Invocation, Outcome, Phase, builtin::SecretRedactor, wire::Validation,
};

/// A validator that looks at the payload and passes it: the cheapest real work a validator does.
#[derive(Debug)]
struct Passing(Descriptor);

#[async_trait]
impl Interceptor for Passing {
    fn descriptor(&self) -> &Descriptor {
        &self.0
    }

    async fn invoke(&self, invocation: Invocation) -> Result<Outcome, Error> {
        let _ = invocation.payload.get("arguments");
        Ok(Outcome::Validation(Validation::pass()))
    }
}

fn validators(n: usize) -> Chain {
    (0..n)
        .map(|i| {
            let d = Descriptor::new(
                format!("v{i:02}"),
                InterceptorType::Validation,
                &["tools/*"],
                &[Phase::Request],
            );
            Arc::new(Passing(d)) as Arc<dyn Interceptor>
        })
        .try_fold(Chain::new(), Chain::with)
        .expect("the chain builds")
}

fn payload() -> Value {
    json!({"name": "transfer", "arguments": {"from_account": "alice", "to_account": "bob", "amount": 10}})
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("chain_per_message");
    for n in [0, 1, 4, 16] {
        let chain = validators(n);
        group.bench_function(BenchmarkId::new("in_process_validators", n), |b| {
            b.to_async(&runtime)
                .iter(|| chain.execute(ChainRequest::new("tools/call", Phase::Request, payload())));
        });
    }
    let remote = runtime.block_on(async {
        let command =
            tokio::process::Command::new(env!("CARGO_BIN_EXE_undolog-builtin-interceptors"));
        let client = InterceptorClient::connect_stdio(command).await.unwrap();
        let redactor = client
            .interceptors()
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.descriptor().name == SecretRedactor::NAME)
            .expect("the server offers the redactor");
        (Chain::new().with(redactor).unwrap(), client)
    });
    group.bench_function(BenchmarkId::new("remote_over_stdio", 1), |b| {
        b.to_async(&runtime).iter(|| {
            remote
                .0
                .execute(ChainRequest::new("tools/call", Phase::Request, payload()))
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
