//! The interceptor chain the gateway runs (SEP-2624): built at start-up from `[[interceptors]]`
//! — built-ins in process, interceptor servers over stdio or Streamable HTTP — with every config
//! checked against its interceptor's `configSchema`. `tool_call` runs it on `tools/call`.

mod policy;
mod relayed;
mod remote;
mod tool_call;

use std::{collections::BTreeMap, sync::Arc};

use async_trait::async_trait;
use rmcp::{
    ErrorData,
    model::{CustomRequest, CustomResult, ErrorCode, ServerCapabilities},
};
use undolog_interceptors::{
    Chain, ChainExecutionResult, ChainRequest, Descriptor, Interceptor, Invocation, Member,
    Outcome, Registry,
    builtin::{ArgumentValidator, CrossBoundaryGuard, SecretRedactor},
    wire::METHOD_LIST,
};

pub(crate) use tool_call::{RequestVerdict, ResponseVerdict, context, verdicts};

use remote::RemoteServer;

use crate::{
    GatewayConfig,
    config::{self, BuiltinInterceptor, InterceptorConfig, InterceptorSource},
    upstream::Upstreams,
};

/// The gateway's interceptors: the chain, and the registry `interceptors/list` answers from.
#[derive(Debug, Default)]
pub(crate) struct Interceptors {
    chain: Chain,
    registry: Registry,
    /// Told what each chain run decided.
    metrics: Arc<crate::metrics::Metrics>,
}

impl Interceptors {
    /// Starts or connects to every configured interceptor and builds the chain. A server that
    /// cannot be reached, a name it does not list, or a config its schema refuses stops start-up.
    pub(crate) async fn start(
        config: &GatewayConfig,
        upstreams: &Upstreams,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Result<Interceptors, config::Error> {
        let mut out = Interceptors {
            metrics,
            ..Interceptors::default()
        };
        for entry in &config.interceptors {
            let found = discover(entry, config, upstreams).await?;
            let selected: Vec<Arc<dyn Interceptor>> = match &entry.names {
                None => found,
                Some(names) => {
                    let mut selected = Vec::new();
                    for name in names {
                        let one = found
                            .iter()
                            .find(|i| &i.descriptor().name == name)
                            .ok_or_else(|| {
                                let listed: Vec<&str> =
                                    found.iter().map(|i| i.descriptor().name.as_str()).collect();
                                config::Error::key(
                                    format!("{}.names", entry.key),
                                    format!(
                                        "{name:?} is not an interceptor of this source; it lists \
                                         {listed:?}"
                                    ),
                                )
                            })?;
                        selected.push(one.clone());
                    }
                    selected
                }
            };
            for interceptor in selected {
                let interceptor = overridden(interceptor, entry);
                let mut member = Member::new(interceptor.clone());
                if let Some(config) = &entry.config {
                    member = member.with_config(config.clone());
                }
                if let Some(timeout) = entry.timeout {
                    member = member.with_timeout(timeout);
                }
                let at = |e: undolog_interceptors::Error| {
                    let (field, hint) = match e {
                        undolog_interceptors::Error::InvalidConfig { .. } => (".config", ""),
                        undolog_interceptors::Error::DuplicateName(_) => (
                            "",
                            " (another entry brings it too: drop one, or choose with `names`)",
                        ),
                        _ => ("", ""),
                    };
                    config::Error::key(format!("{}{field}", entry.key), format!("{e}{hint}"))
                };
                out.chain.push(member).map_err(at)?;
                out.registry.register(interceptor).map_err(at)?;
            }
        }
        Ok(out)
    }

    /// Runs one message through the chain; `None` when no interceptor looks at it.
    pub(crate) async fn run(&self, request: ChainRequest) -> Option<ChainExecutionResult> {
        if !self.chain.intercepts(&request.event, request.phase) {
            return None;
        }
        let record = self.chain.execute(request).await;
        self.metrics.chain(&record);
        Some(record)
    }

    /// Adds `capabilities.extensions["io.modelcontextprotocol/interceptors"]` when any runs.
    pub(crate) fn advertise(&self, capabilities: &mut ServerCapabilities) {
        if self.registry.interceptors().next().is_some() {
            undolog_interceptors::server::advertise(capabilities, &self.registry);
        }
    }

    /// `interceptors/list`: the interceptors this gateway runs. Invoking them one by one is not
    /// offered: they run as the gateway's chain, with the gateway's configs.
    pub(crate) async fn handle_custom_request(
        &self,
        request: CustomRequest,
    ) -> Result<CustomResult, ErrorData> {
        if request.method == METHOD_LIST {
            return undolog_interceptors::server::handle_custom_request(&self.registry, request)
                .await;
        }
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "method `{}` not found; this gateway answers {METHOD_LIST} (its interceptors run \
                 as a chain on the messages they hook)",
                request.method
            ),
            None,
        ))
    }
}

