//! Carrying what an upstream sends back to the client that caused it.
//!
//! Upstream connections are shared by every client, so the gateway keeps track of which client
//! is waiting on which upstream. The SDK gives every upstream request a progress token of its own;
//! progress under that token is mapped back to the client's token and client. Server-to-client
//! requests (sampling, elicitation, roots) and log messages go to the client whose request is the
//! newest in flight on that upstream; resource updates go to the clients subscribed to the URI.

// Sampling, roots and logging are deprecated in 2026-07-28, but 2025-11-25 clients (most of them
// today) still use them, and the gateway relays them faithfully.
#![allow(deprecated)]

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
};

use undolog_interceptors::Phase;

use crate::interceptors::Interceptors;

use rmcp::{
    ClientHandler, ErrorData, Peer, RoleClient, RoleServer,
    model::{
        ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
        ElicitRequestParams, ElicitResult, Implementation, ListRootsResult,
        LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
        RequestMetaObject, ResourceUpdatedNotificationParam,
    },
    service::{NotificationContext, RequestContext},
};

/// The clients waiting on one upstream.
#[derive(Debug, Default)]
pub(crate) struct Relay {
    next: AtomicU64,
    in_flight: Mutex<BTreeMap<u64, InFlight>>,
    /// The gateway's interceptor chain, set once it has started.
    interceptors: OnceLock<Arc<Interceptors>>,
    /// Resource URI → the 2025-11-25 clients subscribed to it through this upstream.
    subscribers: Mutex<BTreeMap<String, Vec<Peer<RoleServer>>>>,
}

#[derive(Debug)]
struct InFlight {
    client: Peer<RoleServer>,
    /// The client's own progress token, when it asked for progress.
    progress: Option<ProgressToken>,
    /// The token the upstream request went out with, once sent.
    upstream_token: Option<ProgressToken>,
}

/// Registered while a client's request is forwarded; dropping it forgets the request.
#[derive(Debug)]
pub(crate) struct Ticket {
    relay: Arc<Relay>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.relay
            .in_flight
            .lock()
            .expect("relay lock")
            .remove(&self.id);
    }
}

impl Ticket {
    /// Ties the upstream request's progress token to this client request.
    pub(crate) fn bind(&self, upstream_token: ProgressToken) {
        let mut in_flight = self.relay.in_flight.lock().expect("relay lock");
        if let Some(f) = in_flight.get_mut(&self.id) {
            f.upstream_token = Some(upstream_token);
        }
    }
}

impl Relay {
    /// Notes that `client` waits on this upstream; `meta` is its request's `_meta`, whose
    /// progress token (if any) its progress is sent under.
    pub(crate) fn register(
        self: &Arc<Self>,
        client: Peer<RoleServer>,
        meta: Option<&RequestMetaObject>,
    ) -> Ticket {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let progress = meta.and_then(RequestMetaObject::get_progress_token);
        let waiting = InFlight {
            client,
            progress,
            upstream_token: None,
        };
        self.in_flight
            .lock()
            .expect("relay lock")
            .insert(id, waiting);
        Ticket {
            relay: self.clone(),
            id,
        }
    }

    /// Run what this upstream sends to clients, and their answers, through `interceptors`.
    pub(crate) fn use_interceptors(&self, interceptors: Arc<Interceptors>) {
        let _ = self.interceptors.set(interceptors);
    }

