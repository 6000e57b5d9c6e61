//! Carrying what an upstream sends back to the client whose request caused it, and to no one else.
//!
//! Upstream connections are shared by every client (of every org), so the gateway keeps track of
//! which client request is waiting on which upstream request. Progress comes under a token of the
//! gateway's own request, mapped back to the client's token. Server-to-client requests (sampling,
//! elicitation, roots) and log messages are tied to the upstream request whose stream carried
//! them (Streamable HTTP: rmcp marks requests with their stream, [`super::stream_origin`] marks
//! notifications), and go to that client request, on its own stream; a request waits a moment
//! for the call it names to be tied, as the upstream may ask before that. One that cannot be tied
//! to a request (a stdio upstream, a standalone stream) goes to the client only when every
//! request in flight on that upstream is that one client's; otherwise it is refused and logged,
//! never guessed. Every request the gateway sends upstream is in flight here while it runs, a
//! client's or not ([`Requester::unattended`]: a REST call, a compensation, a followed task), so
//! that no request of the gateway's own is mistaken for the absence of one. Resource updates go to the clients subscribed to the URI, and list changes to the
//! listen streams that asked for them.

// Sampling, roots and logging are deprecated in 2026-07-28, but 2025-11-25 clients (most of them
// today) still use them, and the gateway relays them faithfully.
#![allow(deprecated)]

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use serde_json::Value;

use undolog_interceptors::Phase;

use crate::hooks::RelayChain;

use rmcp::{
    ClientHandler, ErrorData, Peer, RoleClient, RoleServer,
    model::{
        ClientCapabilities, ClientConfig, ClientResult, CreateMessageRequest,
        CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
        ElicitResult, GetExtensions, ListRootsRequest, ListRootsResult,
        LoggingMessageNotificationParam, NotificationMetaObject, ProgressNotificationParam,
        ProgressToken, ProtocolVersion, RequestId, RequestMetaObject,
        ResourceUpdatedNotificationParam, ServerRequest,
    },
    service::{InboundStreamOrigin, NotificationContext, OriginatingRequestId, RequestContext},
};

use tokio_util::sync::CancellationToken;

use super::listeners::{Change, ListenerId, Listeners};

/// Where a notification's request id is written (by [`super::stream_origin`]).
pub(crate) const RELATED_REQUEST: &str = "io.undolog/related-request";

mod upstream_client;
pub(crate) use upstream_client::UpstreamClient;

/// One client request, as a relayed message addresses it: the client's connection and the
/// request's JSON-RPC id there.
#[derive(Debug, Clone)]
pub struct Requester {
    /// Where messages for the request go; `None` for a request that takes none while it runs
    /// (a stateless request that asked for neither progress nor log messages, answered with its
    /// result alone): what an upstream sends for it is dropped, never given to another client.
    pub peer: Option<Peer<RoleServer>>,
    /// The protocol revision the request speaks: its own (2026-07-28), or its session's.
    pub protocol_version: Option<ProtocolVersion>,
    /// Tells client connections apart (the peers of one connection cannot be compared).
    pub connection: u64,
    pub request: RequestId,
}

impl Requester {
    /// A number for a new client connection.
    pub fn next_connection() -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }

    /// A request with no client to hear from the upstream while it runs: a REST call, an undo's
    /// compensation, a task followed in the background. It is in flight all the same, as a
    /// connection of its own, so that what the upstream sends meanwhile is never taken for
    /// another client's; what is tied to it is refused to the upstream.
    pub fn unattended() -> Requester {
        Requester {
            peer: None,
            protocol_version: None,
            connection: Requester::next_connection(),
            request: RequestId::Number(0),
        }
    }
}

