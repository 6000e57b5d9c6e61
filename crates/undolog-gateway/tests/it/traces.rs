//! Traces as a collector receives them: a small OTLP/HTTP receiver, decoding with the official
//! protobuf definitions (`opentelemetry-proto`), takes the gateway's exports; the spans of one
//! tool call follow the OpenTelemetry MCP conventions, hang under the client's trace, and have
//! the interceptor chain, the store and the upstream call as children; the upstream request
//! carries the upstream span as its `traceparent`.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::{
    collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse},
    common::v1::any_value,
    trace::v1::{Span, span::SpanKind, status::StatusCode},
};
use prost::Message;
use serde_json::{Value, json};

use crate::harness::{BANK_TOOLS, Bank, TestGateway, split};

/// Spans received, in the order they came.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Span>>>);

/// Serves `POST /v1/traces` (OTLP/HTTP, protobuf) on a port of its own; its base URL.
async fn receiver(received: Received) -> String {
    async fn export(
        axum::extract::State(received): axum::extract::State<Received>,
        body: axum::body::Bytes,
    ) -> impl axum::response::IntoResponse {
        let request = ExportTraceServiceRequest::decode(body).expect("an OTLP export");
        let spans = request
            .resource_spans
            .into_iter()
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans);
        received.0.lock().unwrap().extend(spans);
        (
            [("content-type", "application/x-protobuf")],
            ExportTraceServiceResponse::default().encode_to_vec(),
        )
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = axum::Router::new()
        .route("/v1/traces", axum::routing::post(export))
        .with_state(received);
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    base
}

impl Received {
    /// The spans of `trace` (hex), once `count` of them arrived (within 20 s).
    async fn trace(&self, trace: &str, count: usize) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans: Vec<Span> = (self.0.lock().unwrap().iter())
                .filter(|s| hex(&s.trace_id) == trace)
                .cloned()
                .collect();
            if spans.len() >= count || Instant::now() > deadline {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span
        .attributes
        .iter()
        .find(|a| a.key == key)?
        .value
        .clone()?;
    match value.value? {
        any_value::Value::StringValue(s) => Some(s),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        other => Some(format!("{other:?}")),
    }
}

fn named<'a>(spans: &'a [Span], name: &str, kind: SpanKind) -> &'a Span {
    spans
        .iter()
        .find(|s| s.name == name && s.kind == kind as i32)
        .unwrap_or_else(|| {
            let names: Vec<_> = spans.iter().map(|s| (&s.name, s.kind)).collect();
            panic!("no {kind:?} span {name:?} among {names:?}")
        })
}

/// A W3C `traceparent` of a client span, and its trace and span ids.
fn client_trace(n: u8) -> (String, String, String) {
    let trace = format!(
        "{:032x}",
        0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4700_u128 + n as u128
    );
    let span = format!("{:016x}", 0x00f0_67aa_0ba9_02b7_u64 + n as u64);
    (format!("00-{trace}-{span}-01"), trace, span)
}

