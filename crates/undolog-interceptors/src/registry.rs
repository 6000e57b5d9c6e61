//! The interceptors one server offers: registration, `interceptors/list`, `interceptor/invoke`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::ConfigSchema;
use crate::descriptor::Descriptor;
use crate::error::Error;
use crate::interceptor::{Interceptor, Invocation};
use crate::wire::{InvokeParams, InvokeResult, ListParams, ListResult, Outcome};

/// How long one invocation may take when neither the call nor the descriptor says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The interceptors registered on one interceptor server, in registration order.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    entries: Vec<Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    interceptor: Arc<dyn Interceptor>,
    schema: ConfigSchema,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Register an interceptor; names are unique and its `configSchema` must compile.
    pub fn register(&mut self, interceptor: Arc<dyn Interceptor>) -> Result<(), Error> {
        let descriptor = interceptor.descriptor();
        if self
            .entries
            .iter()
            .any(|e| e.interceptor.descriptor().name == descriptor.name)
        {
            return Err(Error::DuplicateName(descriptor.name.clone()));
        }
        let schema = ConfigSchema::compile(descriptor)?;
        self.entries.push(Entry {
            interceptor,
            schema,
        });
        Ok(())
    }

    /// The registered interceptors, in registration order.
    pub fn interceptors(&self) -> impl Iterator<Item = &Arc<dyn Interceptor>> {
        self.entries.iter().map(|e| &e.interceptor)
    }

    /// Every event any interceptor hooks (patterns as declared), first appearance first.
    pub fn supported_events(&self) -> Vec<String> {
        let mut events: Vec<String> = Vec::new();
        for hook in self
            .entries
            .iter()
            .flat_map(|e| &e.interceptor.descriptor().hooks)
        {
            for event in &hook.events {
                if !events.contains(event) {
                    events.push(event.clone());
                }
            }
        }
        events
    }

    /// `interceptors/list`.
    pub fn list(&self, params: &ListParams) -> ListResult {
        let interceptors = self
            .interceptors()
            .map(|i| i.descriptor())
            .filter(|d| params.event.as_deref().is_none_or(|e| d.hooks_event(e)))
            .filter(|d| {
                params
                    .phase
                    .is_none_or(|p| d.hooks.iter().any(|h| h.phase == p))
            })
            .cloned()
            .collect();
        ListResult { interceptors }
    }

    /// `interceptor/invoke`: find by name, check the config, run with a timeout.
    pub async fn invoke(&self, params: InvokeParams) -> Result<InvokeResult, Error> {
        let entry = self
            .entries
            .iter()
            .find(|e| e.interceptor.descriptor().name == params.name)
            .ok_or_else(|| Error::UnknownInterceptor(params.name.clone()))?;
        entry.schema.check(params.config.as_ref())?;
        let timeout = params.timeout_ms.map(Duration::from_millis);
        let phase = params.phase;
        let invocation = Invocation {
            event: params.event,
            phase,
            payload: params.payload,
            config: params.config,
            context: params.context,
        };
        let started = Instant::now();
        let outcome = call(entry.interceptor.as_ref(), invocation, timeout).await?;
        let ms = started.elapsed().as_millis() as u64;
        Ok(InvokeResult::new(&params.name, phase, outcome, Some(ms)))
    }
}

/// Run one interceptor with a timeout (the given one, else its descriptor's, else the default) and
/// check that it answered with the type it declares.
pub(crate) async fn call(
    interceptor: &dyn Interceptor,
    invocation: Invocation,
    timeout: Option<Duration>,
) -> Result<Outcome, Error> {
    let descriptor: &Descriptor = interceptor.descriptor();
    let timeout = timeout
        .or(descriptor.timeout_ms.map(Duration::from_millis))
        .unwrap_or(DEFAULT_TIMEOUT);
    let outcome = tokio::time::timeout(timeout, interceptor.invoke(invocation))
        .await
        .map_err(|_| Error::Timeout {
            name: descriptor.name.clone(),
            ms: timeout.as_millis() as u64,
        })??;
    if outcome.kind() != descriptor.kind {
        return Err(Error::WrongResultType {
            name: descriptor.name.clone(),
            declared: descriptor.kind.as_str(),
            got: outcome.kind().as_str(),
        });
    }
    Ok(outcome)
}
