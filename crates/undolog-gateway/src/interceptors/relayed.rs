//! The chain on requests an upstream sends to the client through the gateway
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`): the gateway *sends* the request
//! to the client (mutate, then validate) and *receives* its answer (validate, then mutate). A
//! blocked request or answer goes back to the upstream as the chain's JSON-RPC error.

use rmcp::ErrorData;
use serde_json::Value;
use undolog_interceptors::{ChainRequest, Phase};

use super::Interceptors;
use crate::upstream::{Answer, RelayChain};

impl RelayChain for Interceptors {
    fn relayed<'a>(
        &'a self,
        event: &'a str,
        phase: Phase,
        payload: Value,
    ) -> Answer<'a, Result<Value, ErrorData>> {
        Box::pin(self.relayed_value(event, phase, payload))
    }
}

impl Interceptors {
    /// Runs one relayed message through the chain: the payload it let through.
    async fn relayed_value(
        &self,
        event: &str,
        phase: Phase,
        payload: Value,
    ) -> Result<Value, ErrorData> {
        let Some(record) = self
            .run(ChainRequest::new(event, phase, payload.clone()))
            .await
        else {
            return Ok(payload);
        };
        if let Some(error) = record.to_error() {
            tracing::info!(event, ?phase, error = %error.message, "interceptors blocked a relayed message");
            return Err(error);
        }
        Ok(record.final_payload.unwrap_or_default())
    }
}
