//! Malformed and hostile requests to an interceptor server, over a real MCP connection: each gets
//! the JSON-RPC error a client can act on, and the server keeps serving.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::ServiceExt;
use rmcp::model::{ClientRequest, CustomRequest, ServerResult};
use rmcp::service::ServiceError;
use serde_json::{Value, json};
use undolog_interceptors::builtin::SecretRedactor;
use undolog_interceptors::{
    Descriptor, Error, Interceptor, InterceptorServer, InterceptorType, Invocation, Outcome, Phase,
    Registry,
};

/// What is sent, and the expected answer: a result, or a JSON-RPC error code.
type Case = (&'static str, &'static str, Option<Value>, Result<(), i32>);

/// Crashes on `crash`, sleeps 5 s on `slow`, passes otherwise.
#[derive(Debug)]
struct Moody(Descriptor);

#[async_trait]
impl Interceptor for Moody {
    fn descriptor(&self) -> &Descriptor {
        &self.0
    }

    async fn invoke(&self, inv: Invocation) -> Result<Outcome, Error> {
        match inv.payload.get("mood").and_then(Value::as_str) {
            Some("crash") => Err(Error::Handler {
                name: self.0.name.clone(),
                reason: "asked to crash".into(),
            }),
            Some("slow") => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(Outcome::Validation(
                    undolog_interceptors::wire::Validation::pass(),
                ))
            }
            _ => Ok(Outcome::Validation(
                undolog_interceptors::wire::Validation::pass(),
            )),
        }
    }
}

#[tokio::test]
async fn bad_requests_get_actionable_json_rpc_errors() {
    let mut registry = Registry::new();
    let mut moody = Descriptor::new(
        "moody",
        InterceptorType::Validation,
        &["*"],
        &[Phase::Request],
    );
    moody.config_schema = Some(json!({"type": "object", "additionalProperties": false}));
    registry.register(Arc::new(Moody(moody))).unwrap();
    registry.register(Arc::new(SecretRedactor::new())).unwrap();
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = InterceptorServer::new(registry, "bad-input");
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(client_io).await.unwrap();

    let ok = |payload: Value| json!({"name": "moody", "event": "tools/call", "phase": "request", "payload": payload});
    let cases: Vec<Case> = vec![
        ("no params", "interceptor/invoke", None, Err(-32602)),
        (
            "no name",
            "interceptor/invoke",
            Some(json!({"event": "tools/call", "phase": "request", "payload": {}})),
            Err(-32602),
        ),
        (
            "unknown phase",
            "interceptor/invoke",
            Some(json!({"name": "moody", "event": "e", "phase": "sideways", "payload": {}})),
            Err(-32602),
        ),
        (
            "params not an object",
            "interceptor/invoke",
            Some(json!([1, 2])),
            Err(-32602),
        ),
        (
            "config against configSchema",
            "interceptor/invoke",
            Some(
                json!({"name": "moody", "event": "e", "phase": "request", "payload": {}, "config": {"x": 1}}),
            ),
            Err(-32602),
        ),
        (
            "handler crash",
            "interceptor/invoke",
            Some(ok(json!({"mood": "crash"}))),
            Err(-32603),
        ),
        (
            "timeoutMs exceeded",
            "interceptor/invoke",
            Some(
                json!({"name": "moody", "event": "e", "phase": "request", "payload": {"mood": "slow"}, "timeoutMs": 20}),
            ),
            Err(-32000),
        ),
        (
            "list filter of the wrong type",
            "interceptors/list",
            Some(json!({"event": 5})),
            Err(-32602),
        ),
        (
            "unknown method",
            "interceptors/delete",
            Some(json!({})),
            Err(-32601),
        ),
        (
            "list with _meta",
            "interceptors/list",
            Some(json!({"_meta": {"progressToken": 1}})),
            Ok(()),
        ),
        (
            "still serving after all that",
            "interceptor/invoke",
            Some(ok(json!({}))),
            Ok(()),
        ),
    ];
    for (what, method, params, expected) in cases {
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, params));
        let got = match client.send_request(request).await {
            Ok(ServerResult::CustomResult(_)) => Ok(()),
            Ok(other) => panic!("{what}: unexpected result {other:?}"),
            Err(ServiceError::McpError(e)) => {
                assert!(!e.message.is_empty(), "{what}: the error says nothing");
                Err(e.code.0)
            }
            Err(e) => panic!("{what}: transport failed: {e}"),
        };
        assert_eq!(got, expected, "{what}");
    }
}
