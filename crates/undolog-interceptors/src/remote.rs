//! Remote interceptor servers: connect over stdio or Streamable HTTP, discover with
//! `interceptors/list`, invoke with `interceptor/invoke`, and use them in a chain like local ones.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{ClientRequest, CustomRequest, ServerResult};
use rmcp::service::{Peer, RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::descriptor::Descriptor;
use crate::error::Error;
use crate::interceptor::{Interceptor, Invocation};
use crate::wire::{
    EXTENSION_ID, InvokeParams, InvokeResult, ListParams, ListResult, METHOD_INVOKE, METHOD_LIST,
    Outcome,
};

/// A connection to one interceptor server. Cheap to clone; the connection closes when the last
/// clone that owns it is dropped.
#[derive(Debug, Clone)]
pub struct InterceptorClient {
    peer: Peer<RoleClient>,
    _service: Option<Arc<RunningService<RoleClient, ()>>>,
}

impl InterceptorClient {
    /// Use an MCP client connection that the caller keeps open.
    pub fn from_peer(peer: Peer<RoleClient>) -> Self {
        InterceptorClient {
            peer,
            _service: None,
        }
    }

    /// Take over a running MCP client connection.
    pub fn from_service(service: RunningService<RoleClient, ()>) -> Self {
        InterceptorClient {
            peer: service.peer().clone(),
            _service: Some(Arc::new(service)),
        }
    }

    /// Start an interceptor server as a child process and speak MCP over its stdio.
    pub async fn connect_stdio(command: tokio::process::Command) -> Result<Self, Error> {
        let transport =
            TokioChildProcess::new(command).map_err(|e| Error::Transport(e.to_string()))?;
        let service = ().serve(transport).await.map_err(|e| Error::Transport(e.to_string()))?;
        Ok(InterceptorClient::from_service(service))
    }

    /// Connect to an interceptor server over Streamable HTTP (`http://host:port/mcp`).
    pub async fn connect_http(url: &str) -> Result<Self, Error> {
        let transport = StreamableHttpClientTransport::from_uri(url);
        let service = ().serve(transport).await.map_err(|e| Error::Transport(e.to_string()))?;
        Ok(InterceptorClient::from_service(service))
    }

    /// Whether the server advertised the interceptors extension when it initialized.
    pub fn advertises_interceptors(&self) -> bool {
        self.peer
            .peer_info()
            .and_then(|info| {
                info.capabilities
                    .extensions
                    .as_ref()
                    .map(|e| e.contains_key(EXTENSION_ID))
            })
            .unwrap_or(false)
    }

    /// `interceptors/list`.
    pub async fn list(&self, params: &ListParams) -> Result<ListResult, Error> {
        self.request(METHOD_LIST, params).await
    }

    /// `interceptor/invoke`.
    pub async fn invoke(&self, params: &InvokeParams) -> Result<InvokeResult, Error> {
        self.request(METHOD_INVOKE, params).await
    }

    /// Every interceptor the server lists, as chain-ready interceptors that call it over the wire.
    pub async fn interceptors(&self) -> Result<Vec<Arc<dyn Interceptor>>, Error> {
        let listed = self.list(&ListParams::default()).await?;
        Ok(listed
            .interceptors
            .into_iter()
            .map(|descriptor| {
                Arc::new(RemoteInterceptor {
                    descriptor,
                    client: self.clone(),
                }) as Arc<dyn Interceptor>
            })
            .collect())
    }

    async fn request<T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: &impl Serialize,
    ) -> Result<T, Error> {
        let params = serde_json::to_value(params).map_err(|e| Error::InvalidParams {
            method,
            reason: e.to_string(),
        })?;
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        match self.peer.send_request(request).await {
            Ok(ServerResult::CustomResult(result)) => {
                serde_json::from_value(result.0).map_err(|e| Error::MalformedResult {
                    method,
                    reason: e.to_string(),
                })
            }
            Ok(other) => Err(Error::MalformedResult {
                method,
                reason: format!("unexpected result {other:?}"),
            }),
            Err(ServiceError::McpError(e)) => Err(Error::Rpc {
                code: e.code.0,
                message: e.message.into_owned(),
            }),
            Err(e) => Err(Error::Transport(e.to_string())),
        }
    }
}

/// An interceptor that lives on a remote interceptor server.
#[derive(Debug, Clone)]
pub struct RemoteInterceptor {
    descriptor: Descriptor,
    client: InterceptorClient,
}

#[async_trait]
impl Interceptor for RemoteInterceptor {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    async fn invoke(&self, invocation: Invocation) -> Result<Outcome, Error> {
        let params = InvokeParams::for_invocation(&self.descriptor.name, invocation);
        self.client.invoke(&params).await?.answering(&params)
    }
}