/// The clients waiting on one upstream.
#[derive(Debug, Default)]
pub struct Relay {
    next: AtomicU64,
    in_flight: Mutex<BTreeMap<u64, InFlight>>,
    /// The gateway's interceptor chain, set once it has started.
    interceptors: OnceLock<Arc<dyn RelayChain>>,
    /// Resource URI → the clients subscribed to it through this upstream.
    subscribers: Mutex<BTreeMap<String, Vec<Subscriber>>>,
    /// The gateway's client listen streams (2026-07-28), which hear of every upstream change.
    pub listeners: Arc<Listeners>,
    /// Told whenever a client request is tied to its upstream request ([`Ticket::bind`]).
    bound: tokio::sync::Notify,
}

/// How long a request from an upstream waits for the client request it names to be tied to its
/// upstream request. The upstream may ask (sampling, on the stream of the call that asks) before
/// the task that sent the call has tied it: it has sent it, and not yet run again.
const BIND_WAIT: Duration = Duration::from_secs(1);

/// A client subscribed to a resource's updates.
#[derive(Debug, Clone)]
pub enum Subscriber {
    /// A 2025-11-25 client that sent `resources/subscribe`: updates go to its session.
    Session(Peer<RoleServer>),
    /// A 2026-07-28 listen stream that named the resource: updates reach it through
    /// [`Listeners`], while `open` is not cancelled.
    Listen(ListenerId, CancellationToken),
}

impl Subscriber {
    fn gone(&self) -> bool {
        match self {
            Subscriber::Session(peer) => peer.is_transport_closed(),
            Subscriber::Listen(_, open) => open.is_cancelled(),
        }
    }
}

#[derive(Debug)]
struct InFlight {
    requester: Requester,
    /// The client's own progress token, when it asked for progress.
    progress: Option<ProgressToken>,
    /// The token the upstream request went out with, once sent.
    upstream_token: Option<ProgressToken>,
    /// The upstream request's id, once sent: what the upstream's messages are tied to.
    upstream_request: Option<RequestId>,
}

/// Registered while a client's request is forwarded; dropping it forgets the request.
#[derive(Debug)]
pub struct Ticket {
    relay: Arc<Relay>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.relay.lock().remove(&self.id);
    }
}

impl Ticket {
    /// Whether the client request takes messages while it runs (progress, log messages,
    /// requests): else nothing of what the upstream sends meanwhile reaches anyone.
    pub fn takes_messages(&self) -> bool {
        let in_flight = self.relay.lock();
        in_flight
            .get(&self.id)
            .is_some_and(|f| f.requester.peer.is_some())
    }

    /// Ties the upstream request (its id and progress token) to this client request.
    pub fn bind(&self, upstream_request: RequestId, upstream_token: ProgressToken) {
        if let Some(f) = self.relay.lock().get_mut(&self.id) {
            f.upstream_request = Some(upstream_request);
            f.upstream_token = Some(upstream_token);
        }
        self.relay.bound.notify_waiters();
    }
}

