//! Interceptor servers the gateway connects to (stdio or Streamable HTTP). A server that crashed or
//! dropped the connection is reconnected — a stdio server restarted — on the next invocation; the
//! invocation that met the failure fails (and blocks its message unless fail-open).

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::{
    RoleClient, ServiceExt,
    service::RunningService,
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use tokio::sync::Mutex;
use undolog_interceptors::{
    Descriptor, Error, Interceptor, InterceptorClient, Invocation, InvokeParams, ListParams,
    Outcome,
};

use crate::config::InterceptorSource;

/// One interceptor server and the gateway's connection to it.
#[derive(Debug)]
pub(super) struct RemoteServer {
    source: InterceptorSource,
    running: Mutex<Option<RunningService<RoleClient, ()>>>,
}

impl RemoteServer {
    pub(super) fn new(source: InterceptorSource) -> Arc<RemoteServer> {
        Arc::new(RemoteServer {
            source,
            running: Mutex::new(None),
        })
    }

    /// Every interceptor the server lists, invoked through this connection.
    pub(super) async fn interceptors(self: &Arc<Self>) -> Result<Vec<Arc<dyn Interceptor>>, Error> {
        let listed = self.client().await?.list(&ListParams::default()).await?;
        Ok(listed
            .interceptors
            .into_iter()
            .map(|descriptor| {
                Arc::new(RemoteMember {
                    descriptor,
                    server: self.clone(),
                }) as Arc<dyn Interceptor>
            })
            .collect())
    }

    /// The live connection, opened (or the server restarted) first when needed.
    async fn client(&self) -> Result<InterceptorClient, Error> {
        let mut running = self.running.lock().await;
        if let Some(live) = running.as_ref()
            && !live.is_closed()
        {
            return Ok(InterceptorClient::from_peer(live.peer().clone()));
        }
        if running.take().is_some() {
            tracing::warn!(source = ?self.source_name(), "interceptor server dropped; reconnecting");
        }
        let fresh = self.connect().await?;
        let client = InterceptorClient::from_peer(fresh.peer().clone());
        *running = Some(fresh);
        Ok(client)
    }

    fn source_name(&self) -> String {
        match &self.source {
            InterceptorSource::Stdio { command, .. } => command.clone(),
            InterceptorSource::Http { url, .. } => url.clone(),
            InterceptorSource::Builtin(b) => format!("{b:?}"),
        }
    }

    async fn connect(&self) -> Result<RunningService<RoleClient, ()>, Error> {
        let transport_error = |e: String| Error::Transport(e);
        match &self.source {
            InterceptorSource::Stdio { command, args, env } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env).kill_on_drop(true);
                let (transport, _stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::inherit())
                    .spawn()
                    .map_err(|e| transport_error(format!("cannot start `{command}`: {e}")))?;
                ().serve(transport)
                    .await
                    .map_err(|e| transport_error(e.to_string()))
            }
            InterceptorSource::Http { url, headers } => {
                let mut custom = std::collections::HashMap::new();
                for (name, value) in headers {
                    let name = http::HeaderName::try_from(name.as_str())
                        .map_err(|e| transport_error(format!("header {name}: {e}")))?;
                    let value = http::HeaderValue::try_from(value.0.as_str())
                        .map_err(|e| transport_error(format!("header {name}: {e}")))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                ().serve(StreamableHttpClientTransport::from_config(config))
                    .await
                    .map_err(|e| transport_error(e.to_string()))
            }
            InterceptorSource::Builtin(_) => Err(transport_error(
                "a built-in interceptor has no server".into(),
            )),
        }
    }
}

/// One interceptor of a remote server, as a chain member.
#[derive(Debug)]
struct RemoteMember {
    descriptor: Descriptor,
    server: Arc<RemoteServer>,
}

#[async_trait]
impl Interceptor for RemoteMember {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    async fn invoke(&self, invocation: Invocation) -> Result<Outcome, Error> {
        let params = InvokeParams::for_invocation(&self.descriptor.name, invocation);
        match self.server.client().await?.invoke(&params).await {
            Ok(result) => result.answering(&params),
            Err(e @ Error::Transport(_)) => {
                // The server went away mid-call: start afresh on the next invocation.
                self.server.running.lock().await.take();
                Err(e)
            }
            Err(e) => Err(e),
        }
    }
}
