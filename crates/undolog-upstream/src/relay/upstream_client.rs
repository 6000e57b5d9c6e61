//! The gateway's side of an upstream connection: the MCP client handler that hands what an
//! upstream asks of its client (sampling, elicitation, roots) and tells it (progress, log
//! messages, list and resource changes) to the one client request it belongs to.

#![allow(deprecated)]

use super::*;

/// The upstream request a server-to-client request came with, when its stream says.
fn origin_of(context: &RequestContext<RoleClient>) -> Option<&RequestId> {
    match context.extensions.get::<InboundStreamOrigin>() {
        Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id),
        _ => None,
    }
}

/// Sends a request to the client, on the stream of the client request it belongs to.
async fn ask(requester: &Requester, mut request: ServerRequest) -> Result<ClientResult, ErrorData> {
    request
        .extensions_mut()
        .insert(OriginatingRequestId(requester.request.clone()));
    let peer = requester.peer.clone().ok_or_else(|| {
        ErrorData::internal_error(
            "the client's request takes no requests while it runs (it was sent statelessly, \
             answered with its result alone)",
            None,
        )
    })?;
    // From a task of its own: inside this handler rmcp would mark the request with the
    // upstream's request id instead, and the client's stream would not be found.
    tokio::spawn(async move { peer.send_request(request).await })
        .await
        .map_err(|e| ErrorData::internal_error(format!("the relay stopped: {e}"), None))?
        .map_err(relayed)
}

/// The gateway's side of an upstream connection: an MCP client that relays back to clients.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamClient {
    pub relay: Arc<Relay>,
    pub upstream: String,
}

/// The answer to a request no client request can be tied to: refused, never guessed.
fn unattributed(upstream: &str, what: &str) -> ErrorData {
    tracing::warn!(
        upstream,
        what,
        "a message from an upstream could not be tied to one client request; refused"
    );
    ErrorData::internal_error(
        format!(
            "{what} could not be tied to one client request (none is in flight, or requests of \
             several clients are); send it on the stream of the request it belongs to"
        ),
        None,
    )
}

fn unexpected() -> ErrorData {
    ErrorData::internal_error("the client answered with another kind of result", None)
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
            crate::gateway_info(),
        )
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        const EVENT: &str = "sampling/createMessage";
        let requester = self
            .relay
            .requester_for(origin_of(&context))
            .await
            .ok_or_else(|| unattributed(&self.upstream, "a sampling request"))?;
        let params = self
            .relay
            .intercepted(EVENT, Phase::Request, params)
            .await?;
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        let ClientResult::CreateMessageResult(result) = ask(&requester, request).await? else {
            return Err(unexpected());
        };
        self.relay
            .intercepted(EVENT, Phase::Response, *result)
            .await
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        const EVENT: &str = "elicitation/create";
        let requester = self
            .relay
            .requester_for(origin_of(&context))
            .await
            .ok_or_else(|| unattributed(&self.upstream, "an elicitation request"))?;
        let params = self
            .relay
            .intercepted(EVENT, Phase::Request, params)
            .await?;
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let ClientResult::ElicitResult(result) = ask(&requester, request).await? else {
            return Err(unexpected());
        };
        self.relay.intercepted(EVENT, Phase::Response, result).await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        // Servers often ask at connect time, with no call in flight: no client's roots then,
        // and none when it cannot be told whose they would be.
        let roots = match self.relay.requester_for(origin_of(&context)).await {
            Some(requester) => {
                let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
                let ClientResult::ListRootsResult(roots) = ask(&requester, request).await? else {
                    return Err(unexpected());
                };
                roots
            }
            None => {
                tracing::debug!(upstream = %self.upstream, "roots asked with no single client request to ask; none given");
                ListRootsResult::default()
            }
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
        let change = Change::Resource(params.uri);
        self.relay.listeners.broadcast(&change).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relay.listeners.broadcast(&Change::Tools).await;
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relay.listeners.broadcast(&Change::Prompts).await;
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relay.listeners.broadcast(&Change::Resources).await;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        mut context: NotificationContext<RoleClient>,
    ) {
        // rmcp hands the notification's `_meta` over in the context's extensions.
        let related = context
            .extensions
            .get_mut::<NotificationMetaObject>()
            .and_then(|meta| meta.remove(RELATED_REQUEST))
            .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
        match self.relay.requester_of(related.as_ref()) {
            Some(Requester {
                peer: Some(peer), ..
            }) => {
                if let Err(e) = peer.notify_logging_message(params).await {
                    tracing::debug!(upstream = %self.upstream, error = %e, "log message not relayed");
                }
            }
            Some(_) => {
                tracing::debug!(upstream = %self.upstream, "a log message for a request that takes none; dropped")
            }
            // Its text may hold anything of another client's call: not even the log gets it.
            None => tracing::info!(
                upstream = %self.upstream,
                level = ?params.level,
                logger = params.logger.as_deref().unwrap_or("-"),
                "an upstream log message could not be tied to one client request; dropped"
            ),
        }
    }
}
