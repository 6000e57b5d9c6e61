//! One upstream MCP server and the gateway's connection to it: opened at start, reopened (a
//! stdio server restarted) on the next use after it drops, every request bounded by a timeout.
//!
//! A Streamable HTTP upstream gets one connection per protocol era, so each client request reaches
//! it in the client's own era: a 2025-11-25 session (where the upstream calls back mid-request for
//! sampling, elicitation and roots, relayed to the client) or 2026-07-28 stateless requests (where
//! the upstream answers `input_required` and the client's retry carries the answers). A stdio
//! server is one process, so every era shares its one session.

use std::{sync::Arc, time::Duration};

use http::{HeaderName, HeaderValue};
use hyper_util::client::proxy::matcher::Matcher;
use rmcp::{
    Peer, RoleClient, ServiceError, ServiceExt,
    model::{
        CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
        JsonObject, ProtocolVersion, RequestMetaObject, ServerResult,
    },
    service::PeerRequestOptions,
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use tokio::sync::Mutex;

use super::{
    direct::{Direct, Posted},
    relay::{Relay, Requester, Ticket, UpstreamClient},
    stream_origin::MarkingClient,
};
use undolog_config::{UpstreamConfig, UpstreamTransport};

use crate::{error::UpstreamError, hooks::InProcess};

mod watch;
pub(crate) use watch::watch;

type Running = RunningService<RoleClient, UpstreamClient>;

/// The protocol era a request reaches the upstream in: the client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Era {
    /// 2025-11-25 and older: an `initialize`d session (also the gateway's own requests).
    #[default]
    Session,
    /// 2026-07-28 and newer: stateless requests with per-request metadata.
    Stateless,
}

impl Era {
    /// The era of a client request that negotiated (or sent) `version`.
    pub fn of(version: Option<&ProtocolVersion>) -> Era {
        match version {
            Some(v) if v.as_str() >= ProtocolVersion::V_2026_07_28.as_str() => Era::Stateless,
            _ => Era::Session,
        }
    }
}

#[derive(Debug)]
pub struct Connection {
    pub config: UpstreamConfig,
    pub relay: Arc<Relay>,
    timeout: Duration,
    /// The server of an in-process upstream (`transport = "demo"`), the same across
    /// reconnections (the demo bank keeps its balances).
    in_process: Option<Arc<dyn InProcess>>,
    running: Mutex<Option<Running>>,
    /// The 2026-07-28 connection of a Streamable HTTP upstream (others use `running` for both).
    stateless: Mutex<Option<Running>>,
    /// A Streamable HTTP upstream's calls posted without the MCP client, once the stateless
    /// connection has negotiated a stateless revision.
    direct: Option<Direct>,
}