/// The interceptors one entry offers.
async fn discover(
    entry: &InterceptorConfig,
    config: &GatewayConfig,
    upstreams: &Upstreams,
) -> Result<Vec<Arc<dyn Interceptor>>, config::Error> {
    let unreachable =
        |field: &str, e: String| config::Error::key(format!("{}.{field}", entry.key), e);
    let (field, server) = match &entry.source {
        InterceptorSource::Builtin(builtin) => {
            return builtin_interceptor(*builtin, entry, config, upstreams).await;
        }
        InterceptorSource::Stdio { .. } => ("command", RemoteServer::new(entry.source.clone())),
        InterceptorSource::Http { .. } => ("url", RemoteServer::new(entry.source.clone())),
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), server.interceptors())
        .await
        .map_err(|_| {
            unreachable(
                field,
                "interceptors/list got no answer in 30 s; check that the server speaks MCP \
             and serves SEP-2624 interceptors"
                    .into(),
            )
        })?
        .map_err(|e| match e {
            undolog_interceptors::Error::MalformedResult { .. } => unreachable(
                field,
                format!("{e}; the server's interceptors/list must follow SEP-2624, fix the server"),
            ),
            other => unreachable(field, other.to_string()),
        })
}

async fn builtin_interceptor(
    builtin: BuiltinInterceptor,
    entry: &InterceptorConfig,
    config: &GatewayConfig,
    upstreams: &Upstreams,
) -> Result<Vec<Arc<dyn Interceptor>>, config::Error> {
    // Whatever either era offers: the chain sees the calls of both.
    let mut tools = upstreams.tools(crate::upstream::Era::Session).await;
    tools.extend(upstreams.tools(crate::upstream::Era::Stateless).await);
    let interceptor: Arc<dyn Interceptor> = match builtin {
        BuiltinInterceptor::Redactor => Arc::new(SecretRedactor::new()),
        BuiltinInterceptor::Guard => {
            // A tool's server is the upstream the gateway routes it to.
            let servers: BTreeMap<String, String> = tools
                .iter()
                .map(|r| {
                    let upstream = upstreams.connection(r.upstream).name().to_owned();
                    (r.item.name.to_string(), upstream)
                })
                .collect();
            Arc::new(CrossBoundaryGuard::new(servers))
        }
        BuiltinInterceptor::Policy => {
            // The classification every call of the tool gets (configuration, then annotations).
            let policies = tools
                .iter()
                .map(|r| {
                    let trusted = upstreams.connection(r.upstream).config.trust_annotations;
                    let name = r.item.name.to_string();
                    let policy = crate::policy::classify(config, &name, &r.item, trusted);
                    (name, policy)
                })
                .collect();
            Arc::new(policy::PolicyValidator::new(policies, config.default_tier))
        }
        BuiltinInterceptor::Arguments => {
            let schemas = tools
                .iter()
                .map(|r| {
                    let schema = serde_json::Value::Object((*r.item.input_schema).clone());
                    (r.item.name.to_string(), schema)
                })
                .collect();
            Arc::new(
                ArgumentValidator::new(schemas)
                    .map_err(|e| config::Error::key(format!("{}.builtin", entry.key), e))?,
            )
        }
    };
    Ok(vec![interceptor])
}

/// The interceptor under the entry's `events`, `mode`, `fail_open` and `timeout_ms`.
fn overridden(inner: Arc<dyn Interceptor>, entry: &InterceptorConfig) -> Arc<dyn Interceptor> {
    if entry.mode.is_none()
        && entry.fail_open.is_none()
        && entry.timeout.is_none()
        && entry.events.is_none()
    {
        return inner;
    }
    let mut descriptor = inner.descriptor().clone();
    if let Some(events) = &entry.events {
        for hook in &mut descriptor.hooks {
            hook.events = events.clone();
        }
    }
    if let Some(mode) = entry.mode {
        descriptor.mode = mode;
    }
    if let Some(fail_open) = entry.fail_open {
        descriptor.fail_open = fail_open;
    }
    if let Some(timeout) = entry.timeout {
        descriptor.timeout_ms = Some(timeout.as_millis() as u64);
    }
    Arc::new(Overridden { descriptor, inner })
}

#[derive(Debug)]
struct Overridden {
    descriptor: Descriptor,
    inner: Arc<dyn Interceptor>,
}

#[async_trait]
impl Interceptor for Overridden {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    async fn invoke(&self, invocation: Invocation) -> Result<Outcome, undolog_interceptors::Error> {
        self.inner.invoke(invocation).await
    }
}
