//! OpenTelemetry traces of tool calls, exported over OTLP/HTTP when `[traces]` is configured.
//!
//! Spans follow the OpenTelemetry semantic conventions for MCP: a server span
//! `tools/call {tool}` per call, whose parent is the client's trace (`traceparent` and
//! `tracestate` in the request's `params._meta`), with children for the interceptor chain, the
//! store and the upstream call; the upstream request carries the upstream span's `traceparent`
//! in its own `_meta`. One tracer provider per gateway (no global one), so gateways in one
//! process export apart. Spans are sent in the background by the SDK's batch processor: a dead
//! collector drops spans, never slows a call.
//!
//! The span context travels with the call's future ([`FutureExt::with_context`]), so code on
//! the call's path starts children from [`Context::current`] without passing it around.
//!
//! It holds the tracer and the spans of the call path; it knows the MCP request's `_meta` and
//! nothing of the gateway's other parts.

use std::{borrow::Cow, collections::HashMap, future::Future};

use futures::{FutureExt as _, future::Either};

use opentelemetry::{
    Context, KeyValue,
    context::FutureExt,
    propagation::TextMapPropagator,
    trace::{SpanKind, Status, TraceContextExt, Tracer, TracerProvider as _},
};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::{
    Resource,
    propagation::TraceContextPropagator,
    trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider},
};
use rmcp::model::RequestMetaObject;
use serde_json::Value;

use undolog_config::TraceSettings;

/// The exporter `traces.otlp_endpoint` names cannot be built.
#[derive(Debug, thiserror::Error)]
#[error("`traces.otlp_endpoint`: the OTLP exporter cannot be built: {0}")]
pub struct ExporterError(String);

/// The gateway's tracer; does nothing when traces are not configured.
#[derive(Debug, Default)]
pub struct Traces {
    exporting: Option<(SdkTracerProvider, SdkTracer)>,
    /// `db.system.name` of the store's spans; `None` for a gateway in front of an engine, whose
    /// store operations are requests to it (client spans the engine's spans hang under).
    store_system: Option<&'static str>,
}

/// What the server span of one `tools/call` says about the request.
#[derive(Debug)]
pub struct CallRequest<'a> {
    pub tool: &'a str,
    pub meta: Option<&'a RequestMetaObject>,
    pub protocol_version: Option<String>,
    pub request_id: Option<String>,
}

impl Traces {
    /// The exporter of `settings`, or a tracer that does nothing.
    pub fn start(
        settings: Option<&TraceSettings>,
        store_system: Option<&'static str>,
    ) -> Result<Traces, ExporterError> {
        let Some(settings) = settings else {
            return Ok(Traces {
                exporting: None,
                store_system,
            });
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(&settings.endpoint)
            .build()
            .map_err(|e| ExporterError(e.to_string()))?;
        let batches = BatchConfigBuilder::default()
            .with_scheduled_delay(settings.export_every)
            .build();
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batches)
            .build();
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("undolog");
        Ok(Traces {
            exporting: Some((provider, tracer)),
            store_system,
        })
    }

    /// Whether spans are exported at all.
    pub fn exporting(&self) -> bool {
        self.exporting.is_some()
    }

