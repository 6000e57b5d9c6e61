//! An interceptor server as a child process on stdio, invoked over the wire from a chain.

use serde_json::json;
use undolog_interceptors::builtin::{CrossBoundaryGuard, SecretRedactor};
use undolog_interceptors::{
    Chain, ChainRequest, InterceptorClient, InvocationContext, Member, Phase,
};

#[tokio::test]
async fn remote_interceptors_over_stdio() {
    let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_undolog-builtin-interceptors"));
    let client = InterceptorClient::connect_stdio(command)
        .await
        .expect("child speaks MCP on stdio");
    assert!(client.advertises_interceptors());

    let mut chain = Chain::new();
    for remote in client.interceptors().await.unwrap() {
        let member = Member::new(remote.clone());
        chain
            .push(if remote.descriptor().name == CrossBoundaryGuard::NAME {
                member.with_config(json!({"toolServers": {"read_file": "fs", "write_query": "db"}}))
            } else {
                member
            })
            .unwrap();
    }
    let names: Vec<_> = client
        .interceptors()
        .await
        .unwrap()
        .iter()
        .map(|i| i.descriptor().name.clone())
        .collect();
    assert_eq!(names, [SecretRedactor::NAME, CrossBoundaryGuard::NAME]);

    let ctx = InvocationContext {
        session_id: Some("s1".into()),
        ..Default::default()
    };
    let run = |phase, payload| {
        chain.execute(ChainRequest::new("tools/call", phase, payload).with_context(ctx.clone()))
    };
    let secret = "AKIA5MZXN8QRF3WBY6OE";
    assert!(
        run(
            Phase::Request,
            json!({"name": "read_file", "arguments": {"path": ".env"}})
        )
        .await
        .is_allowed()
    );
    assert!(
        run(
            Phase::Response,
            json!({"content": [{"type": "text", "text": secret}]})
        )
        .await
        .is_allowed()
    );
    // The redactor runs first on the way out, so the guard sees no secret and the call goes on clean.
    let r = run(
        Phase::Request,
        json!({"name": "write_query", "arguments": {"query": secret}}),
    )
    .await;
    assert!(r.is_allowed(), "{r:?}");
    assert!(!r.final_payload.unwrap().to_string().contains(secret));

    // Without the redactor, the guard alone stops the same flow in another session.
    let guard = client
        .interceptors()
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.descriptor().name == CrossBoundaryGuard::NAME);
    let tool_servers = json!({"toolServers": {"read_file": "fs", "write_query": "db"}});
    let mut guarded = Chain::new();
    guarded
        .push(Member::new(guard.unwrap()).with_config(tool_servers))
        .unwrap();
    let ctx = InvocationContext {
        session_id: Some("s2".into()),
        ..Default::default()
    };
    let run = |phase, payload| {
        guarded.execute(ChainRequest::new("tools/call", phase, payload).with_context(ctx.clone()))
    };
    assert!(
        run(
            Phase::Request,
            json!({"name": "read_file", "arguments": {"path": ".env"}})
        )
        .await
        .is_allowed()
    );
    assert!(
        run(
            Phase::Response,
            json!({"content": [{"type": "text", "text": secret}]})
        )
        .await
        .is_allowed()
    );
    let r = run(
        Phase::Request,
        json!({"name": "write_query", "arguments": {"query": secret}}),
    )
    .await;
    let error = r.to_error().expect("the guard blocks a cross-server flow");
    assert_eq!(error.code.0, -32602);
    assert!(
        error
            .message
            .contains("read from `fs` may not be sent to `db`"),
        "{}",
        error.message
    );
}