impl Connection {
    pub fn new(
        config: UpstreamConfig,
        timeout: Duration,
        listeners: Arc<super::listeners::Listeners>,
        in_process: Option<Arc<dyn InProcess>>,
    ) -> Connection {
        let direct = match &config.transport {
            UpstreamTransport::Http { url, headers } => {
                let headers: Vec<(String, String)> = (headers.iter())
                    .map(|(name, value)| (name.clone(), value.0.clone()))
                    .collect();
                Direct::new(url, &headers, &Matcher::from_system())
            }
            _ => None,
        };
        Connection {
            config,
            relay: Arc::new(Relay::new(listeners)),
            timeout,
            in_process,
            running: Mutex::new(None),
            stateless: Mutex::new(None),
            direct,
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The live connection's peer, connecting (or restarting the server) first when needed.
    /// The connection requests of `era` go over: its own for a Streamable HTTP upstream.
    fn slot(&self, era: Era) -> (&Mutex<Option<Running>>, Era) {
        match (&self.config.transport, era) {
            (UpstreamTransport::Http { .. }, Era::Stateless) => (&self.stateless, Era::Stateless),
            _ => (&self.running, Era::Session),
        }
    }

    /// Whether 2026-07-28 requests have a connection of their own (a Streamable HTTP
    /// upstream's), rather than sharing the session (stdio, the demo bank).
    pub fn has_stateless_connection(&self) -> bool {
        self.slot(Era::Stateless).1 == Era::Stateless
    }

    /// Whether a live connection is held now (in either era). One being opened counts as not.
    pub fn is_connected(&self) -> bool {
        [&self.running, &self.stateless].into_iter().any(|slot| {
            slot.try_lock()
                .is_ok_and(|held| held.as_ref().is_some_and(|live| !live.is_closed()))
        })
    }

    pub async fn peer(&self, era: Era) -> Result<Peer<RoleClient>, UpstreamError> {
        let (slot, era) = self.slot(era);
        let mut running = slot.lock().await;
        if let Some(live) = running.as_ref()
            && !live.is_closed()
        {
            return Ok(live.peer().clone());
        }
        if running.take().is_some() {
            tracing::warn!(upstream = %self.name(), "upstream connection dropped; reconnecting");
        }
        // Boxed, as the rmcp path below: rare, and large enough to swell every call's future.
        let fresh = tokio::time::timeout(self.timeout, Box::pin(self.connect(era)))
            .await
            .map_err(|_| UpstreamError::TimedOut {
                upstream: self.name().to_owned(),
                after: self.timeout,
            })??;
        let peer = fresh.peer().clone();
        *running = Some(fresh);
        Ok(peer)
    }

    async fn connect(&self, era: Era) -> Result<Running, UpstreamError> {
        let client = UpstreamClient {
            relay: self.relay.clone(),
            upstream: self.name().to_owned(),
        };
        let unavailable = |reason: String| UpstreamError::Unavailable {
            upstream: self.name().to_owned(),
            reason,
        };
        let running = match &self.config.transport {
            UpstreamTransport::Demo => {
                let server = self.in_process.as_ref().ok_or_else(|| {
                    unavailable("no in-process server was given for it".to_owned())
                })?;
                let (ours, theirs) = tokio::io::duplex(64 * 1024);
                server.serve(theirs);
                client.serve(ours).await
            }
            UpstreamTransport::Stdio { command, args, env } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env).kill_on_drop(true);
                let (transport, _stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::inherit())
                    .spawn()
                    .map_err(|e| {
                        unavailable(format!(
                            "cannot start `{command}`: {e} (is it installed, and on the PATH?)"
                        ))
                    })?;
                client.serve(transport).await
            }
            UpstreamTransport::Http { url, headers } => {
                let mut custom = std::collections::HashMap::new();
                for (name, value) in headers {
                    let name = HeaderName::try_from(name.as_str())
                        .map_err(|e| unavailable(format!("header {name}: {e}")))?;
                    let value = HeaderValue::try_from(value.0.as_str())
                        .map_err(|e| unavailable(format!("header {name}: {e}")))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let transport = StreamableHttpClientTransport::with_client(
                    MarkingClient::new(self.relay.clone()),
                    config,
                );
                match era {
                    Era::Session => client.serve(transport).await,
                    // An upstream that only speaks sessions answers the probe as legacy; the
                    // connection is then a session like the other one.
                    Era::Stateless => {
                        let lifecycle = ClientLifecycleMode::Auto {
                            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                            legacy_version: Some(ProtocolVersion::V_2025_11_25),
                        };
                        client.serve_with_lifecycle(transport, lifecycle).await
                    }
                }
            }
        };
        let running = match running {
            Ok(running) => running,
            Err(e) => return Err(unavailable(self.why_not(e.to_string()).await)),
        };
        tracing::info!(upstream = %self.name(), ?era, "connected to upstream");
        Ok(running)
    }

    /// A failed start in one plain sentence. The MCP client's error carries its cause as text
    /// inside its own type names, so an HTTP upstream's address is tried on its own: a refused
    /// connection or an unknown host is said as such; otherwise the client's message, without
    /// the type names.
    async fn why_not(&self, said: String) -> String {
        let UpstreamTransport::Http { url, .. } = &self.config.transport else {
            return said;
        };
        let Ok(parsed) = url::Url::parse(url) else {
            return said;
        };
        // `[::1]` in a URL is `::1` to connect to.
        let host = (parsed.host_str().unwrap_or_default())
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = parsed.port_or_known_default().unwrap_or(80);
        let probe = tokio::net::TcpStream::connect((host.as_str(), port));
        match tokio::time::timeout(Duration::from_secs(2), probe).await {
            Ok(Err(e)) => return format!("cannot connect to {host}:{port} ({url}): {e}"),
            Err(_) => {
                return format!("{host}:{port} ({url}) did not accept a connection within 2 s");
            }
            Ok(Ok(_)) => {}
        }
        // `Send message error Transport [rmcp::…<…>] error: …`: the part a person can read.
        let mut plain = String::with_capacity(said.len());
        let mut depth = 0usize;
        for c in said.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth = depth.saturating_sub(1),
                _ if depth == 0 => plain.push(c),
                _ => {}
            }
        }
        format!(
            "{url} answered, but not as an MCP server: {}",
            plain.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    }