async fn call(gw: &TestGateway, tool: &str, arguments: Value, traceparent: &str) -> Value {
    let params = json!({
        "name": tool,
        "arguments": arguments,
        "_meta": {"traceparent": traceparent, "tracestate": "vendor=1"},
    });
    gw.tools_call(params).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_spans_hang_under_the_clients_trace_with_the_store_and_upstream_as_children() {
    let received = Received::default();
    let collector = receiver(received.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let requests = dir.path().join("requests.jsonl");
    let bank = Bank::start_with(&["--log-requests".as_ref(), requests.as_os_str()]).await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{BANK_TOOLS}\n\
         [tools.fail_always]\ntier = \"read_only\"\n\
         [traces]\notlp_endpoint = \"{collector}\"\nexport_every_ms = 100\n",
        bank.url
    ))
    .await;

    // A compensable call: recorded before it runs and after.
    let (parent, trace, client_span) = client_trace(1);
    let transfer = json!({"from_account": "alice", "to_account": "bob", "amount": 3});
    let answer = call(&gw, "transfer", transfer, &parent).await;
    assert!(answer["result"]["isError"] != json!(true), "{answer}");
    // Split, each of the two records also has the engine's server span and store span.
    let spans = received.trace(&trace, if split() { 10 } else { 6 }).await;
    let server = named(&spans, "tools/call transfer", SpanKind::Server);
    assert_eq!(
        hex(&server.parent_span_id),
        client_span,
        "the client's span is the parent"
    );
    for (key, want) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "transfer"),
        ("gen_ai.operation.name", "execute_tool"),
        ("mcp.protocol.version", "2026-07-28"),
        ("jsonrpc.request.id", "1"),
        ("undolog.outcome", "executed"),
    ] {
        assert_eq!(attribute(server, key).as_deref(), Some(want), "{key}");
    }
    assert_eq!(attribute(server, "error.type"), None);
    // Split, a store operation is a request to the engine.
    let store_kind = if split() {
        SpanKind::Client
    } else {
        SpanKind::Internal
    };
    let children = [
        ("interceptors request", SpanKind::Internal),
        ("store intercept", store_kind),
        ("tools/call transfer", SpanKind::Client),
        ("interceptors response", SpanKind::Internal),
        ("store record_outcome", store_kind),
    ];
    for (name, kind) in children {
        let child = named(&spans, name, kind);
        assert_eq!(
            child.parent_span_id, server.span_id,
            "{name} is the call's child"
        );
        assert!(
            child.start_time_unix_nano >= server.start_time_unix_nano,
            "{name}"
        );
        assert!(
            child.end_time_unix_nano <= server.end_time_unix_nano,
            "{name}"
        );
    }
    let store = named(&spans, "store intercept", SpanKind::Internal);
    assert_eq!(
        attribute(store, "db.system.name").as_deref(),
        Some("sqlite")
    );
    if split() {
        // The engine's spans hang under the gateway's requests to it.
        for (operation, method) in [("intercept", "Intercept"), ("record_outcome", "Commit")] {
            let request = named(&spans, &format!("store {operation}"), SpanKind::Client);
            assert_eq!(
                attribute(request, "rpc.system.name").as_deref(),
                Some("grpc")
            );
            let method = format!("undolog.engine.v1.EffectEngine/{method}");
            let served = named(&spans, &method, SpanKind::Server);
            assert_eq!(served.parent_span_id, request.span_id, "{method}");
            assert_eq!(attribute(served, "rpc.method").as_deref(), Some(&*method));
            let stored = spans
                .iter()
                .find(|s| {
                    s.name == format!("store {operation}") && s.parent_span_id == served.span_id
                })
                .unwrap_or_else(|| panic!("the engine's store {operation} span"));
            assert_eq!(
                attribute(stored, "db.system.name").as_deref(),
                Some("sqlite")
            );
        }
    }

    // The upstream heard the upstream span as its parent, in the request's own `_meta`.
    let upstream = named(&spans, "tools/call transfer", SpanKind::Client);
    let sent = format!("00-{trace}-{}-01", hex(&upstream.span_id));
    let log = std::fs::read_to_string(&requests).unwrap();
    let heard: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["body"]["method"] == "tools/call")
        .collect();
    assert_eq!(heard.len(), 1, "{log}");
    assert_eq!(heard[0]["body"]["params"]["_meta"]["traceparent"], sent);

    // A tool error, on the read-only path (one record, after the call).
    let (parent, trace, _) = client_trace(2);
    let answer = call(&gw, "fail_always", json!({}), &parent).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let spans = received.trace(&trace, if split() { 7 } else { 5 }).await;
    let server = named(&spans, "tools/call fail_always", SpanKind::Server);
    assert_eq!(
        attribute(server, "error.type").as_deref(),
        Some("tool_error")
    );
    let status = server.status.clone().expect("a status");
    assert_eq!(status.code, StatusCode::Error as i32);
    let upstream = named(&spans, "tools/call fail_always", SpanKind::Client);
    assert_eq!(
        attribute(upstream, "error.type").as_deref(),
        Some("tool_error")
    );
    let read = named(&spans, "store record_read", store_kind);
    assert_eq!(read.parent_span_id, server.span_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_collector_costs_the_call_nothing() {
    // Nothing listens there: every export fails, in the background.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let gw = TestGateway::start(&format!(
        "[traces]\notlp_endpoint = \"http://{dead}\"\nexport_every_ms = 50\n"
    ))
    .await;
    for n in 0..20u8 {
        let (parent, _, _) = client_trace(n);
        let started = Instant::now();
        let transfer = json!({"from_account": "alice", "to_account": "bob", "amount": n + 1});
        let answer = call(&gw, "transfer", transfer, &parent).await;
        assert!(answer["result"]["isError"] != json!(true), "{answer}");
        // An export waits up to 10 s for a collector; a call never does.
        assert!(started.elapsed() < Duration::from_secs(5), "call {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
