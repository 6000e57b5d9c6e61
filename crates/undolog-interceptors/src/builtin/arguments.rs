//! Argument validation: a validator that checks `tools/call` arguments against the tool's
//! `inputSchema` before the call leaves.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::descriptor::{Descriptor, InterceptorType, Phase};
use crate::error::Error;
use crate::interceptor::{Interceptor, Invocation};
use crate::wire::{Outcome, Severity, Validation, ValidationMessage};

/// Checks the `arguments` of a `tools/call` request against the `inputSchema` the tool declared
/// (as `tools/list` returned it). Calls to tools it has no schema for pass with an `info` note.
#[derive(Debug)]
pub struct ArgumentValidator {
    descriptor: Descriptor,
    schemas: HashMap<String, jsonschema::Validator>,
}

impl ArgumentValidator {
    /// Name of the default descriptor.
    pub const NAME: &'static str = "undolog/argument-validator";

    /// Compile one validator per tool; a schema that does not compile is refused with its tool.
    pub fn new(input_schemas: BTreeMap<String, Value>) -> Result<Self, Error> {
        let mut d = Descriptor::new(
            Self::NAME,
            InterceptorType::Validation,
            &["tools/call"],
            &[Phase::Request],
        );
        d.version = Some(env!("CARGO_PKG_VERSION").into());
        d.description = Some("Checks tools/call arguments against the tool's inputSchema.".into());
        let mut schemas = HashMap::new();
        for (tool, schema) in input_schemas {
            let validator =
                jsonschema::validator_for(&schema).map_err(|e| Error::InvalidConfigSchema {
                    name: format!("{} (inputSchema of tool `{tool}`)", Self::NAME),
                    reason: e.to_string(),
                })?;
            schemas.insert(tool, validator);
        }
        Ok(ArgumentValidator {
            descriptor: d,
            schemas,
        })
    }
}

#[async_trait]
impl Interceptor for ArgumentValidator {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    async fn invoke(&self, inv: Invocation) -> Result<Outcome, Error> {
        let Some(tool) = inv.payload.get("name").and_then(Value::as_str) else {
            return Ok(Outcome::Validation(Validation::deny(
                "tools/call without a tool name",
            )));
        };
        let Some(validator) = self.schemas.get(tool) else {
            let mut v = Validation::pass();
            v.info =
                Some(json!({ "checked": false, "reason": "no inputSchema known for this tool" }));
            return Ok(Outcome::Validation(v));
        };
        let empty = json!({});
        let arguments = inv.payload.get("arguments").unwrap_or(&empty);
        let messages: Vec<ValidationMessage> = validator
            .iter_errors(arguments)
            .map(|e| ValidationMessage {
                path: Some(format!("/arguments{}", e.instance_path())),
                message: e.to_string(),
                severity: Severity::Error,
            })
            .collect();
        Ok(Outcome::Validation(if messages.is_empty() {
            Validation::pass()
        } else {
            Validation {
                valid: false,
                severity: Some(Severity::Error),
                messages,
                info: None,
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn arguments_are_checked_against_the_input_schema() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let v = ArgumentValidator::new(BTreeMap::from([("count".to_string(), schema)])).unwrap();
        let run = |payload: Value| {
            v.invoke(Invocation {
                event: "tools/call".into(),
                phase: Phase::Request,
                payload,
                config: None,
                context: None,
            })
        };
        let Outcome::Validation(ok) = run(json!({"name": "count", "arguments": {"n": 2}}))
            .await
            .unwrap()
        else {
            panic!("validator answered a mutation")
        };
        assert!(ok.valid);
        let Outcome::Validation(bad) = run(json!({"name": "count", "arguments": {"n": "two"}}))
            .await
            .unwrap()
        else {
            panic!("validator answered a mutation")
        };
        assert!(bad.blocks());
        assert_eq!(bad.messages[0].path.as_deref(), Some("/arguments/n"));
        let Outcome::Validation(unknown) = run(json!({"name": "other"})).await.unwrap() else {
            panic!("validator answered a mutation")
        };
        assert!(unknown.valid);
    }
}
