//! The upstream MCP servers, aggregated into one catalog per protocol era.
//!
//! Tools and prompts of every upstream appear under one list; a name that an earlier upstream
//! already uses is exposed as `UPSTREAM<separator>NAME` (or every name of an upstream gets its
//! configured prefix). Resources keep their URIs and are routed to the upstream that listed them.
//! A Streamable HTTP upstream is listed in each era over that era's connection, as real servers
//! offer different tools per revision (a 2026-07-28 client sees and reaches what the upstream
//! offers at 2026-07-28); an upstream that speaks one era (stdio, or HTTP answering only the
//! handshake) is listed once and served to both.
//!
//! It holds the connections to the upstreams, their catalogs per era, and the relay that
//! carries what an upstream sends back to the client it is for. It knows MCP and the upstreams'
//! configuration, and nothing of the engine, interceptors or the gateway's surfaces: what the
//! layer above adds comes in through two hooks, [`RelayChain`] and [`InProcess`].

mod cache_hint;
mod call_answer;
mod connection;
mod direct;
mod error;
mod hooks;
mod listeners;
mod post;
mod relay;
mod resource_subscriptions;
mod stream_origin;

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use rmcp::model::{Prompt, Resource, Tool};
use tokio::sync::RwLock;

pub use cache_hint::CacheHint;
pub use connection::{Connection, Era};
pub use error::UpstreamError;
pub use listeners::{ListenerId, Listeners};
pub use relay::{Requester, Subscriber};

use undolog_config::UpstreamConfig;

pub use hooks::{Answer, InProcess, RelayChain};

/// Who the gateway is to its upstreams, as its MCP client says it too.
fn gateway_info() -> rmcp::model::Implementation {
    rmcp::model::Implementation::new("undolog-gateway", env!("CARGO_PKG_VERSION"))
}

/// Where an exposed name lives upstream.
#[derive(Debug, Clone)]
pub struct Route<T> {
    pub upstream: usize,
    /// The name the upstream knows it by.
    pub name: String,
    /// The item as clients see it, under its exposed name.
    pub item: T,
}

#[derive(Debug)]
struct Catalog {
    /// The upstreams that have answered a tool list at least once; the others' tools are unknown.
    listed: std::collections::BTreeSet<usize>,
    /// Shared: every call looks its tool up, and takes its route without copying the tool.
    tools: BTreeMap<String, Arc<Route<Tool>>>,
    prompts: BTreeMap<String, Route<Prompt>>,
    /// How long clients may cache each list, from what the upstreams said.
    tools_hint: CacheHint,
    prompts_hint: CacheHint,
}

impl Default for Catalog {
    fn default() -> Catalog {
        Catalog {
            listed: std::collections::BTreeSet::new(),
            tools: BTreeMap::new(),
            prompts: BTreeMap::new(),
            tools_hint: CacheHint::UNKNOWN,
            prompts_hint: CacheHint::UNKNOWN,
        }
    }
}

/// What every upstream offers, per era, and where each resource lives.
#[derive(Debug, Default)]
struct Catalogs {
    session: Catalog,
    stateless: Catalog,
    /// Resource URI → upstream.
    resources: BTreeMap<String, usize>,
}

impl Catalogs {
    fn of(&self, era: Era) -> &Catalog {
        match era {
            Era::Session => &self.session,
            Era::Stateless => &self.stateless,
        }
    }
}

/// What one upstream listed in one era, with the caching hints it gave (`None`: it could not
/// answer; what it listed before stays, uncacheable).
#[derive(Debug, Clone)]
struct Listed {
    tools: Option<(Vec<Tool>, CacheHint)>,
    prompts: Option<(Vec<Prompt>, CacheHint)>,
    /// Why the tools could not be listed.
    error: Option<String>,
}

/// How an upstream answered its last listing: how many tools, or why it did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamStatus {
    pub name: String,
    pub tools: Result<usize, String>,
}

