//! Carrying what an upstream sends back to the client that caused it.
//!
//! Upstream connections are shared by every client, so the gateway keeps track of which client
//! is waiting on which upstream: progress tokens are rewritten to gateway-unique ones on the way up
//! and mapped back on the way down; server-to-client requests (sampling, elicitation, roots) and
//! log messages go to the client whose request is the newest in flight on that upstream.

// Sampling, roots and logging are deprecated in 2026-07-28, but 2025-11-25 clients (most of them
// today) still use them, and the gateway relays them faithfully.
#![allow(deprecated)]

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use rmcp::{
    ClientHandler, ErrorData, Peer, RoleClient, RoleServer,
    model::{
        ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
        ElicitRequestParams, ElicitResult, Implementation, ListRootsResult,
        LoggingMessageNotificationParam, NumberOrString, ProgressNotificationParam, ProgressToken,
        RequestMetaObject,
    },
    service::{NotificationContext, RequestContext},
};

/// The clients waiting on one upstream.
#[derive(Debug, Default)]
pub(crate) struct Relay {
    next: AtomicU64,
    in_flight: Mutex<BTreeMap<u64, InFlight>>,
}

#[derive(Debug)]
struct InFlight {
    client: Peer<RoleServer>,
    /// The client's own progress token, when it asked for progress.
    progress: Option<ProgressToken>,
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

impl Relay {
    /// Notes that `client` waits on this upstream, and rewrites the progress token in `meta` to
    /// one that is unique on this connection.
    pub(crate) fn register(
        self: &Arc<Self>,
        client: Peer<RoleServer>,
        meta: &mut Option<RequestMetaObject>,
    ) -> Ticket {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let progress = meta
            .as_ref()
            .and_then(RequestMetaObject::get_progress_token);
        if progress.is_some()
            && let Some(meta) = meta.as_mut()
        {
            meta.set_progress_token(Self::token(id));
        }
        self.in_flight
            .lock()
            .expect("relay lock")
            .insert(id, InFlight { client, progress });
        Ticket {
            relay: self.clone(),
            id,
        }
    }

    fn token(id: u64) -> ProgressToken {
        ProgressToken(NumberOrString::String(format!("undolog-{id}").into()))
    }

    fn newest_client(&self) -> Option<Peer<RoleServer>> {
        let in_flight = self.in_flight.lock().expect("relay lock");
        in_flight.values().next_back().map(|f| f.client.clone())
    }

    fn progress_target(&self, token: &ProgressToken) -> Option<(Peer<RoleServer>, ProgressToken)> {
        let in_flight = self.in_flight.lock().expect("relay lock");
        in_flight.iter().find_map(|(id, f)| {
            (Self::token(*id) == *token)
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
        let client = self
            .relay
            .newest_client()
            .ok_or_else(|| no_client("a sampling request"))?;
        client.create_message(params).await.map_err(relayed)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let client = self
            .relay
            .newest_client()
            .ok_or_else(|| no_client("an elicitation request"))?;
        client.create_elicitation(request).await.map_err(relayed)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        match self.relay.newest_client() {
            Some(client) => client.list_roots().await.map_err(relayed),
            None => Ok(ListRootsResult::default()),
        }
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