impl Relay {
    pub fn new(listeners: Arc<Listeners>) -> Relay {
        Relay {
            listeners,
            ..Relay::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, InFlight>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that `requester` waits on this upstream; `meta` is its request's `_meta`, whose
    /// progress token (if any) its progress is sent under.
    pub fn register(
        self: &Arc<Self>,
        requester: Requester,
        meta: Option<&RequestMetaObject>,
    ) -> Ticket {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let waiting = InFlight {
            requester,
            progress: meta.and_then(RequestMetaObject::get_progress_token),
            upstream_token: None,
            upstream_request: None,
        };
        self.lock().insert(id, waiting);
        Ticket {
            relay: self.clone(),
            id,
        }
    }

    /// Run what this upstream sends to clients, and their answers, through `chain`.
    pub fn use_interceptors(&self, chain: Arc<dyn RelayChain>) {
        let _ = self.interceptors.set(chain);
    }

    /// One relayed message through the chain (unchanged when there is none); the value the
    /// chain let through, typed again.
    async fn intercepted<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        event: &str,
        phase: Phase,
        value: T,
    ) -> Result<T, ErrorData> {
        let Some(chain) = self.interceptors.get() else {
            return Ok(value);
        };
        let payload = serde_json::to_value(&value).map_err(|e| {
            ErrorData::internal_error(format!("cannot intercept {event}: {e}"), None)
        })?;
        let payload = chain.relayed(event, phase, payload).await?;
        serde_json::from_value(payload).map_err(|e| {
            ErrorData::internal_error(
                format!("{event} blocked by interceptors: a mutator made it unreadable ({e}); fix the mutator"),
                None,
            )
        })
    }

    /// Notes that `client` subscribed to `uri`; `true` when it is the first live subscriber, so
    /// the upstream subscription is to be made.
    pub fn subscribe(&self, uri: &str, client: Subscriber) -> bool {
        let mut subscribers = self.subscribers.lock().expect("relay lock");
        let list = subscribers.entry(uri.to_owned()).or_default();
        list.retain(|s| !s.gone());
        list.push(client);
        list.len() == 1
    }

    /// Forgets the subscriptions to `uri` of clients that are gone, and, the client having
    /// asked, one session's still there (the peers of one session cannot be told apart); `true`
    /// when none is left, so the upstream subscription is to be dropped.
    pub fn unsubscribe(&self, uri: &str) -> bool {
        self.forget(uri, |list| {
            if let Some(last) = list
                .iter()
                .rposition(|s| matches!(s, Subscriber::Session(_)))
            {
                list.remove(last);
            }
        })
    }

    /// Forgets listen stream `id`'s subscription to `uri`; `true` when none is left.
    pub fn unsubscribe_listener(&self, uri: &str, id: ListenerId) -> bool {
        self.forget(uri, |list| {
            list.retain(|s| !matches!(s, Subscriber::Listen(other, _) if *other == id));
        })
    }

    fn forget(&self, uri: &str, drop_one: impl FnOnce(&mut Vec<Subscriber>)) -> bool {
        let mut subscribers = self.subscribers.lock().expect("relay lock");
        let Some(list) = subscribers.get_mut(uri) else {
            return true;
        };
        list.retain(|s| !s.gone());
        drop_one(list);
        let none_left = list.is_empty();
        if none_left {
            subscribers.remove(uri);
        }
        none_left
    }

    /// Relays a progress or log notification the moment the upstream's stream carries it, so
    /// the client gets them in the upstream's order and before the call's answer (rmcp hands
    /// notifications to their handlers concurrently, which would reorder them and let some
    /// arrive after the call ended). `true` when the relay took it: the stream need not pass it
    /// on. Anything else, or a message it cannot place, is left to the handlers.
    pub async fn relay_in_order(&self, message: &Value) -> bool {
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match message.get("method").and_then(Value::as_str) {
            Some("notifications/progress") => {
                let Ok(mut params) = serde_json::from_value::<ProgressNotificationParam>(params)
                else {
                    return false;
                };
                let Some((client, token)) = self.progress_target(&params.progress_token) else {
                    return false;
                };
                params.progress_token = token;
                delivered("progress", client.notify_progress(params)).await;
                true
            }
            Some("notifications/message") => {
                let mut params = params;
                let related = params
                    .get_mut("_meta")
                    .and_then(Value::as_object_mut)
                    .and_then(|meta| meta.remove(RELATED_REQUEST))
                    .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
                let Some(requester) = self.requester_of(related.as_ref()) else {
                    return false;
                };
                let Ok(params) = serde_json::from_value::<LoggingMessageNotificationParam>(params)
                else {
                    return false;
                };
                match &requester.peer {
                    Some(peer) => {
                        delivered("log message", peer.notify_logging_message(params)).await
                    }
                    None => tracing::debug!("a log message for a request that takes none; dropped"),
                }
                true
            }
            _ => false,
        }
    }

    /// The 2025-11-25 sessions subscribed to `uri` (listen streams hear through [`Listeners`]).
    fn subscribed(&self, uri: &str) -> Vec<Peer<RoleServer>> {
        let subscribers = self.subscribers.lock().expect("relay lock");
        subscribers
            .get(uri)
            .into_iter()
            .flatten()
            .filter_map(|s| match s {
                Subscriber::Session(peer) => Some(peer.clone()),
                Subscriber::Listen(..) => None,
            })
            .collect()
    }

    /// The client request a message from the upstream belongs to. `upstream_request` is the
    /// upstream request whose stream carried it, when the transport tells; without it, the
    /// message is that of the only client connection with requests in flight here, if there is
    /// only one. `None`: it cannot be attributed, and must not be delivered.
    fn requester_of(&self, upstream_request: Option<&RequestId>) -> Option<Requester> {
        let in_flight = self.lock();
        if let Some(id) = upstream_request {
            return in_flight
                .values()
                .find(|f| f.upstream_request.as_ref() == Some(id))
                .map(|f| f.requester.clone());
        }
        let mut waiting = in_flight.values().rev();
        let newest = waiting.next()?;
        let one_connection = waiting.all(|f| f.requester.connection == newest.requester.connection);
        one_connection.then(|| newest.requester.clone())
    }

    /// [`Relay::requester_of`] for a request from the upstream: one that names its upstream
    /// request waits up to [`BIND_WAIT`] for that request to be tied to its client's, as the
    /// upstream may ask before the gateway's task that sent it has run again.
    async fn requester_for(&self, upstream_request: Option<&RequestId>) -> Option<Requester> {
        let Some(id) = upstream_request else {
            return self.requester_of(None);
        };
        let deadline = tokio::time::Instant::now() + BIND_WAIT;
        loop {
            let bound = self.bound.notified();
            tokio::pin!(bound);
            bound.as_mut().enable();
            if let Some(requester) = self.requester_of(Some(id)) {
                return Some(requester);
            }
            if tokio::time::timeout_at(deadline, bound).await.is_err() {
                return None;
            }
        }
    }

    fn progress_target(&self, token: &ProgressToken) -> Option<(Peer<RoleServer>, ProgressToken)> {
        let in_flight = self.lock();
        in_flight.values().find_map(|f| {
            (f.upstream_token.as_ref() == Some(token))
                .then(|| Some((f.requester.peer.clone()?, f.progress.clone()?)))
                .flatten()
        })
    }
}

/// How long one relayed notification may wait for its client before it is dropped.
const DELIVERY_LIMIT: Duration = Duration::from_secs(5);

/// Waits for one notification to reach its client (at most [`DELIVERY_LIMIT`]).
async fn delivered(
    what: &str,
    sent: impl std::future::Future<Output = Result<(), rmcp::ServiceError>>,
) {
    match tokio::time::timeout(DELIVERY_LIMIT, sent).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "{what} not relayed"),
        Err(_) => tracing::debug!("{what} not relayed: the client took over {DELIVERY_LIMIT:?}"),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;

    use super::*;

    fn requester(request: i64) -> Requester {
        Requester {
            peer: None,
            protocol_version: None,
            connection: Requester::next_connection(),
            request: RequestId::Number(request),
        }
    }

    #[tokio::test]
    async fn a_request_from_the_upstream_waits_a_moment_for_its_call_to_be_tied_and_no_longer() {
        let relay = Arc::new(Relay::new(Arc::new(Listeners::default())));
        let ticket = relay.register(requester(1), None);
        let call = RequestId::Number(41);
        // The task that sent the call ties it 50 ms after the upstream asked.
        let tying = tokio::spawn({
            let call = call.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                ticket.bind(call, ProgressToken(NumberOrString::Number(7)));
                ticket
            }
        });
        let found = relay.requester_for(Some(&call)).await;
        assert_eq!(found.map(|r| r.request), Some(RequestId::Number(1)));

        // A call nobody ties: refused once the wait is over, not before.
        let started = tokio::time::Instant::now();
        let found = relay.requester_for(Some(&RequestId::Number(99))).await;
        assert!(found.is_none(), "{found:?}");
        assert!(started.elapsed() >= BIND_WAIT, "{:?}", started.elapsed());
        drop(tying.await);
    }
}