    /// Calls a tool whose input schema is `schema` (when known) for a client (`ticket`), as
    /// [`Connection::send`] does; a stateless call that wants nothing but its answer is posted
    /// directly ([`Direct`]).
    pub async fn call_tool(
        &self,
        era: Era,
        cancel: &tokio_util::sync::CancellationToken,
        ticket: Option<&Ticket>,
        params: CallToolRequestParams,
        client_meta: Option<RequestMetaObject>,
        schema: Option<&JsonObject>,
    ) -> Result<ServerResult, UpstreamError> {
        let wants_only_the_answer = ticket.is_none_or(|t| !t.takes_messages());
        if let (Era::Stateless, true, Some(direct), Some(client_meta)) =
            (era, wants_only_the_answer, &self.direct, &client_meta)
            && Direct::takes(&params, schema)
        {
            let peer = self.peer(era).await?;
            let version = (peer.peer_info()).map(|info| info.protocol_version.clone());
            if let Some(version) = version.filter(|v| Era::of(Some(v)) == Era::Stateless) {
                let posted = Posted {
                    upstream: self.name(),
                    version: &version,
                    params,
                    client_meta,
                    timeout: self.timeout,
                    cancel,
                };
                return direct.call(posted).await;
            }
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // Boxed: a stateless call takes the direct path above, and this one's future would
        // otherwise make every call's larger (each layer above copies it whole).
        Box::pin(self.send(era, cancel, ticket, request, client_meta)).await
    }

    /// Sends one request whose progress the client follows (`ticket`), bounded by the timeout and
    /// the client's cancellation; either one cancels the request upstream too.
    pub async fn send(
        &self,
        era: Era,
        cancel: &tokio_util::sync::CancellationToken,
        ticket: Option<&Ticket>,
        request: ClientRequest,
        meta: Option<RequestMetaObject>,
    ) -> Result<ServerResult, UpstreamError> {
        let peer = self.peer(era).await?;
        // In flight at the relay before it is sent, whoever sent it: what the upstream sends
        // meanwhile is tied to it, or to no one, never guessed to be another client's. (What
        // an upstream asks while it connects, before, is nobody's request.)
        let unattended;
        let ticket = match ticket {
            Some(ticket) => ticket,
            None => {
                unattended = self.relay.register(Requester::unattended(), None);
                &unattended
            }
        };
        // `meta` goes in after the connection's own per-request metadata, so it can speak for
        // the client (its capabilities) rather than for the gateway.
        let mut options = PeerRequestOptions::no_options();
        options.meta = meta;
        let handle = peer.send_request_with_option(request, options).await;
        let handle = match handle {
            Ok(handle) => handle,
            // Not sent: the upstream never saw the request.
            Err(e) => {
                self.forget_connection(era).await;
                return Err(UpstreamError::Unavailable {
                    upstream: self.name().to_owned(),
                    reason: format!("the connection broke before the request was sent ({e})"),
                });
            }
        };
        ticket.bind(handle.id.clone(), handle.progress_token.clone());
        let id = handle.id.clone();
        let answer = tokio::select! {
            answer = tokio::time::timeout(self.timeout, handle.await_response()) => answer.ok(),
            () = cancel.cancelled() => None,
        };
        if let Some(answer) = answer {
            return match answer {
                Ok(result) => Ok(result),
                Err(e) => Err(self.failed(era, e).await),
            };
        }
        let cancelled = cancel.is_cancelled();
        let reason = if cancelled {
            "cancelled by the client"
        } else {
            "timed out at the gateway"
        };
        let notice = CancelledNotificationParam::new(Some(id), Some(reason.into()));
        drop(peer.notify_cancelled(notice).await);
        Err(if cancelled {
            UpstreamError::Cancelled
        } else {
            UpstreamError::TimedOut {
                upstream: self.name().to_owned(),
                after: self.timeout,
            }
        })
    }

    /// Runs one request against the upstream, bounded by the timeout and the client's
    /// cancellation. A dropped connection is reported, and reopened on the next use.
    pub async fn request<T, F, Fut>(
        &self,
        era: Era,
        cancel: &tokio_util::sync::CancellationToken,
        send: F,
    ) -> Result<T, UpstreamError>
    where
        F: FnOnce(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let peer = self.peer(era).await?;
        // In flight at the relay, as [`Connection::send`]'s requests are.
        let _in_flight = self.relay.register(Requester::unattended(), None);
        let answer = tokio::select! {
            answer = tokio::time::timeout(self.timeout, send(peer)) => answer,
            () = cancel.cancelled() => return Err(UpstreamError::Cancelled),
        };
        match answer {
            Err(_) => Err(UpstreamError::TimedOut {
                upstream: self.name().to_owned(),
                after: self.timeout,
            }),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.failed(era, e).await),
        }
    }

    /// What an SDK error means for the caller; a broken connection is forgotten, to be reopened.
    async fn failed(&self, era: Era, e: ServiceError) -> UpstreamError {
        let upstream = self.name().to_owned();
        match e {
            ServiceError::McpError(error) => UpstreamError::Refused { upstream, error },
            ServiceError::UnexpectedResponse => UpstreamError::Garbage { upstream },
            ServiceError::Timeout { timeout } => UpstreamError::TimedOut {
                upstream,
                after: timeout,
            },
            ServiceError::Cancelled { .. } => UpstreamError::Cancelled,
            other => {
                tracing::warn!(upstream = %upstream, error = %other, "upstream request failed");
                self.forget_connection(era).await;
                UpstreamError::Closed { upstream }
            }
        }
    }

    /// The connection broke: the next request opens a new one (restarting a stdio server).
    async fn forget_connection(&self, era: Era) {
        if let Some(mut broken) = self.slot(era).0.lock().await.take() {
            tokio::spawn(async move { drop(broken.close().await) });
        }
    }
}
