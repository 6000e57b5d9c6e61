//! A 2026-07-28 `tools/call` posted straight to a Streamable HTTP upstream.
//!
//! In the stateless revision a request is one self-contained POST, answered on its own response
//! (JSON, or an event stream that ends with the answer). When nothing of what the upstream may
//! send meanwhile is wanted — the client asked for no progress and no log messages, so the relay
//! would drop it all — the call needs none of the MCP client's machinery (its worker task,
//! channels and the typed round trips through them): it is posted from the caller's own task
//! with the connection's negotiated version, the gateway's client info and the client's
//! capabilities, and its answer read off the response. Everything else goes through the MCP
//! client as before. The connection itself (its discovery, its reconnection) stays the MCP
//! client's: this path is taken only once the connection has negotiated a stateless revision.

use std::{
    io,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use futures::{FutureExt as _, StreamExt as _, stream::BoxStream};
use http::{HeaderMap, HeaderName, HeaderValue, header};
use hyper_util::client::proxy::matcher::Matcher;
use rmcp::model::{
    CallToolRequestParams, JsonObject, ProtocolVersion, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerResult,
};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{
    error::UpstreamError,
    post::{Answer, Failed, Poster},
};

const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// The most of a response this path reads, and of one event in an event stream: the MCP client's
/// own limit.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// A Streamable HTTP upstream, as this path posts to it.
#[derive(Debug)]
pub(super) struct Direct {
    poster: Poster,
    /// The headers every request carries: the configured ones (credentials and the like), then
    /// the body's type, what the answer may be, and the method (`tools/call`).
    headers: HeaderMap,
    next_id: AtomicU64,
}

/// What one call needs of the caller: who it is, how long it may take, and whether it wants
/// anything but the answer.
pub(super) struct Posted<'a> {
    pub(super) upstream: &'a str,
    pub(super) version: &'a ProtocolVersion,
    /// The call, its `_meta` completed in place before it is posted.
    pub(super) params: CallToolRequestParams,
    /// The client's per-request metadata (its capabilities), which speaks for it upstream.
    pub(super) client_meta: &'a RequestMetaObject,
    pub(super) timeout: Duration,
    pub(super) cancel: &'a CancellationToken,
}

impl Direct {
    /// `None` when the configured URL or headers do not make a request (the MCP client then
    /// reports what is wrong with them).
    pub(super) fn new(
        url: &str,
        configured: &[(String, String)],
        proxies: &Matcher,
    ) -> Option<Direct> {
        let mut headers = HeaderMap::new();
        for (name, value) in configured {
            let name = HeaderName::try_from(name.as_str()).ok()?;
            headers.insert(name, HeaderValue::try_from(value.as_str()).ok()?);
        }
        for (name, value) in [
            (header::CONTENT_TYPE, "application/json"),
            (header::ACCEPT, "application/json, text/event-stream"),
            (MCP_METHOD, "tools/call"),
        ] {
            headers.insert(name, HeaderValue::from_static(value));
        }
        Some(Direct {
            poster: Poster::new(url, proxies)?,
            headers,
            next_id: AtomicU64::new(1),
        })
    }

    /// Whether a call of a tool with this input schema (`None`: not known) can be posted here:
    /// one whose arguments must also travel as headers (`x-mcp-header`, SEP-2243) goes through
    /// the MCP client, which writes them; so does a name that needs encoding to be a header
    /// value.
    pub(super) fn takes(params: &CallToolRequestParams, schema: Option<&JsonObject>) -> bool {
        let plain_name =
            !params.name.is_empty() && params.name.bytes().all(|b| (0x21..=0x7e).contains(&b));
        plain_name && schema.is_some_and(|s| !mentions_header_params(s))
    }