    /// One relayed message through the chain (unchanged when there is none).
    async fn intercepted<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        event: &str,
        phase: Phase,
        value: T,
    ) -> Result<T, ErrorData> {
        match self.interceptors.get() {
            Some(chain) => chain.relayed(event, phase, value).await,
            None => Ok(value),
        }
    }

    /// Notes that `client` subscribed to `uri`; `true` when it is the first live subscriber, so
    /// the upstream subscription is to be made.
    pub(crate) fn subscribe(&self, uri: &str, client: Peer<RoleServer>) -> bool {
        let mut subscribers = self.subscribers.lock().expect("relay lock");
        let list = subscribers.entry(uri.to_owned()).or_default();
        list.retain(|p| !p.is_transport_closed());
        list.push(client);
        list.len() == 1
    }

    /// Forgets the subscriptions to `uri` of clients that are gone, and, the client having
    /// asked, one of those still there (the peers of one session cannot be told apart); `true`
    /// when none is left, so the upstream subscription is to be dropped.
    pub(crate) fn unsubscribe(&self, uri: &str) -> bool {
        let mut subscribers = self.subscribers.lock().expect("relay lock");
        let Some(list) = subscribers.get_mut(uri) else {
            return true;
        };
        list.retain(|p| !p.is_transport_closed());
        list.pop();
        let none_left = list.is_empty();
        if none_left {
            subscribers.remove(uri);
        }
        none_left
    }

    fn subscribed(&self, uri: &str) -> Vec<Peer<RoleServer>> {
        let subscribers = self.subscribers.lock().expect("relay lock");
        subscribers.get(uri).cloned().unwrap_or_default()
    }

    fn newest_client(&self) -> Option<Peer<RoleServer>> {
        let in_flight = self.in_flight.lock().expect("relay lock");
        in_flight.values().next_back().map(|f| f.client.clone())
    }

    fn progress_target(&self, token: &ProgressToken) -> Option<(Peer<RoleServer>, ProgressToken)> {
        let in_flight = self.in_flight.lock().expect("relay lock");
        in_flight.values().find_map(|f| {
            (f.upstream_token.as_ref() == Some(token))
                .then(|| f.progress.clone().map(|p| (f.client.clone(), p)))
                .flatten()
        })
    }
}

/// The gateway's side of an upstream connection: an MCP client that relays back to clients.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamClient {
    pub(crate) relay: Arc<Relay>,
    pub(crate) upstream: String,
}

fn no_client(what: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("{what} arrived when no client request was in flight; nobody to ask"),
        None,
    )
}

fn relayed(e: rmcp::ServiceError) -> ErrorData {
    match e {
        rmcp::ServiceError::McpError(e) => e,
        other => ErrorData::internal_error(format!("the client did not answer: {other}"), None),
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder()
                .enable_roots()
                .enable_sampling()
                .enable_elicitation()
                .build(),
            Implementation::new("undolog-gateway", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        const EVENT: &str = "sampling/createMessage";
        let client = self
            .relay
            .newest_client()
            .ok_or_else(|| no_client("a sampling request"))?;
        let params = self
            .relay
            .intercepted(EVENT, Phase::Request, params)
            .await?;
        let result = client.create_message(params).await.map_err(relayed)?;
        self.relay.intercepted(EVENT, Phase::Response, result).await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        const EVENT: &str = "elicitation/create";
        let client = self
            .relay
            .newest_client()
            .ok_or_else(|| no_client("an elicitation request"))?;
        let request = self
            .relay
            .intercepted(EVENT, Phase::Request, request)
            .await?;
        let result = client.create_elicitation(request).await.map_err(relayed)?;
        self.relay.intercepted(EVENT, Phase::Response, result).await
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = match self.relay.newest_client() {
            Some(client) => client.list_roots().await.map_err(relayed)?,
            None => ListRootsResult::default(),
        };
        self.relay
            .intercepted("roots/list", Phase::Response, roots)
            .await
    }

    async fn on_progress(
        &self,
        mut params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some((client, token)) = self.relay.progress_target(&params.progress_token) {
            params.progress_token = token;
            if let Err(e) = client.notify_progress(params).await {
                tracing::debug!(upstream = %self.upstream, error = %e, "progress not relayed");
            }
        }
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        for client in self.relay.subscribed(&params.uri) {
            if let Err(e) = client.notify_resource_updated(params.clone()).await {
                tracing::debug!(upstream = %self.upstream, error = %e, "resource update not relayed");
            }
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        match self.relay.newest_client() {
            Some(client) => {
                if let Err(e) = client.notify_logging_message(params).await {
                    tracing::debug!(upstream = %self.upstream, error = %e, "log message not relayed");
                }
            }
            None => tracing::info!(upstream = %self.upstream, ?params, "upstream log message"),
        }
    }
}
