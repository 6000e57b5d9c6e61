//! Interceptor configuration, checked against the interceptor's `configSchema`.

use std::sync::Arc;

use serde_json::Value;

use crate::descriptor::Descriptor;
use crate::error::Error;

/// A compiled `configSchema`. Remote `$ref`s are not fetched: a schema must be self-contained.
#[derive(Debug, Clone)]
pub struct ConfigSchema {
    name: String,
    validator: Option<Arc<jsonschema::Validator>>,
}

impl ConfigSchema {
    /// Compile the descriptor's schema (an interceptor without one accepts any config).
    pub fn compile(descriptor: &Descriptor) -> Result<Self, Error> {
        let validator = match &descriptor.config_schema {
            None => None,
            Some(schema) => Some(Arc::new(jsonschema::validator_for(schema).map_err(
                |e| Error::InvalidConfigSchema {
                    name: descriptor.name.clone(),
                    reason: e.to_string(),
                },
            )?)),
        };
        Ok(ConfigSchema {
            name: descriptor.name.clone(),
            validator,
        })
    }

    /// Check a config; every violation is listed with where it is.
    pub fn check(&self, config: Option<&Value>) -> Result<(), Error> {
        let (Some(validator), Some(config)) = (&self.validator, config) else {
            return Ok(());
        };
        let problems: Vec<String> = validator
            .iter_errors(config)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidConfig {
                name: self.name.clone(),
                reason: problems.join("; "),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::{InterceptorType, Phase};
    use serde_json::json;

    #[test]
    fn config_is_checked_against_the_schema() {
        let mut d = Descriptor::new("c", InterceptorType::Validation, &["*"], &[Phase::Request]);
        d.config_schema = Some(json!({
            "type": "object",
            "properties": {"limit": {"type": "integer", "minimum": 1}},
            "required": ["limit"],
            "additionalProperties": false
        }));
        let schema = ConfigSchema::compile(&d).unwrap();
        assert!(schema.check(Some(&json!({"limit": 3}))).is_ok());
        assert!(schema.check(None).is_ok());
        let err = schema
            .check(Some(&json!({"limit": 0, "extra": true})))
            .unwrap_err();
        assert_eq!(err.code(), crate::error::INVALID_PARAMS);
        assert!(err.to_string().contains("/limit"), "{err}");
        d.config_schema = Some(json!({"type": 12}));
        assert!(matches!(
            ConfigSchema::compile(&d),
            Err(Error::InvalidConfigSchema { .. })
        ));
    }
}