    /// Posts the call and reads its answer, bounded by the timeout and the client's
    /// cancellation (dropping the request ends it upstream: a stateless request has nothing
    /// else to cancel).
    pub(super) async fn call(&self, mut posted: Posted<'_>) -> Result<ServerResult, UpstreamError> {
        let upstream = posted.upstream;
        let id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed) as i64);
        let headers = self.headers_for(&posted)?;
        let body = request_body(&id, &mut posted)
            .map_err(|e| unsendable(upstream, format!("its body did not serialize ({e})")))?;
        let sent = self.post(upstream, &id, headers, body);
        let answer = tokio::select! {
            answer = tokio::time::timeout(posted.timeout, sent) => answer,
            () = posted.cancel.cancelled() => return Err(UpstreamError::Cancelled),
        };
        answer.unwrap_or_else(|_| {
            Err(UpstreamError::TimedOut {
                upstream: upstream.to_owned(),
                after: posted.timeout,
            })
        })
    }

    /// The request's headers: the prepared ones, then the call's version and tool name. A
    /// version the upstream negotiated or a name that is not a header value is refused before
    /// anything is sent (`takes` lets only visible ASCII names through).
    fn headers_for(&self, posted: &Posted<'_>) -> Result<HeaderMap, UpstreamError> {
        let value = |what: &str, text: &str| {
            HeaderValue::try_from(text).map_err(|_| {
                unsendable(
                    posted.upstream,
                    format!("its {what} `{text}` is not a header value"),
                )
            })
        };
        let mut headers = self.headers.clone();
        let version = value("protocol version", posted.version.as_str())?;
        headers.insert(MCP_PROTOCOL_VERSION, version);
        headers.insert(MCP_NAME, value("tool name", posted.params.name.as_ref())?);
        Ok(headers)
    }

    async fn post(
        &self,
        upstream: &str,
        id: &RequestId,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<ServerResult, UpstreamError> {
        let answer = self.poster.post(headers, body).await.map_err(|e| match e {
            Failed::Connect(reason) => UpstreamError::Unavailable {
                upstream: upstream.to_owned(),
                reason: format!("cannot connect ({reason})"),
            },
            Failed::Broken(reason) => closed(upstream, &reason),
        })?;
        let Answer {
            status,
            event_stream,
            body,
        } = answer;
        let message = if status.is_success() && event_stream {
            answer_in_stream(body, id, upstream, MAX_RESPONSE_BYTES).await?
        } else {
            let bytes = limited_body(body, upstream).await?;
            match super::call_answer::read(&bytes) {
                Ok(message) => message,
                Err(_) if !status.is_success() => {
                    tracing::warn!(upstream, %status, "upstream answered a call with an HTTP error");
                    return Err(UpstreamError::Closed {
                        upstream: upstream.to_owned(),
                    });
                }
                Err(_) => {
                    return Err(UpstreamError::Garbage {
                        upstream: upstream.to_owned(),
                    });
                }
            }
        };
        match message {
            ServerJsonRpcMessage::Response(response) if response.id == *id => Ok(response.result),
            ServerJsonRpcMessage::Error(error) if error.id.as_ref().is_none_or(|e| e == id) => {
                Err(UpstreamError::Refused {
                    upstream: upstream.to_owned(),
                    error: error.error,
                })
            }
            _ => Err(UpstreamError::Garbage {
                upstream: upstream.to_owned(),
            }),
        }
    }
}

/// The JSON-RPC request: the call's own `_meta` (trace context and the like), then the
/// connection's per-request keys, then the client's, which speak for it (written into the call's
/// `_meta`).
fn request_body(id: &RequestId, posted: &mut Posted<'_>) -> serde_json::Result<Vec<u8>> {
    #[derive(Serialize)]
    struct Request<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        method: &'static str,
        params: &'a CallToolRequestParams,
    }
    let params = &mut posted.params;
    let meta = params.meta.get_or_insert_with(RequestMetaObject::default);
    meta.set_protocol_version(posted.version.clone());
    meta.set_client_info(crate::gateway_info());
    meta.extend(posted.client_meta.clone());
    serde_json::to_vec(&Request {
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params,
    })
}

/// The answer on an event stream: the first response or error to this request. What the
/// upstream sends before it (progress, log messages) nobody asked for.
///
/// The stream may be long (a tool that reports its progress for an hour), but no event in it may
/// pass `max_event_bytes`: the bytes read since the last complete event are counted, and past the
/// bound the answer is refused. An upstream that never ended a line, or an event, would otherwise
/// have everything it sends held in memory. Each event resets the count; what of the next event
/// came in the same chunk is forgotten, so the bound holds to within one chunk.
async fn answer_in_stream(
    body: BoxStream<'static, io::Result<Bytes>>,
    id: &RequestId,
    upstream: &str,
    max_event_bytes: usize,
) -> Result<ServerJsonRpcMessage, UpstreamError> {
    let since_event = Arc::new(AtomicUsize::new(0));
    let counted = since_event.clone();
    let body = body.map(move |chunk| {
        let chunk = chunk?;
        let held = counted.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
        if held > max_event_bytes {
            return Err(io::Error::other(format!(
                "an event of more than {max_event_bytes} bytes"
            )));
        }
        Ok(chunk)
    });
    let too_large = || {
        tracing::warn!(
            upstream,
            limit = max_event_bytes,
            "an event in an upstream's answer stream passed the size limit; the answer is refused"
        );
        UpstreamError::Garbage {
            upstream: upstream.to_owned(),
        }
    };
    let mut events = sse_stream::SseStream::from_bytes_stream(body);
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| {
            if since_event.load(Ordering::Relaxed) > max_event_bytes {
                too_large()
            } else {
                closed(upstream, &e)
            }
        })?;
        since_event.store(0, Ordering::Relaxed);
        let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
            continue; // a priming event, or a comment
        };
        if data.len() > max_event_bytes {
            return Err(too_large());
        }
        let message =
            super::call_answer::read(data.as_bytes()).map_err(|_| UpstreamError::Garbage {
                upstream: upstream.to_owned(),
            })?;
        let answers = match &message {
            ServerJsonRpcMessage::Response(r) => r.id == *id,
            ServerJsonRpcMessage::Error(e) => e.id.as_ref().is_none_or(|e| e == id),
            _ => false,
        };
        if answers {
            read_to_its_end(events);
            return Ok(message);
        }
        tracing::trace!(upstream, "an upstream message nobody asked for; dropped");
    }
    Err(UpstreamError::Closed {
        upstream: upstream.to_owned(),
    })
}

