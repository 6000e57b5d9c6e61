//! The chain on requests an upstream sends to the client through the gateway
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`): the gateway *sends* the request
//! to the client (mutate, then validate) and *receives* its answer (validate, then mutate). A
//! blocked request or answer goes back to the upstream as the chain's JSON-RPC error.

use rmcp::ErrorData;
use serde::{Serialize, de::DeserializeOwned};
use undolog_interceptors::{ChainRequest, Phase};

use super::Interceptors;

impl Interceptors {
    /// Runs one relayed message through the chain; the value the chain let through, typed again.
    pub(crate) async fn relayed<T: Serialize + DeserializeOwned>(
        &self,
        event: &str,
        phase: Phase,
        value: T,
    ) -> Result<T, ErrorData> {
        let payload = serde_json::to_value(&value).map_err(|e| {
            ErrorData::internal_error(format!("cannot intercept {event}: {e}"), None)
        })?;
        let Some(record) = self.run(ChainRequest::new(event, phase, payload)).await else {
            return Ok(value);
        };
        if let Some(error) = record.to_error() {
            tracing::info!(event, ?phase, error = %error.message, "interceptors blocked a relayed message");
            return Err(error);
        }
        let payload = record.final_payload.unwrap_or_default();
        serde_json::from_value(payload).map_err(|e| {
            ErrorData::internal_error(
                format!("{event} blocked by interceptors: a mutator made it unreadable ({e}); fix the mutator"),
                None,
            )
        })
    }
}