/// Every upstream, and the merged view of what they offer.
#[derive(Debug)]
pub struct Upstreams {
    connections: Vec<Arc<Connection>>,
    separator: String,
    catalogs: RwLock<Catalogs>,
    /// What the last listing said of each upstream (for start-up reports and `undolog check`).
    statuses: std::sync::Mutex<Vec<UpstreamStatus>>,
    /// Listings begun because a name was not in the catalog, and the lock one of them holds
    /// while it runs (see [`Upstreams::list_again_after_a_miss`]).
    miss_listings: AtomicU64,
    miss_listing: tokio::sync::Mutex<()>,
    /// The client listen streams every upstream change goes to.
    pub listeners: Arc<Listeners>,
    /// Ends the standing upstream listens when the gateway goes.
    watching: tokio_util::sync::CancellationToken,
}

impl Drop for Upstreams {
    fn drop(&mut self) {
        self.watching.cancel();
    }
}

impl Upstreams {
    /// Connects to every upstream and reads their tools. An upstream that is down is logged and
    /// tried again later; the others serve meanwhile.
    pub async fn start(
        configs: &[UpstreamConfig],
        separator: &str,
        timeout: Duration,
        in_process: &dyn Fn(&UpstreamConfig) -> Option<Arc<dyn InProcess>>,
    ) -> Upstreams {
        let listeners = Arc::new(Listeners::default());
        let upstreams = Upstreams {
            connections: configs
                .iter()
                .map(|c| {
                    let server = in_process(c);
                    Arc::new(Connection::new(
                        c.clone(),
                        timeout,
                        listeners.clone(),
                        server,
                    ))
                })
                .collect(),
            separator: separator.to_owned(),
            catalogs: RwLock::default(),
            statuses: std::sync::Mutex::default(),
            miss_listings: AtomicU64::new(0),
            miss_listing: tokio::sync::Mutex::new(()),
            listeners,
            watching: tokio_util::sync::CancellationToken::new(),
        };
        upstreams.refresh().await;
        // A 2026-07-28 upstream tells of list changes only on a listen stream: keep one open.
        for conn in &upstreams.connections {
            if conn.has_stateless_connection() {
                tokio::spawn(connection::watch(
                    conn.clone(),
                    upstreams.listeners.clone(),
                    upstreams.watching.clone(),
                ));
            }
        }
        upstreams
    }

    pub fn connection(&self, index: usize) -> &Arc<Connection> {
        &self.connections[index]
    }

    /// How each upstream answered the last listing, in configuration order.
    pub fn statuses(&self) -> Vec<UpstreamStatus> {
        self.statuses.lock().expect("statuses lock").clone()
    }

    pub fn connections(&self) -> &[Arc<Connection>] {
        &self.connections
    }

    /// Reads every upstream's tools and prompts again, in each era. An upstream that cannot
    /// answer keeps what it listed before.
    pub async fn refresh(&self) {
        let mut session = Vec::with_capacity(self.connections.len());
        let mut stateless = Vec::with_capacity(self.connections.len());
        let mut statuses = Vec::with_capacity(self.connections.len());
        for conn in &self.connections {
            let listed = list(conn, Era::Session).await;
            statuses.push(UpstreamStatus {
                name: conn.name().to_owned(),
                tools: match (&listed.tools, &listed.error) {
                    (Some((tools, _)), _) => Ok(tools.len()),
                    (None, error) => Err(error.clone().unwrap_or_default()),
                },
            });
            let modern = if conn.has_stateless_connection() {
                list(conn, Era::Stateless).await
            } else {
                listed.clone()
            };
            session.push(listed);
            stateless.push(modern);
        }
        *self.statuses.lock().expect("statuses lock") = statuses;
        let mut catalogs = self.catalogs.write().await;
        catalogs.session = self.merged(&catalogs.session, session);
        catalogs.stateless = self.merged(&catalogs.stateless, stateless);
    }