/// How long the rest of an answered event stream is read for, looking for its end.
const STREAM_END_WAIT: Duration = Duration::from_secs(1);

/// Reads what is left of an answered event stream to its end, on a task of its own when the end
/// has not come yet, for at most [`STREAM_END_WAIT`]. hyper gives a connection back to its pool
/// only once the body on it has ended; an upstream that sends a stream's last chunk a moment
/// after the answer (rmcp's server did on one call in seven to nine under load) would otherwise
/// have the connection closed, and the next call open a new one. A stream still open after the
/// wait is dropped, and its connection closed, as before.
fn read_to_its_end<S: futures::Stream + Send + Unpin + 'static>(mut events: S) {
    if let Some(None) = events.next().now_or_never() {
        return;
    }
    tokio::spawn(async move {
        let rest = async { while events.next().await.is_some() {} };
        let _ended = tokio::time::timeout(STREAM_END_WAIT, rest).await;
    });
}

/// The whole body, up to [`MAX_RESPONSE_BYTES`].
async fn limited_body(
    mut chunks: BoxStream<'static, io::Result<Bytes>>,
    upstream: &str,
) -> Result<Vec<u8>, UpstreamError> {
    let mut body = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| closed(upstream, &e))?;
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(UpstreamError::Garbage {
                upstream: upstream.to_owned(),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A call this path could not put into a request: nothing was sent, so it did not run.
fn unsendable(upstream: &str, why: String) -> UpstreamError {
    UpstreamError::Unavailable {
        upstream: upstream.to_owned(),
        reason: format!("the call cannot be posted: {why}"),
    }
}

fn closed(upstream: &str, e: &dyn std::fmt::Display) -> UpstreamError {
    tracing::warn!(upstream, error = %e, "upstream request failed");
    UpstreamError::Closed {
        upstream: upstream.to_owned(),
    }
}

/// Whether a schema holds an `x-mcp-header` annotation anywhere.
fn mentions_header_params(schema: &JsonObject) -> bool {
    fn within(value: &Value) -> bool {
        match value {
            Value::Object(map) => mentions_header_params(map),
            Value::Array(items) => items.iter().any(within),
            _ => false,
        }
    }
    schema
        .iter()
        .any(|(key, value)| key == "x-mcp-header" || within(value))
}

#[cfg(test)]
mod tests {
    use std::{
        collections::HashSet,
        sync::{Arc, Mutex},
    };

    use super::*;

    #[test]
    fn a_call_that_makes_no_request_is_refused_as_never_sent() {
        let direct = Direct::new("http://127.0.0.1:9/mcp", &[], &Matcher::builder().build())
            .expect("a plain URL");
        let (meta, cancel) = (RequestMetaObject::default(), CancellationToken::new());
        // (protocol version, tool name, what the refusal names)
        let cases = [
            ("2026-07-28", "get_balance", None),
            ("2026-07-28\n", "get_balance", Some("protocol version")),
            ("2026-07-28", "get\u{7f}balance", Some("tool name")),
        ];
        for (version, name, refused) in cases {
            let version: ProtocolVersion =
                serde_json::from_value(version.into()).expect("a string");
            let posted = Posted {
                upstream: "bank",
                version: &version,
                params: CallToolRequestParams::new(name.to_owned()),
                client_meta: &meta,
                timeout: Duration::from_secs(1),
                cancel: &cancel,
            };
            match (direct.headers_for(&posted), refused) {
                (Ok(headers), None) => {
                    assert_eq!(headers[MCP_NAME], name);
                    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
                }
                (Err(e), Some(what)) => {
                    assert!(!e.may_have_run(), "{e}");
                    assert!(e.to_string().contains(what), "{e}");
                }
                (got, _) => panic!("{version:?} {name:?}: {got:?}"),
            }
        }
    }

    /// An event stream as the upstream sends it: `chunks`, then nothing more, ever (the upstream
    /// keeps the stream open).
    fn kept_open(chunks: Vec<Bytes>) -> BoxStream<'static, io::Result<Bytes>> {
        futures::stream::iter(chunks.into_iter().map(Ok))
            .chain(futures::stream::pending())
            .boxed()
    }

    #[tokio::test]
    async fn no_event_of_an_answer_stream_may_pass_the_bound_though_the_whole_stream_may() {
        const BOUND: usize = 64 * 1024;
        let id = RequestId::Number(7);
        let answer = Bytes::from_static(
            b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[],\"isError\":false}}\n\n",
        );
        let progress = Bytes::from_static(
            b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\
              \"params\":{\"progressToken\":1,\"progress\":1}}\n\n",
        );
        let letters = Bytes::from(vec![b'a'; 8 * 1024]);
        let data_line = Bytes::from(format!("data: {}\n", "a".repeat(8 * 1024)));
        let padded_answer = |pad: usize| {
            Bytes::from(format!(
                "data: {{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"content\":[],\
                 \"isError\":false,\"_meta\":{{\"pad\":\"{}\"}}}}}}\n\n",
                "a".repeat(pad)
            ))
        };
        let four_bounds_of = |piece: &Bytes| vec![piece.clone(); 4 * BOUND / piece.len()];
        let with = |mut first: Vec<Bytes>, rest: Vec<Bytes>| {
            first.extend(rest);
            first
        };
        // (what the upstream sends, whether its answer is read)
        let cases = [
            (
                "a line that never ends",
                with(
                    vec![Bytes::from_static(b"data: ")],
                    four_bounds_of(&letters),
                ),
                false,
            ),
            (
                "an event whose data lines never end",
                four_bounds_of(&data_line),
                false,
            ),
            (
                "progress past the bound in all, in small events, then the answer",
                with(four_bounds_of(&progress), vec![answer.clone()]),
                true,
            ),
            (
                "the answer in one event just under the bound",
                vec![padded_answer(BOUND - 200)],
                true,
            ),
            (
                "the answer in one event past the bound",
                vec![padded_answer(BOUND)],
                false,
            ),
        ];
        for (what, chunks, answered) in cases {
            let read = tokio::time::timeout(
                Duration::from_secs(5),
                answer_in_stream(kept_open(chunks), &id, "bank", BOUND),
            )
            .await;
            match (read, answered) {
                (Ok(Ok(ServerJsonRpcMessage::Response(r))), true) => assert_eq!(r.id, id, "{what}"),
                (Ok(Err(UpstreamError::Garbage { .. })), false) => {}
                (read, _) => panic!("{what}: {read:?}"),
            }
        }
    }

    /// An upstream that answers each call on an event stream and ends the stream a moment after
    /// the answer, as a server whose last chunk leaves in a packet of its own; its address, and
    /// the client ports its calls came from (one per connection).
    async fn answers_then_ends_later() -> (String, Arc<Mutex<HashSet<u16>>>) {
        use axum::{Router, body::Body, extract::ConnectInfo, routing::post};
        let ports = Arc::new(Mutex::new(HashSet::new()));
        let seen = ports.clone();
        let app = Router::new().route(
            "/mcp",
            post(
                move |ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>, body: Bytes| {
                    seen.lock().unwrap().insert(peer.port());
                    async move {
                        let request: Value = serde_json::from_slice(&body).unwrap();
                        let answer = serde_json::json!({"jsonrpc": "2.0", "id": request["id"],
                            "result": {"content": [], "isError": false}});
                        let event = Bytes::from(format!("data: {answer}\n\n"));
                        let end = futures::stream::once(async {
                            tokio::time::sleep(Duration::from_millis(30)).await;
                            Ok::<_, io::Error>(Bytes::new())
                        });
                        let stream = futures::stream::once(async { Ok(event) }).chain(end);
                        (
                            [(header::CONTENT_TYPE, "text/event-stream")],
                            Body::from_stream(stream),
                        )
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/mcp"), ports)
    }

    #[tokio::test]
    async fn calls_a_moment_apart_share_one_connection_though_each_stream_ends_after_its_answer() {
        let (url, ports) = answers_then_ends_later().await;
        let direct = Direct::new(&url, &[], &Matcher::builder().build()).expect("a plain URL");
        let version: ProtocolVersion = serde_json::from_value("2026-07-28".into()).unwrap();
        let (meta, cancel) = (RequestMetaObject::default(), CancellationToken::new());
        for _ in 0..5 {
            let posted = Posted {
                upstream: "bank",
                version: &version,
                params: CallToolRequestParams::new("get_balance"),
                client_meta: &meta,
                timeout: Duration::from_secs(5),
                cancel: &cancel,
            };
            let answered = direct.call(posted).await;
            assert!(answered.is_ok(), "{answered:?}");
            // The next call comes after the stream's end: its connection is free again, unless
            // it was closed.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let ports = ports.lock().unwrap().clone();
        assert_eq!(
            ports.len(),
            1,
            "one connection, not one per call: {ports:?}"
        );
    }
}
