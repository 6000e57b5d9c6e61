//! `undolog engine`, run as a user runs it: the engine alone over gRPC.

use std::process::Command;

use serde_json::json;
use undolog_gateway::grpc::proto::{
    CommitRequest, InterceptRequest, Tier, effect_engine_client::EffectEngineClient,
    intercept_reply::Decision,
};

use crate::gateway::{free_port, listening};

#[test]
fn engine_serves_grpc_on_loopback_and_refuses_a_public_address_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("u.db").display());
    let refused = Command::new(env!("CARGO_BIN_EXE_undolog"))
        .args(["engine", "--listen", "0.0.0.0:0", "--store", &store])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("no API keys exist"), "{said}");

    let port = free_port();
    let _engine = listening("engine", port, &store, dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let url = format!("http://127.0.0.1:{port}");
        let mut client = loop {
            match EffectEngineClient::connect(url.clone()).await {
                Ok(client) => break client,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        };
        let call = || InterceptRequest {
            session_id: "cli-grpc".into(),
            tool: "lookup".into(),
            arguments_json: json!({"q": 1}).to_string(),
            tier: Tier::Compensable as i32,
            ..InterceptRequest::default()
        };
        let first = client.intercept(call()).await.unwrap().into_inner();
        let Some(Decision::Execute(run)) = first.decision else {
            panic!("{first:?}");
        };
        let commit = CommitRequest {
            effect_id: run.effect_id,
            result_json: json!({"found": true}).to_string(),
            verdicts_json: None,
            without_effect: false,
            lease_token: run.lease_token,
        };
        client.commit(commit).await.unwrap();
        let again = client.intercept(call()).await.unwrap().into_inner();
        assert!(
            matches!(again.decision, Some(Decision::Replay(_))),
            "{again:?}"
        );
    });
}