    /// Lists the upstreams again because a name was not in the catalog, unless a listing that
    /// began after the miss ended meanwhile. Misses that arrive together (a burst of calls to a
    /// name no upstream offers, which any agent can send) share one listing, one at a time,
    /// instead of each asking every upstream for everything; a tool added upstream before the
    /// miss is still found, as the listing that answers it began after the miss.
    async fn list_again_after_a_miss(&self) {
        let begun_before = self.miss_listings.load(Ordering::Acquire);
        let _one_at_a_time = self.miss_listing.lock().await;
        if self.miss_listings.load(Ordering::Acquire) == begun_before {
            self.miss_listings.fetch_add(1, Ordering::AcqRel);
            self.refresh().await;
        }
    }

    /// One era's catalog from what each upstream listed (or, where it could not, from `old`).
    fn merged(&self, old: &Catalog, listed: Vec<Listed>) -> Catalog {
        let mut catalog = Catalog::default();
        let (mut tools_hints, mut prompts_hints) = (Vec::new(), Vec::new());
        for (index, listed) in listed.into_iter().enumerate() {
            if listed.tools.is_some() || old.listed.contains(&index) {
                catalog.listed.insert(index);
            }
            let (tools, hint) = listed.tools.unwrap_or_else(|| {
                (
                    kept(old.tools.values().map(|r| &**r), index),
                    CacheHint::UNKNOWN,
                )
            });
            tools_hints.push(hint);
            for tool in tools {
                let name = tool.name.to_string();
                let exposed = self.exposed_name(index, &name, |n| catalog.tools.contains_key(n));
                let mut item = tool;
                item.name = exposed.clone().into();
                catalog.tools.insert(
                    exposed,
                    Arc::new(Route {
                        upstream: index,
                        name,
                        item,
                    }),
                );
            }
            let (prompts, hint) = listed
                .prompts
                .unwrap_or_else(|| (kept(old.prompts.values(), index), CacheHint::UNKNOWN));
            prompts_hints.push(hint);
            for prompt in prompts {
                let name = prompt.name.clone();
                let exposed = self.exposed_name(index, &name, |n| catalog.prompts.contains_key(n));
                let mut item = prompt;
                item.name = exposed.clone();
                catalog.prompts.insert(
                    exposed,
                    Route {
                        upstream: index,
                        name,
                        item,
                    },
                );
            }
        }
        catalog.tools_hint = CacheHint::merged(tools_hints);
        catalog.prompts_hint = CacheHint::merged(prompts_hints);
        catalog
    }

    fn exposed_name(&self, index: usize, name: &str, taken: impl Fn(&str) -> bool) -> String {
        let config = &self.connections[index].config;
        if let Some(prefix) = &config.prefix {
            return format!("{prefix}{}{name}", self.separator);
        }
        if !taken(name) {
            return name.to_owned();
        }
        let renamed = format!("{}{}{name}", config.name, self.separator);
        tracing::warn!(upstream = %config.name, tool = name, exposed = %renamed,
            "name already taken by an earlier upstream; exposed under a prefix");
        renamed
    }

    /// The tools a client of `era` sees.
    pub async fn tools(&self, era: Era) -> Vec<Route<Tool>> {
        self.tools_with_hint(era).await.0
    }

    /// The tools a client of `era` sees, and how long it may cache their list.
    pub async fn tools_with_hint(&self, era: Era) -> (Vec<Route<Tool>>, CacheHint) {
        let catalogs = self.catalogs.read().await;
        let catalog = catalogs.of(era);
        (
            catalog.tools.values().map(|r| (**r).clone()).collect(),
            catalog.tools_hint,
        )
    }

    /// The prompts a client of `era` sees, and how long it may cache their list.
    pub async fn prompts_with_hint(&self, era: Era) -> (Vec<Route<Prompt>>, CacheHint) {
        let catalogs = self.catalogs.read().await;
        let catalog = catalogs.of(era);
        (
            catalog.prompts.values().cloned().collect(),
            catalog.prompts_hint,
        )
    }

