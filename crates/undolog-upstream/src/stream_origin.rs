//! Which gateway request an upstream's notification belongs to.
//!
//! Over Streamable HTTP, an upstream answers a request on that request's own SSE stream, and
//! sends what belongs to the request (log messages, progress) on the same stream. rmcp marks the
//! server-to-client *requests* of such a stream with the request they came with
//! (`InboundStreamOrigin`), but not the notifications. This client, wrapped around reqwest's,
//! marks each notification of a request's stream with that request's id under
//! `params._meta["io.undolog/related-request"]`, so the relay can tell whose log message it is.
//! Whatever an upstream itself wrote under that key is removed first, on every stream: an
//! upstream cannot aim a message at another client's request.

use std::{collections::HashMap, sync::Arc};

use futures::{StreamExt, stream::BoxStream};
use http::{HeaderName, HeaderValue};
use rmcp::{
    model::{ClientJsonRpcMessage, RequestId},
    transport::streamable_http_client::{
        SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
        StreamableHttpResponseLimits,
    },
};
use serde_json::{Map, Value};
use sse_stream::Sse;

use super::relay::{RELATED_REQUEST, Relay};

/// reqwest's Streamable HTTP client, marking notifications with the request they came with, and
/// handing progress and log messages to the relay in the order the stream carries them.
#[derive(Debug, Clone)]
pub(crate) struct MarkingClient {
    http: reqwest::Client,
    relay: Arc<Relay>,
}

impl MarkingClient {
    pub(crate) fn new(relay: Arc<Relay>) -> MarkingClient {
        MarkingClient {
            http: reqwest::Client::default(),
            relay,
        }
    }
}

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest::Error>>;
type Events = BoxStream<'static, std::result::Result<Sse, SseError>>;

/// rmcp sends through `post_message_with_response_limits`; `post_message` is the trait's own
/// fallback (and what its other default methods call), marked the same way.
impl StreamableHttpClient for MarkingClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        let id = request_id(&message);
        let response = self
            .http
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await?;
        Ok(marked(response, id, &self.relay))
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let id = request_id(&message);
        let response = self
            .http
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await?;
        Ok(marked(response, id, &self.relay))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events> {
        let events = self
            .http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(mark(events, None, &self.relay))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events> {
        let events = self
            .http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(mark(events, None, &self.relay))
    }
}

fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

fn marked(
    response: StreamableHttpPostResponse,
    id: Option<RequestId>,
    relay: &Arc<Relay>,
) -> StreamableHttpPostResponse {
    match response {
        StreamableHttpPostResponse::Sse(events, session) => {
            StreamableHttpPostResponse::Sse(mark(events, id, relay), session)
        }
        other => other,
    }
}

/// The events with every notification marked with `id` (unmarked when `None`); the progress and
/// log messages the relay takes on the way are relayed then and there, in stream order, and
/// passed on without data (rmcp skips them, keeping the event id for a resumed stream).
fn mark(events: Events, id: Option<RequestId>, relay: &Arc<Relay>) -> Events {
    let id = id.map(|id| serde_json::to_value(id).unwrap_or(Value::Null));
    let relay = relay.clone();
    events
        .then(move |event| {
            let (id, relay) = (id.clone(), relay.clone());
            async move {
                let mut event = event?;
                if let Some(data) = event.data.as_mut() {
                    mark_notification(data, id.as_ref());
                    let taken = match serde_json::from_str::<Value>(data) {
                        Ok(message) if message.get("id").is_none() => {
                            relay.relay_in_order(&message).await
                        }
                        _ => false,
                    };
                    if taken {
                        event.data = None;
                    }
                }
                Ok(event)
            }
        })
        .boxed()
}

/// Rewrites one event's JSON when it is a notification; anything else is left as it came.
fn mark_notification(data: &mut String, id: Option<&Value>) {
    let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(data) else {
        return;
    };
    if message.contains_key("id") || !message.contains_key("method") {
        return;
    }
    let params = message
        .entry("params")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(params) = params else {
        return;
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(meta) = meta else {
        return;
    };
    meta.remove(RELATED_REQUEST);
    if let Some(id) = id {
        meta.insert(RELATED_REQUEST.into(), id.clone());
    }
    if meta.is_empty() {
        params.remove("_meta");
    }
    *data = Value::Object(message).to_string();
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn notifications_are_marked_with_their_request_and_nothing_else_is() {
        let id = json!(7);
        let cases = [
            (
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}),
                Some(&id),
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x", "_meta": {RELATED_REQUEST: 7}}}),
            ),
            // An upstream's own mark is replaced on a request's stream…
            (
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"_meta": {RELATED_REQUEST: 99, "k": 1}}}),
                Some(&id),
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"_meta": {RELATED_REQUEST: 7, "k": 1}}}),
            ),
            // …and removed on the standalone stream.
            (
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"_meta": {RELATED_REQUEST: 99}}}),
                None,
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}),
            ),
            // Requests and responses are left as they came.
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}}),
                Some(&id),
                json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}}),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 7, "result": {}}),
                Some(&id),
                json!({"jsonrpc": "2.0", "id": 7, "result": {}}),
            ),
        ];
        for (message, id, expected) in cases {
            let mut data = message.to_string();
            mark_notification(&mut data, id);
            assert_eq!(
                serde_json::from_str::<Value>(&data).unwrap(),
                expected,
                "{message}"
            );
        }
        let mut garbage = "not json".to_owned();
        mark_notification(&mut garbage, Some(&id));
        assert_eq!(garbage, "not json");
    }
}
