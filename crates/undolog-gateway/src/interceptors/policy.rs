//! The `policy` built-in: UndoLog's own classification of a tool (tier, whether it waits for a
//! person) as a SEP-2624 validator on `tools/call` requests. It refuses calls to tools of the
//! tiers in `deny`, warns for those in `warn`, can refuse outright what would wait for approval
//! (`approval = "deny"`, for unattended agents that should fail fast rather than wait), and notes
//! the classification in every verdict, so the log says how each call was classified.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use undolog_engine::ToolPolicy;
use undolog_interceptors::{
    Descriptor, Error, Interceptor, InterceptorType, Invocation, Outcome, Phase,
    wire::{Severity, Validation, ValidationMessage},
};
use undolog_types::Tier;

/// The tools' classification as the gateway computed it at start-up.
#[derive(Debug)]
pub(super) struct PolicyValidator {
    descriptor: Descriptor,
    tools: BTreeMap<String, ToolPolicy>,
    /// For tools that appeared after start-up.
    default: ToolPolicy,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyConfig {
    #[serde(default)]
    deny: Vec<Tier>,
    #[serde(default)]
    warn: Vec<Tier>,
    #[serde(default)]
    approval: Option<String>,
}

impl PolicyValidator {
    pub(super) const NAME: &'static str = "undolog/policy";

    pub(super) fn new(tools: BTreeMap<String, ToolPolicy>, default_tier: Tier) -> Self {
        let mut d = Descriptor::new(
            Self::NAME,
            InterceptorType::Validation,
            &["tools/call"],
            &[Phase::Request],
        );
        d.version = Some(env!("CARGO_PKG_VERSION").into());
        d.description = Some(
            "Refuses or flags tools/call requests by the tool's UndoLog tier and approval.".into(),
        );
        let tiers = json!({"type": "array", "items": {"enum": ["read_only", "compensable", "irreversible"]}});
        d.config_schema = Some(json!({
            "type": "object",
            "properties": {
                "deny": tiers,
                "warn": tiers,
                "approval": {"enum": ["hold", "deny"]}
            },
            "additionalProperties": false
        }));
        PolicyValidator {
            descriptor: d,
            tools,
            default: ToolPolicy::new(default_tier),
        }
    }
}

#[async_trait]
impl Interceptor for PolicyValidator {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    async fn invoke(&self, invocation: Invocation) -> Result<Outcome, Error> {
        let config: PolicyConfig = match invocation.config {
            None => PolicyConfig::default(),
            Some(c) => serde_json::from_value(c).map_err(|e| Error::InvalidConfig {
                name: Self::NAME.into(),
                reason: e.to_string(),
            })?,
        };
        let tool = invocation
            .payload
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let policy = self.tools.get(tool).unwrap_or(&self.default);
        let (tier, approval) = (policy.tier, policy.needs_approval());
        let finding = |message: String, severity| ValidationMessage {
            path: Some("/name".into()),
            message,
            severity,
        };
        let mut messages = Vec::new();
        if config.deny.contains(&tier) {
            messages.push(finding(
                format!("`{tool}` is {tier}, a tier this gateway refuses; use another tool"),
                Severity::Error,
            ));
        } else if approval && config.approval.as_deref() == Some("deny") {
            messages.push(finding(
                format!("`{tool}` needs a person's approval, which this gateway does not wait for"),
                Severity::Error,
            ));
        } else if config.warn.contains(&tier) {
            messages.push(finding(format!("`{tool}` is {tier}"), Severity::Warn));
        }
        let blocked = messages.iter().any(|m| m.severity == Severity::Error);
        Ok(Outcome::Validation(Validation {
            valid: !blocked,
            severity: messages.iter().map(|m| m.severity).max_by_key(|s| *s as u8),
            messages,
            info: Some(json!({"tier": tier, "requiresApproval": approval})),
        }))
    }
}