    /// Finds a tool by its exposed name in `era`, listing the upstreams again if it is unknown
    /// (one listing for the misses around it). Not found: the names of the upstreams that could
    /// offer it but have never listed their tools (they were down from the start), empty when
    /// every upstream has listed.
    pub async fn tool(&self, era: Era, exposed: &str) -> Result<Arc<Route<Tool>>, Vec<String>> {
        if let Some(route) = self.catalogs.read().await.of(era).tools.get(exposed) {
            return Ok(route.clone());
        }
        // Boxed: every call awaits this lookup, and only a miss refreshes (a future of kilobytes
        // that the call's own would otherwise carry and copy).
        Box::pin(self.list_again_after_a_miss()).await;
        let catalogs = self.catalogs.read().await;
        let catalog = catalogs.of(era);
        if let Some(route) = catalog.tools.get(exposed) {
            return Ok(route.clone());
        }
        Err(self
            .connections
            .iter()
            .enumerate()
            .filter(|(index, conn)| {
                let could_offer = conn.config.prefix.as_ref().is_none_or(|prefix| {
                    exposed.starts_with(&format!("{prefix}{}", self.separator))
                });
                !catalog.listed.contains(index) && could_offer
            })
            .map(|(_, conn)| conn.name().to_owned())
            .collect())
    }

    pub async fn prompt(&self, era: Era, exposed: &str) -> Option<Route<Prompt>> {
        if let Some(route) = self.catalogs.read().await.of(era).prompts.get(exposed) {
            return Some(route.clone());
        }
        Box::pin(self.list_again_after_a_miss()).await;
        self.catalogs
            .read()
            .await
            .of(era)
            .prompts
            .get(exposed)
            .cloned()
    }

    /// Remembers which upstream listed which resources, for routing reads.
    pub async fn note_resources(&self, index: usize, resources: &[Resource]) {
        let mut catalogs = self.catalogs.write().await;
        for r in resources {
            catalogs.resources.entry(r.uri.clone()).or_insert(index);
        }
    }

    /// The upstreams to ask for a resource: the one that listed it, else all in order.
    pub async fn resource_candidates(&self, uri: &str) -> Vec<usize> {
        match self.catalogs.read().await.resources.get(uri) {
            Some(index) => vec![*index],
            None => (0..self.connections.len()).collect(),
        }
    }
}

/// What `conn` offers in `era`.
async fn list(conn: &Connection, era: Era) -> Listed {
    let never = tokio_util::sync::CancellationToken::new();
    let tools = conn
        .request(era, &never, |peer| async move {
            peer.list_all_tools_with_cache_hint().await
        })
        .await;
    // Only of an upstream that offers prompts (or did not say, as a stateless one does not):
    // asking one that does not gets method-not-found, which rmcp logs as a warning.
    let prompts = conn
        .request(era, &never, |peer| async move {
            let declared = peer
                .peer_info()
                .map(|info| info.capabilities.prompts.is_some());
            if declared == Some(false) {
                return Ok(None);
            }
            peer.list_all_prompts_with_cache_hint().await.map(Some)
        })
        .await;
    if let Err(e) = &tools {
        tracing::warn!(upstream = %conn.name(), ?era, error = %e, "cannot list tools");
    }
    Listed {
        error: tools.as_ref().err().map(|e| match e {
            UpstreamError::Unavailable { reason, .. } => reason.clone(),
            other => other.to_string(),
        }),
        tools: tools.ok().map(|l| {
            let hint = CacheHint::of(&l);
            (l.items, hint)
        }),
        prompts: prompts.ok().flatten().map(|l| {
            let hint = CacheHint::of(&l);
            (l.items, hint)
        }),
    }
}

/// What upstream `index` listed last time, under the names the upstream uses.
fn kept<'a, T: Clone + Renamable + 'a>(
    old: impl Iterator<Item = &'a Route<T>>,
    index: usize,
) -> Vec<T> {
    old.filter(|r| r.upstream == index)
        .map(|r| r.item.clone().renamed(&r.name))
        .collect()
}

trait Renamable {
    fn renamed(self, name: &str) -> Self;
}

impl Renamable for Tool {
    fn renamed(mut self, name: &str) -> Tool {
        self.name = name.to_owned().into();
        self
    }
}

impl Renamable for Prompt {
    fn renamed(mut self, name: &str) -> Prompt {
        self.name = name.to_owned();
        self
    }
}
