//! Wire types of `interceptors/list` and `interceptor/invoke` (SEP-2624), with flat results.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::descriptor::{Descriptor, InterceptorType, Phase};

/// JSON-RPC method that lists an interceptor server's interceptors.
pub const METHOD_LIST: &str = "interceptors/list";
/// JSON-RPC method that invokes one interceptor.
pub const METHOD_INVOKE: &str = "interceptor/invoke";
/// Key of the capability under `capabilities.extensions`.
pub const EXTENSION_ID: &str = "io.modelcontextprotocol/interceptors";

/// `interceptors/list` params: optional filters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    /// Only interceptors that hook this event (through a name, `*` or a glob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// Only interceptors with a hook in this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
}

/// `interceptors/list` result, in registration order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListResult {
    pub interceptors: Vec<Descriptor>,
}

/// Who is acting, as the host knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Value>,
}

/// Where an invocation comes from: passed to interceptors, never interpreted by the chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvocationContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// RFC 3339 time at which the intercepted message was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// `interceptor/invoke` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvokeParams {
    pub name: String,
    pub event: String,
    pub phase: Phase,
    pub payload: Value,
    /// Interceptor configuration; validated against the descriptor's `configSchema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<InvocationContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// How serious a validation finding is; only `error` blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warn,
    Error,
}

/// One finding of a validator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationMessage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub message: String,
    pub severity: Severity,
}

/// What a validator decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub valid: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<ValidationMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<Value>,
}

impl Validation {
    /// A passing result with no findings.
    pub fn pass() -> Self {
        Validation {
            valid: true,
            severity: None,
            messages: Vec::new(),
            info: None,
        }
    }

    /// A failing result with one message of severity `error`.
    pub fn deny(message: impl Into<String>) -> Self {
        Validation {
            valid: false,
            severity: Some(Severity::Error),
            messages: vec![ValidationMessage {
                path: None,
                message: message.into(),
                severity: Severity::Error,
            }],
            info: None,
        }
    }

    /// Whether this result blocks an active chain: invalid with severity `error` (an invalid result
    /// that states no severity is read as `error`, so a terse validator fails closed).
    pub fn blocks(&self) -> bool {
        !self.valid && self.severity.unwrap_or(Severity::Error) == Severity::Error
    }
}

/// What a mutator produced. `payload` is the whole payload, changed or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mutation {
    pub modified: bool,
    pub payload: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<Value>,
}

impl Mutation {
    /// The payload passed through untouched.
    pub fn unchanged(payload: Value) -> Self {
        Mutation {
            modified: false,
            payload,
            info: None,
        }
    }

    /// A new payload.
    pub fn changed(payload: Value) -> Self {
        Mutation {
            modified: true,
            payload,
            info: None,
        }
    }
}

/// An interceptor's answer, before the wire adds who and when.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Validation(Validation),
    Mutation(Mutation),
}

impl Outcome {
    /// The type of interceptor that produces this outcome.
    pub fn kind(&self) -> InterceptorType {
        match self {
            Outcome::Validation(_) => InterceptorType::Validation,
            Outcome::Mutation(_) => InterceptorType::Mutation,
        }
    }
}

/// `interceptor/invoke` result: flat, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum InvokeResult {
    #[serde(rename_all = "camelCase")]
    Validation {
        interceptor: String,
        phase: Phase,
        #[serde(flatten)]
        validation: Validation,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    #[serde(rename_all = "camelCase")]
    Mutation {
        interceptor: String,
        phase: Phase,
        #[serde(flatten)]
        mutation: Mutation,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
}

impl InvokeResult {
    /// Wrap an outcome with the interceptor's name, the phase and the time it took.
    pub fn new(
        interceptor: &str,
        phase: Phase,
        outcome: Outcome,
        duration_ms: Option<u64>,
    ) -> Self {
        let interceptor = interceptor.to_string();
        match outcome {
            Outcome::Validation(validation) => InvokeResult::Validation {
                interceptor,
                phase,
                validation,
                duration_ms,
            },
            Outcome::Mutation(mutation) => InvokeResult::Mutation {
                interceptor,
                phase,
                mutation,
                duration_ms,
            },
        }
    }

    /// The outcome without the envelope.
    pub fn into_outcome(self) -> Outcome {
        match self {
            InvokeResult::Validation { validation, .. } => Outcome::Validation(validation),
            InvokeResult::Mutation { mutation, .. } => Outcome::Mutation(mutation),
        }
    }

    /// The outcome of a remote invocation, once the answer is checked to be for the interceptor
    /// and phase that were asked.
    pub fn answering(self, asked: &InvokeParams) -> Result<Outcome, crate::Error> {
        let (name, phase) = match &self {
            InvokeResult::Validation {
                interceptor, phase, ..
            }
            | InvokeResult::Mutation {
                interceptor, phase, ..
            } => (interceptor, *phase),
        };
        if name != &asked.name || phase != asked.phase {
            return Err(crate::Error::MalformedResult {
                method: METHOD_INVOKE,
                reason: format!(
                    "asked {} in {:?}, answered {name} in {phase:?}",
                    asked.name, asked.phase
                ),
            });
        }
        Ok(self.into_outcome())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_are_flat_and_round_trip() {
        let r = InvokeResult::new(
            "a",
            Phase::Request,
            Outcome::Validation(Validation::deny("no")),
            Some(3),
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            json!({"interceptor": "a", "type": "validation", "phase": "request", "valid": false,
                   "severity": "error", "messages": [{"message": "no", "severity": "error"}],
                   "durationMs": 3})
        );
        assert_eq!(serde_json::from_value::<InvokeResult>(v).unwrap(), r);
        let m = InvokeResult::new(
            "m",
            Phase::Response,
            Outcome::Mutation(Mutation::changed(json!({"x": 1.5}))),
            None,
        );
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({"interceptor": "m", "type": "mutation", "phase": "response", "modified": true, "payload": {"x": 1.5}})
        );
        assert_eq!(serde_json::from_value::<InvokeResult>(v).unwrap(), m);
    }
}
