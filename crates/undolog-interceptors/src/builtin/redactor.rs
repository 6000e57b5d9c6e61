//! The secret redactor: a mutator that replaces verbatim credentials in a payload.

use async_trait::async_trait;
use serde_json::json;

use super::secrets;
use crate::descriptor::{Descriptor, InterceptorType, Phase};
use crate::error::Error;
use crate::interceptor::{Interceptor, Invocation};
use crate::wire::{Mutation, Outcome};

/// Replaces every recognised credential in any string or key of the payload with
/// `[redacted:<format>]`.
#[derive(Debug, Clone)]
pub struct SecretRedactor {
    descriptor: Descriptor,
}

impl SecretRedactor {
    /// Name of the default descriptor.
    pub const NAME: &'static str = "undolog/secret-redactor";

    /// The redactor on outgoing `tools/call` requests.
    pub fn new() -> Self {
        let mut d = Descriptor::new(
            Self::NAME,
            InterceptorType::Mutation,
            &["tools/call"],
            &[Phase::Request],
        );
        d.version = Some(env!("CARGO_PKG_VERSION").into());
        d.description =
            Some("Replaces verbatim credentials in outgoing payloads with a handle.".into());
        SecretRedactor { descriptor: d }
    }

    /// The redactor under another descriptor (name, hooks, mode); the type must be `mutation`.
    pub fn with_descriptor(descriptor: Descriptor) -> Self {
        SecretRedactor {
            descriptor: Descriptor {
                kind: InterceptorType::Mutation,
                ..descriptor
            },
        }
    }
}

impl Default for SecretRedactor {
    fn default() -> Self {
        SecretRedactor::new()
    }
}

#[async_trait]
impl Interceptor for SecretRedactor {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    async fn invoke(&self, invocation: Invocation) -> Result<Outcome, Error> {
        let mut payload = invocation.payload;
        let redacted = secrets::redact_value(&mut payload);
        let mut mutation = if redacted > 0 {
            Mutation::changed(payload)
        } else {
            Mutation::unchanged(payload)
        };
        mutation.info = Some(json!({ "redacted": redacted }));
        Ok(Outcome::Mutation(mutation))
    }
}