    /// The server span of a tool call, as a context whose parent is the client's trace when its
    /// `_meta` names one. Without traces: the client's trace alone (for the log's trace id).
    pub fn tool_call(&self, request: &CallRequest<'_>) -> Context {
        let parent = request
            .meta
            .map(|meta| TraceContextPropagator::new().extract(&MetaCarrier(&meta.0.0)))
            .unwrap_or_default();
        let Some((_, tracer)) = &self.exporting else {
            return parent;
        };
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("gen_ai.tool.name", request.tool.to_owned()),
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
        ];
        if let Some(version) = &request.protocol_version {
            attributes.push(KeyValue::new("mcp.protocol.version", version.clone()));
        }
        if let Some(id) = &request.request_id {
            attributes.push(KeyValue::new("jsonrpc.request.id", id.clone()));
        }
        let span = tracer
            .span_builder(format!("tools/call {}", request.tool))
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        parent.with_span(span)
    }

    /// Runs `work` in a child span of the current one, which `span` names and describes when
    /// traces are exported (it is not called otherwise: no name is formatted per call for
    /// nothing).
    ///
    /// A plain function that returns a combinator, like the wrappers below, not an `async fn`:
    /// an async wrapper holds the future it was given and the future it awaits side by side, so
    /// every layer of wrappers doubles the size of what the next one moves.
    fn within<T>(
        &self,
        span: impl FnOnce() -> (String, SpanKind, Vec<KeyValue>),
        work: impl Future<Output = T>,
    ) -> impl Future<Output = T> {
        let cx = self.exporting.as_ref().and_then(|_| {
            let (name, kind, attributes) = span();
            self.child(name, kind, attributes)
        });
        match cx {
            Some(cx) => Either::Left(
                work.with_context(cx.clone())
                    .inspect(move |_| cx.span().end()),
            ),
            None => Either::Right(work),
        }
    }

    /// Runs one engine operation (a store transaction) in a span of its own: a client span when
    /// the engine is another process (the request carries it as `traceparent`).
    pub fn store<T>(
        &self,
        operation: &'static str,
        work: impl Future<Output = T>,
    ) -> impl Future<Output = T> {
        let system = self.store_system;
        let span = move || {
            let (kind, attributes) = match system {
                Some(system) => (
                    SpanKind::Internal,
                    vec![
                        KeyValue::new("db.system.name", system),
                        KeyValue::new("db.operation.name", operation),
                    ],
                ),
                None => (
                    SpanKind::Client,
                    vec![
                        KeyValue::new("rpc.system.name", "grpc"),
                        KeyValue::new("undolog.store.operation", operation),
                    ],
                ),
            };
            (format!("store {operation}"), kind, attributes)
        };
        self.within(span, work)
    }

    /// The server span of one request to the engine over gRPC (`path` is
    /// `/undolog.engine.v1.EffectEngine/Method`), under the trace its `traceparent` names.
    pub fn engine_request(&self, path: &str, headers: &http::HeaderMap) -> Option<Context> {
        let (_, tracer) = self.exporting.as_ref()?;
        let parent = TraceContextPropagator::new().extract(&HeaderCarrier(headers));
        let method = path.trim_start_matches('/').to_owned();
        let span = tracer
            .span_builder(method.clone())
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("rpc.system.name", "grpc"),
                KeyValue::new("rpc.method", method),
            ])
            .start_with_context(tracer, &parent);
        Some(parent.with_span(span))
    }

    /// Runs the interceptor chain of one phase (`request`, `response`) in a span of its own.
    pub fn interceptors<T>(
        &self,
        phase: &'static str,
        work: impl Future<Output = T>,
    ) -> impl Future<Output = T> {
        let span = move || {
            let attributes = vec![
                KeyValue::new("mcp.method.name", "tools/call"),
                KeyValue::new("undolog.interceptors.phase", phase),
            ];
            (
                format!("interceptors {phase}"),
                SpanKind::Internal,
                attributes,
            )
        };
        self.within(span, work)
    }

    /// The client span of the call sent upstream, its `traceparent` written into `meta`.
    pub fn upstream_call(
        &self,
        upstream_tool: &str,
        upstream: &str,
        meta: &mut Option<RequestMetaObject>,
    ) -> Option<Context> {
        let attributes = vec![
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("gen_ai.tool.name", upstream_tool.to_owned()),
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("undolog.upstream", upstream.to_owned()),
        ];
        let name = format!("tools/call {upstream_tool}");
        let cx = self.child(name, SpanKind::Client, attributes)?;
        let mut fields = HashMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut fields);
        let meta = meta.get_or_insert_with(RequestMetaObject::default);
        for (key, value) in fields {
            meta.0.0.insert(key, Value::String(value));
        }
        Some(cx)
    }

    fn child(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> Option<Context> {
        let (_, tracer) = self.exporting.as_ref()?;
        let parent = Context::current();
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        Some(parent.with_span(span))
    }
}

/// Ends a call's span: `error.type` names how it failed, `tool_error` when the tool said so.
pub fn end_call(cx: &Context, failure: Option<&str>, attributes: Vec<KeyValue>) {
    let span = cx.span();
    span.set_attributes(attributes);
    if let Some(kind) = failure {
        span.set_attribute(KeyValue::new("error.type", kind.to_owned()));
        span.set_status(Status::error(kind.to_owned()));
    }
    span.end();
}

/// The trace id of `cx`, when it belongs to a trace (the log lines of a call carry it).
pub fn trace_id(cx: &Context) -> Option<String> {
    let span = cx.span();
    let context = span.span_context();
    context.is_valid().then(|| context.trace_id().to_string())
}

/// The W3C trace context of the current span, as `(header, value)` pairs for a request to
/// another process; none outside a trace.
pub fn propagated() -> HashMap<String, String> {
    let mut fields = HashMap::new();
    let cx = Context::current();
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&cx, &mut fields);
    }
    fields
}

/// A request's headers (or gRPC metadata) as the carrier of W3C trace context.
struct HeaderCarrier<'a>(&'a http::HeaderMap);

impl opentelemetry::propagation::Extractor for HeaderCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// A request's `_meta` as the carrier of W3C trace context.
struct MetaCarrier<'a>(&'a serde_json::Map<String, Value>);

impl opentelemetry::propagation::Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}
