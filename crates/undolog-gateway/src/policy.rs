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

pub(crate) fn classify(
    config: &GatewayConfig,
    exposed: &str,
    tool: &Tool,
    trust_annotations: bool,
) -> ToolPolicy {
    let settings = config.tools.get(exposed).cloned().unwrap_or_default();
    let hints = tool.annotations.as_ref();
    let read_only_hint = hints.and_then(|a| a.read_only_hint).unwrap_or(false);
    let destructive_hint = hints.and_then(|a| a.destructive_hint).unwrap_or(false);
    let idempotent_hint = hints.and_then(|a| a.idempotent_hint).unwrap_or(false);
    let tier = settings.tier.unwrap_or(if destructive_hint {
        Tier::Irreversible
    } else if trust_annotations && read_only_hint {
        Tier::ReadOnly
    } else {
        config.default_tier
    });
    let ToolSettings {
        requires_approval,
        idempotent,
        compensation,
        ..
    } = settings;
    ToolPolicy {
        tier,
        compensation: compensation.filter(|_| tier == Tier::Compensable),
        idempotent: idempotent.unwrap_or(trust_annotations && idempotent_hint),
        requires_approval: requires_approval.unwrap_or(false),
    }
}

impl Gateway {
    /// How the tool `route` reaches is classified, as for any call of it.
    pub(crate) fn classify(
        &self,
        exposed: &str,
        route: &crate::upstream::Route<rmcp::model::Tool>,
    ) -> undolog_engine::ToolPolicy {
        let trusted = self
            .upstreams
            .connection(route.upstream)
            .config
            .trust_annotations;
        classify(&self.config, exposed, &route.item, trusted)
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
