//! The MCP server clients talk to. `tools/call` goes through the engine; lists are the merged
//! catalog of the upstreams; everything else is forwarded to the upstream that owns it.

// Logging is deprecated in 2026-07-28 but 2025-11-25 clients still set levels; relay them.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
        CompleteRequestParams, CompleteResult, CustomRequest, CustomResult, DiscoverResult,
        GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
        JsonObject, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
        ListToolsResult, MetaObject, PaginatedRequestParams, ReadResourceRequestParams,
        ReadResourceResponse, Reference, RequestMetaObject, ServerCapabilities, ServerConfig,
        SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
        UnsubscribeRequestParams, UpdateTaskParams,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use undolog_types::Args;

use crate::{
    Error, Gateway, Principal,
    calls::{Caller, InputRound, Outcome, ToolCall},
    results,
    runs::{self, BoundRun, CallSession, Named},
    upstream::{CacheHint, Era, Requester, Subscriber, UpstreamError},
};

/// A list result with the caching hint its parts gave, for a 2026-07-28 client (2025-11-25 has
/// no caching hints).
macro_rules! hinted {
    ($listed:expr, $hint:expr, $context:expr) => {{
        let listed = $listed;
        let hint: CacheHint = $hint;
        match era($context) {
            Era::Stateless => listed
                .with_ttl_ms(hint.ttl_ms())
                .with_cache_scope(hint.scope()),
            Era::Session => listed,
        }
    }};
}

/// Header that pins the UndoLog session, whatever the transport's own session is.
mod tool_call;
pub(crate) use tool_call::answer_tool_call;

pub(crate) const SESSION_HEADER: &str = "x-undolog-session-id";

/// One client connection (an MCP session, a stateless request, or the stdio client).
#[derive(Debug, Clone)]
pub(crate) struct McpFront {
    gateway: Arc<Gateway>,
    /// The run this connection joined at its first call, when it outlives one call (an MCP
    /// session, the stdio client).
    bound_run: Arc<BoundRun>,
    /// The fixed principal of a stdio client; HTTP requests carry theirs.
    stdio_principal: Option<Principal>,
    /// Tells this connection from the others, for relaying upstream messages to it alone.
    connection: u64,
}

impl McpFront {
    pub(crate) fn http(gateway: Arc<Gateway>) -> McpFront {
        McpFront {
            gateway,
            bound_run: Arc::default(),
            stdio_principal: None,
            connection: Requester::next_connection(),
        }
    }

    pub(crate) fn stdio(gateway: Arc<Gateway>, principal: Principal) -> McpFront {
        McpFront {
            gateway,
            bound_run: Arc::default(),
            stdio_principal: Some(principal),
            connection: Requester::next_connection(),
        }
    }

    /// Who sent one request.
    fn principal(&self, context: &RequestContext<RoleServer>) -> Result<Principal, ErrorData> {
        let parts = context.extensions.get::<http::request::Parts>();
        match (&self.stdio_principal, parts) {
            (Some(principal), _) => Ok(principal.clone()),
            (None, Some(parts)) => parts.extensions.get::<Principal>().cloned().ok_or_else(|| {
                ErrorData::internal_error("the request reached MCP without credentials", None)
            }),
            (None, None) => Err(ErrorData::internal_error("no transport information", None)),
        }
    }

    /// What one request's transport says about its session (see [`crate::runs`]); its `_meta`
    /// is read with the call.
    fn named<'a>(&'a self, context: &'a RequestContext<RoleServer>) -> Named<'a> {
        let parts = context.extensions.get::<http::request::Parts>();
        let header = |name: &str| {
            parts
                .and_then(|p| p.headers.get(name))
                .and_then(|v| v.to_str().ok())
        };
        // A stateless request's handler lives for that request only: nothing to bind.
        let long_lived = self.stdio_principal.is_some() || header("mcp-session-id").is_some();
        Named {
            header: header(SESSION_HEADER),
            meta: None,
            connection: long_lived.then_some(&self.bound_run),
        }
    }

    /// The client request `context` is, as the relay addresses it.
    fn requester(&self, context: &RequestContext<RoleServer>) -> Requester {
        Requester {
            peer: Some(context.peer.clone()),
            protocol_version: context.protocol_version(),
            connection: self.connection,
            request: context.id.clone(),
        }
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Caller {
        Caller {
            tasks: context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks()),
            in_task: false,
            hold: None,
            requester: Some(self.requester(context)),
            cancel: context.ct.clone(),
            never_hold: false,
            era: era(context),
            upstream_meta: client_capabilities(context),
        }
    }
}

/// The protocol era of the client's request, which its upstream request speaks too.
fn era(context: &RequestContext<RoleServer>) -> Era {
    Era::of(context.protocol_version().as_ref())
}

