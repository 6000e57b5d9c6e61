//! The interceptor descriptor: what `interceptors/list` returns for each interceptor.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

pub use crate::event::Phase;
use crate::event::event_matches;

/// What an interceptor does: check a payload, or transform it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InterceptorType {
    Validation,
    Mutation,
}

impl InterceptorType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            InterceptorType::Validation => "validation",
            InterceptorType::Mutation => "mutation",
        }
    }
}

/// `active` interceptors take effect; `audit` ones are run and recorded but never block and never
/// change the payload. The older name `enforce` is accepted and read as `active`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    #[serde(alias = "enforce")]
    Active,
    Audit,
}

impl Mode {
    fn is_active(&self) -> bool {
        *self == Mode::Active
    }
}

/// One hook: the events (names, `*`, or globs such as `tools/*`) intercepted in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    pub events: Vec<String>,
    pub phase: Phase,
}

/// Ordering among mutators: lower runs first. Either one number for both phases or one per phase.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PriorityHint {
    Both(f64),
    PerPhase {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response: Option<f64>,
    },
}

impl PriorityHint {
    /// The priority in one phase; an unset phase is 0.
    pub fn resolve(&self, phase: Phase) -> f64 {
        match (self, phase) {
            (PriorityHint::Both(p), _) => *p,
            (PriorityHint::PerPhase { request, .. }, Phase::Request) => request.unwrap_or(0.0),
            (PriorityHint::PerPhase { response, .. }, Phase::Response) => response.unwrap_or(0.0),
        }
    }
}

/// The protocol versions an interceptor works with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compat {
    pub min_protocol_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_protocol_version: Option<String>,
}

/// An interceptor's self-description, in SEP-2624 wire shape (defaults omitted when serialized).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub kind: InterceptorType,
    pub hooks: Vec<Hook>,
    #[serde(default, skip_serializing_if = "Mode::is_active")]
    pub mode: Mode,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_open: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_hint: Option<PriorityHint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<Compat>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "some_value"
    )]
    pub config_schema: Option<Value>,
    /// How long one invocation may take, in milliseconds (the chain's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

fn some_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Descriptor {
    /// A descriptor with the given events hooked in the given phases; everything else default.
    pub fn new(
        name: impl Into<String>,
        kind: InterceptorType,
        events: &[&str],
        phases: &[Phase],
    ) -> Self {
        let events: Vec<String> = events.iter().map(|e| e.to_string()).collect();
        Descriptor {
            name: name.into(),
            version: None,
            description: None,
            kind,
            hooks: phases
                .iter()
                .map(|&phase| Hook {
                    events: events.clone(),
                    phase,
                })
                .collect(),
            mode: Mode::Active,
            fail_open: false,
            priority_hint: None,
            compat: None,
            config_schema: None,
            timeout_ms: None,
        }
    }

    /// Whether any hook intercepts `event` in `phase`.
    pub fn intercepts(&self, event: &str, phase: Phase) -> bool {
        self.hooks
            .iter()
            .any(|h| h.phase == phase && h.events.iter().any(|p| event_matches(p, event)))
    }

    /// Whether any hook intercepts `event` in any phase.
    pub fn hooks_event(&self, event: &str) -> bool {
        self.hooks
            .iter()
            .any(|h| h.events.iter().any(|p| event_matches(p, event)))
    }

    /// The mutator ordering key in `phase` (0 when no hint is given).
    pub fn priority(&self, phase: Phase) -> f64 {
        self.priority_hint.map_or(0.0, |p| p.resolve(phase))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_legacy_enforce_and_both_priority_shapes() {
        let d: Descriptor = serde_json::from_value(json!({
            "name": "x", "type": "mutation", "mode": "enforce",
            "hooks": [{"events": ["tools/*"], "phase": "request"}],
            "priorityHint": {"request": -5}
        }))
        .unwrap();
        assert_eq!(d.mode, Mode::Active);
        assert_eq!(d.priority(Phase::Request), -5.0);
        assert_eq!(d.priority(Phase::Response), 0.0);
        assert!(d.intercepts("tools/call", Phase::Request));
        assert!(!d.intercepts("tools/call", Phase::Response));
        let d: Descriptor = serde_json::from_value(json!({
            "name": "y", "type": "validation", "hooks": [], "priorityHint": 3
        }))
        .unwrap();
        assert_eq!(d.priority(Phase::Response), 3.0);
        assert_eq!(
            serde_json::to_value(&d).unwrap()["priorityHint"],
            json!(3.0)
        );
    }

    #[test]
    fn defaults_are_omitted_on_the_wire() {
        let d = Descriptor::new("a", InterceptorType::Validation, &["*"], &[Phase::Request]);
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"name": "a", "type": "validation", "hooks": [{"events": ["*"], "phase": "request"}]})
        );
    }
}
