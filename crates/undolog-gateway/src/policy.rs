//! Classifying a tool: explicit configuration first, then MCP tool annotations, then the
//! fail-closed default tier. Annotations from an upstream that is not trusted may only make a tool
//! safer to call (`destructiveHint` can make it irreversible; `readOnlyHint` is ignored).

use rmcp::model::Tool;
use undolog_engine::ToolPolicy;
use undolog_types::Tier;

use crate::{
    Gateway,
    config::{GatewayConfig, ToolSettings},
};

/// Where a tool's tier comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TierSource {
    /// `[tools."NAME"] tier`.
    Configuration,
    /// The upstream says `destructiveHint` (taken from any upstream: it only makes a tool safer).
    DestructiveHint,
    /// A trusted upstream says `readOnlyHint`.
    ReadOnlyHint,
    /// Nothing classifies it: `default_tier` (irreversible unless configured: fail closed).
    Default,
}

impl TierSource {
    /// The reason, in words, for a tool of `tier`.
    pub(crate) fn why(self, tier: Tier) -> String {
        match self {
            TierSource::Configuration => format!("the configuration says {tier}"),
            TierSource::DestructiveHint => "its upstream marks it destructive".into(),
            TierSource::ReadOnlyHint => "its trusted upstream marks it read-only".into(),
            TierSource::Default => format!("nothing classifies it: the default tier, {tier}"),
        }
    }
}

pub(crate) fn classify(
    config: &GatewayConfig,
    exposed: &str,
    tool: &Tool,
    trust_annotations: bool,
) -> ToolPolicy {
    explain(config, exposed, tool, trust_annotations).0
}

/// [`classify`], and where the tier comes from.
pub(crate) fn explain(
    config: &GatewayConfig,
    exposed: &str,
    tool: &Tool,
    trust_annotations: bool,
) -> (ToolPolicy, TierSource) {
    let unset = ToolSettings::default();
    let settings = config.tools.get(exposed).unwrap_or(&unset);
    let hints = tool.annotations.as_ref();
    let read_only_hint = hints.and_then(|a| a.read_only_hint).unwrap_or(false);
    let destructive_hint = hints.and_then(|a| a.destructive_hint).unwrap_or(false);
    let idempotent_hint = hints.and_then(|a| a.idempotent_hint).unwrap_or(false);
    let (tier, source) = match settings.tier {
        Some(tier) => (tier, TierSource::Configuration),
        None if destructive_hint => (Tier::Irreversible, TierSource::DestructiveHint),
        None if trust_annotations && read_only_hint => (Tier::ReadOnly, TierSource::ReadOnlyHint),
        None => (config.default_tier, TierSource::Default),
    };
    let policy = ToolPolicy {
        tier,
        // Copied only where it applies: a call of any other tier carries none.
        compensation: match tier {
            Tier::Compensable => settings.compensation.clone(),
            _ => None,
        },
        idempotent: settings
            .idempotent
            .unwrap_or(trust_annotations && idempotent_hint),
        requires_approval: settings.requires_approval.unwrap_or(false),
    };
    (policy, source)
}

impl Gateway {
    /// How the tool `route` reaches is classified, as for any call of it.
    pub(crate) fn classify(
        &self,
        exposed: &str,
        route: &crate::upstream::Route<rmcp::model::Tool>,
    ) -> undolog_engine::ToolPolicy {
        self.explain(exposed, route).0
    }

    /// [`Gateway::classify`], and where the tier comes from.
    pub(crate) fn explain(
        &self,
        exposed: &str,
        route: &crate::upstream::Route<rmcp::model::Tool>,
    ) -> (undolog_engine::ToolPolicy, TierSource) {
        let trusted = self
            .upstreams
            .connection(route.upstream)
            .config
            .trust_annotations;
        explain(&self.config, exposed, &route.item, trusted)
    }

    /// Whether a call of `tool` would wait for a person (irreversible, or requires approval);
    /// a tool no upstream offers is taken to (fail closed).
    pub(crate) async fn waits_for_a_person(&self, tool: &str) -> bool {
        match self
            .upstreams
            .tool(crate::upstream::Era::Session, tool)
            .await
        {
            Ok(route) => self.classify(tool, &route).needs_approval(),
            Err(_) => true,
        }
    }
}