/// A 2026-07-28 client's capabilities, for its upstream request: the upstream then asks only
/// for the input this client can give (the gateway passes `input_required` rounds through).
fn client_capabilities(context: &RequestContext<RoleServer>) -> Option<RequestMetaObject> {
    (era(context) == Era::Stateless).then(|| upstream_meta(context.client_capabilities()))
}

/// The per-request metadata of a 2026-07-28 client's upstream request: its capabilities. A
/// client that declared none has none: the upstream must not see the gateway's.
pub(crate) fn upstream_meta(capabilities: Option<ClientCapabilities>) -> RequestMetaObject {
    let mut meta = RequestMetaObject::default();
    meta.set_client_capabilities(capabilities.unwrap_or_default());
    meta
}

/// The client's request `_meta` as passed upstream: its progress token, trace context and the
/// like, without the protocol's own per-request keys (`io.modelcontextprotocol/…`), which describe
/// the client's connection to the gateway, not the gateway's to the upstream, nor UndoLog's
/// (`io.undolog/…`), which are the gateway's.
fn forwarded_meta(meta: &RequestMetaObject) -> Option<RequestMetaObject> {
    let map: JsonObject = (meta.0.0.iter())
        .filter(|(key, _)| {
            !key.starts_with("io.modelcontextprotocol/") && !key.starts_with("io.undolog/")
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    (!map.is_empty()).then_some(RequestMetaObject(MetaObject(map)))
}

impl ServerHandler for McpFront {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_completions()
            .enable_logging()
            .enable_tasks()
            .build();
        let mut capabilities = capabilities;
        self.gateway.interceptors.advertise(&mut capabilities);
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new("undolog", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "UndoLog records every tool call: a repeated call is replayed, irreversible calls \
             wait for a person's approval, and a session can be undone."
                .into(),
        );
        info
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    /// Every kind of change is served: list changes of every upstream, and updates of the
    /// resources the stream names.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    /// A 2026-07-28 client's listen stream: it hears of every upstream's list changes (as its
    /// filter asks), and of updates to the resources it names, subscribed upstream for it
    /// until the stream ends.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let listeners = &self.gateway.upstreams.listeners;
        let id = listeners.add(context.sink().clone());
        let open = CancellationToken::new();
        let _closed = open.clone().drop_guard();
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let mut subscribed = Vec::new();
        for uri in uris {
            let subscriber = Subscriber::Listen(id, open.clone());
            match self
                .gateway
                .upstreams
                .subscribe(&uri, subscriber, Era::Session, &open)
                .await
            {
                Ok(()) => subscribed.push(uri),
                Err(e) => {
                    tracing::debug!(%uri, error = %e.message, "no upstream updates for a listened resource")
                }
            }
        }
        context.cancelled().await;
        listeners.remove(id);
        open.cancel();
        for uri in subscribed {
            self.gateway
                .upstreams
                .unsubscribe(&uri, Some(id), Era::Session)
                .await;
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.gateway.upstreams.refresh().await;
        let (tools, hint) = self.gateway.upstreams.tools_with_hint(era(&context)).await;
        let listed = ListToolsResult::with_all_items(tools.into_iter().map(|r| r.item).collect());
        Ok(hinted!(listed, hint, &context))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let principal = self.principal(&context)?;
        let named = self.named(&context);
        let caller = self.caller(&context);
        let context_meta = &context.meta;
        answer_tool_call(
            &self.gateway,
            principal,
            request,
            context_meta,
            named,
            &caller,
        )
        .await
    }

    /// A 2025-11-25 session hears of every upstream's list changes from now on.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.gateway.upstreams.listeners.add_session(context.peer);
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let principal = self.principal(&context)?;
        self.gateway.task(&principal, &request.task_id).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let principal = self.principal(&context)?;
        (self.gateway)
            .update_task(&principal, &request.task_id, request.input_responses)
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let principal = self.principal(&context)?;
        self.gateway.cancel_task(&principal, &request.task_id).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        self.gateway
            .interceptors
            .handle_custom_request(request)
            .await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.gateway.upstreams.refresh().await;
        let (prompts, hint) = self
            .gateway
            .upstreams
            .prompts_with_hint(era(&context))
            .await;
        let listed =
            ListPromptsResult::with_all_items(prompts.into_iter().map(|r| r.item).collect());
        Ok(hinted!(listed, hint, &context))
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let route = self
            .gateway
            .upstreams
            .prompt(era(&context), &request.name)
            .await
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("no prompt named {:?}", request.name), None)
            })?;
        let conn = self.gateway.upstreams.connection(route.upstream);
        request.name = route.name;
        let _ticket = conn
            .relay
            .register(self.requester(&context), request.meta.as_ref());
        conn.request(era(&context), &context.ct, |peer| async move {
            peer.get_prompt_once(request).await
        })
        .await
        .map_err(UpstreamError::into_error_data)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let (mut all, mut hints) = (Vec::new(), Vec::new());
        for (index, conn) in self.gateway.upstreams.connections().iter().enumerate() {
            match conn
                .request(era(&context), &context.ct, |peer| async move {
                    peer.list_all_resources_with_cache_hint().await
                })
                .await
            {
                Ok(listed) => {
                    hints.push(CacheHint::of(&listed));
                    self.gateway
                        .upstreams
                        .note_resources(index, &listed.items)
                        .await;
                    all.extend(listed.items);
                }
                Err(e) => {
                    hints.push(CacheHint::UNKNOWN);
                    tracing::debug!(upstream = %conn.name(), error = %e, "no resources");
                }
            }
        }
        let listed = ListResourcesResult::with_all_items(all);
        Ok(hinted!(listed, CacheHint::merged(hints), &context))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let (mut all, mut hints) = (Vec::new(), Vec::new());
        for conn in self.gateway.upstreams.connections() {
            match conn
                .request(era(&context), &context.ct, |peer| async move {
                    peer.list_all_resource_templates_with_cache_hint().await
                })
                .await
            {
                Ok(listed) => {
                    hints.push(CacheHint::of(&listed));
                    all.extend(listed.items);
                }
                Err(e) => {
                    hints.push(CacheHint::UNKNOWN);
                    tracing::debug!(upstream = %conn.name(), error = %e, "no templates");
                }
            }
        }
        let listed = ListResourceTemplatesResult::with_all_items(all);
        Ok(hinted!(listed, CacheHint::merged(hints), &context))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let mut last = None;
        for index in self
            .gateway
            .upstreams
            .resource_candidates(&request.uri)
            .await
        {
            let conn = self.gateway.upstreams.connection(index);
            let request = request.clone();
            let _ticket = conn
                .relay
                .register(self.requester(&context), request.meta.as_ref());
            match conn
                .request(era(&context), &context.ct, |peer| async move {
                    peer.read_resource_once(request).await
                })
                .await
            {
                Ok(found) => return Ok(found),
                Err(e) => last = Some(e.into_error_data()),
            }
        }
        Err(last.unwrap_or_else(|| {
            ErrorData::resource_not_found(format!("no upstream has {}", request.uri), None)
        }))
    }

    /// Forwarded to the upstreams that may have the resource (the first that accepts keeps the
    /// subscription); its `notifications/resources/updated` come back to every subscriber.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let subscriber = Subscriber::Session(context.peer.clone());
        self.gateway
            .upstreams
            .subscribe(&request.uri, subscriber, era(&context), &context.ct)
            .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.gateway
            .upstreams
            .unsubscribe(&request.uri, None, era(&context))
            .await;
        Ok(())
    }

    async fn complete(
        &self,
        mut request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let candidates = match &mut request.r#ref {
            Reference::Prompt(prompt) => {
                let route = self
                    .gateway
                    .upstreams
                    .prompt(era(&context), &prompt.name)
                    .await
                    .ok_or_else(|| {
                        ErrorData::invalid_params(
                            format!("no prompt named {:?}", prompt.name),
                            None,
                        )
                    })?;
                prompt.name = route.name;
                vec![route.upstream]
            }
            Reference::Resource(resource) => {
                self.gateway
                    .upstreams
                    .resource_candidates(&resource.uri)
                    .await
            }
            _ => (0..self.gateway.upstreams.connections().len()).collect(),
        };
        let mut last = None;
        for index in candidates {
            let conn = self.gateway.upstreams.connection(index);
            let request = request.clone();
            match conn
                .request(era(&context), &context.ct, |peer| async move {
                    peer.complete(request).await
                })
                .await
            {
                Ok(done) => return Ok(done),
                Err(e) => last = Some(e.into_error_data()),
            }
        }
        Err(last.unwrap_or_else(|| ErrorData::invalid_params("nothing to complete", None)))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        for conn in self.gateway.upstreams.connections() {
            let request = request.clone();
            let sent = conn
                .request(era(&context), &context.ct, |peer| async move {
                    peer.set_level(request).await
                })
                .await;
            if let Err(e) = sent {
                tracing::debug!(upstream = %conn.name(), error = %e, "log level not set");
            }
        }
        Ok(())
    }
}

impl From<Error> for ErrorData {
    fn from(e: Error) -> ErrorData {
        e.to_jsonrpc()
    }
}

#[cfg(test)]
mod tests;
