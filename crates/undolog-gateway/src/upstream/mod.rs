//! The upstream MCP servers, aggregated into one catalog.
//!
//! Tools and prompts of every upstream appear under one list; a name that an earlier upstream
//! already uses is exposed as `UPSTREAM<separator>NAME` (or every name of an upstream gets its
//! configured prefix). Resources keep their URIs and are routed to the upstream that listed them.

mod connection;
mod relay;
mod stream_origin;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use rmcp::model::{Prompt, Resource, Tool};
use tokio::sync::RwLock;

pub(crate) use connection::{Connection, Era, UpstreamError};
pub(crate) use relay::Requester;

use crate::config::UpstreamConfig;

/// Where an exposed name lives upstream.
#[derive(Debug, Clone)]
pub(crate) struct Route<T> {
    pub(crate) upstream: usize,
    /// The name the upstream knows it by.
    pub(crate) name: String,
    /// The item as clients see it, under its exposed name.
    pub(crate) item: T,
}

#[derive(Debug, Default)]
struct Catalog {
    tools: BTreeMap<String, Route<Tool>>,
    prompts: BTreeMap<String, Route<Prompt>>,
    /// Resource URI → upstream.
    resources: BTreeMap<String, usize>,
}

/// Every upstream, and the merged view of what they offer.
#[derive(Debug)]
pub(crate) struct Upstreams {
    connections: Vec<Arc<Connection>>,
    separator: String,
    catalog: RwLock<Catalog>,
}

impl Upstreams {
    /// Connects to every upstream and reads their tools. An upstream that is down is logged and
    /// tried again later; the others serve meanwhile.
    pub(crate) async fn start(
        configs: &[UpstreamConfig],
        separator: &str,
        timeout: Duration,
    ) -> Upstreams {
        let upstreams = Upstreams {
            connections: configs
                .iter()
                .map(|c| Arc::new(Connection::new(c.clone(), timeout)))
                .collect(),
            separator: separator.to_owned(),
            catalog: RwLock::default(),
        };
        upstreams.refresh().await;
        upstreams
    }

    pub(crate) fn connection(&self, index: usize) -> &Arc<Connection> {
        &self.connections[index]
    }

    pub(crate) fn connections(&self) -> &[Arc<Connection>] {
        &self.connections
    }

    /// Reads every upstream's tools and prompts again. An upstream that cannot answer keeps
    /// what it listed before.
    pub(crate) async fn refresh(&self) {
        let never = tokio_util::sync::CancellationToken::new();
        let mut listed = Vec::with_capacity(self.connections.len());
        for conn in &self.connections {
            let tools = conn
                .request(Era::Session, &never, |peer| async move {
                    peer.list_all_tools().await
                })
                .await;
            let prompts = conn
                .request(Era::Session, &never, |peer| async move {
                    peer.list_all_prompts().await
                })
                .await;
            if let Err(e) = &tools {
                tracing::warn!(upstream = %conn.name(), error = %e, "cannot list tools");
            }
            listed.push((tools.ok(), prompts.ok()));
        }
        let mut catalog = self.catalog.write().await;
        let old = std::mem::take(&mut *catalog);
        for (index, (tools, prompts)) in listed.into_iter().enumerate() {
            let tools = tools.unwrap_or_else(|| kept(&old.tools, index));
            for tool in tools {
                let name = tool.name.to_string();
                let exposed = self.exposed_name(index, &name, |n| catalog.tools.contains_key(n));
                let mut item = tool;
                item.name = exposed.clone().into();
                catalog.tools.insert(
                    exposed,
                    Route {
                        upstream: index,
                        name,
                        item,
                    },
                );
            }
            let prompts = prompts.unwrap_or_else(|| kept(&old.prompts, index));
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
        catalog.resources = old.resources;
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

    pub(crate) async fn tools(&self) -> Vec<Route<Tool>> {
        self.catalog.read().await.tools.values().cloned().collect()
    }

    pub(crate) async fn prompts(&self) -> Vec<Route<Prompt>> {
        self.catalog
            .read()
            .await
            .prompts
            .values()
            .cloned()
            .collect()
    }

    /// Finds a tool by its exposed name, listing the upstreams again once if it is unknown.
    pub(crate) async fn tool(&self, exposed: &str) -> Option<Route<Tool>> {
        if let Some(route) = self.catalog.read().await.tools.get(exposed) {
            return Some(route.clone());
        }
        self.refresh().await;
        self.catalog.read().await.tools.get(exposed).cloned()
    }

    pub(crate) async fn prompt(&self, exposed: &str) -> Option<Route<Prompt>> {
        if let Some(route) = self.catalog.read().await.prompts.get(exposed) {
            return Some(route.clone());
        }
        self.refresh().await;
        self.catalog.read().await.prompts.get(exposed).cloned()
    }

    /// Remembers which upstream listed which resources, for routing reads.
    pub(crate) async fn note_resources(&self, index: usize, resources: &[Resource]) {
        let mut catalog = self.catalog.write().await;
        for r in resources {
            catalog.resources.entry(r.uri.clone()).or_insert(index);
        }
    }

    /// The upstreams to ask for a resource: the one that listed it, else all in order.
    pub(crate) async fn resource_candidates(&self, uri: &str) -> Vec<usize> {
        match self.catalog.read().await.resources.get(uri) {
            Some(index) => vec![*index],
            None => (0..self.connections.len()).collect(),
        }
    }
}

/// What upstream `index` listed last time, under the names the upstream uses.
fn kept<T: Clone + Renamable>(old: &BTreeMap<String, Route<T>>, index: usize) -> Vec<T> {
    old.values()
        .filter(|r| r.upstream == index)
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
