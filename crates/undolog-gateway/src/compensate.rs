//! Undo through the upstreams: each compensation is the configured tool, called with its argument
//! template filled from the original call.

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use tokio_util::sync::CancellationToken;
use undolog_engine::{Compensated, Compensator};
use undolog_store::Effect;

use crate::{Gateway, results, template::Template, upstream::Era};

/// How an SDK names a compensation that is a function in its own process, not an upstream tool.
const SDK_PREFIX: &str = "sdk:";

/// Runs compensations by calling upstream tools directly (a compensation is a step of the undo,
/// recorded by the saga, not a new effect).
#[derive(Debug)]
pub(crate) struct UpstreamCompensator<'g> {
    pub(crate) gateway: &'g Gateway,
}

#[async_trait]
impl Compensator for UpstreamCompensator<'_> {
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, String> {
        let compensation = effect.compensation.as_ref().ok_or_else(|| {
            format!(
                "{} has no compensation configured; undo it by hand",
                effect.tool
            )
        })?;
        if let Some(function) = compensation.tool.strip_prefix(SDK_PREFIX) {
            return Err(format!(
                "{} was recorded by an SDK whose compensation {function} runs in the agent's \
                 process; undo this session there (the Python SDK's session.undo())",
                effect.tool
            ));
        }
        let args = Template::render(
            &compensation.args,
            &serde_json::Value::Object(effect.args.as_map().clone()),
            &results::template_view(effect.result.as_ref()),
        )?;
        let serde_json::Value::Object(args) = args else {
            return Err("the compensation template must produce a JSON object".into());
        };
        let route = self
            .gateway
            .upstreams
            .tool(&compensation.tool)
            .await
            .ok_or_else(|| {
                format!(
                    "no upstream offers the compensating tool {:?}",
                    compensation.tool
                )
            })?;
        let conn = self.gateway.upstreams.connection(route.upstream);
        let mut params = CallToolRequestParams::new(route.name.clone());
        params.arguments = Some(args);
        let answer = conn
            .request(Era::Session, &CancellationToken::new(), |peer| async move {
                peer.call_tool_once(params).await
            })
            .await
            .map_err(|e| e.to_string())?;
        let CallToolResponse::Complete(result) = answer else {
            return Err("the compensating tool did not return a plain result".into());
        };
        let result = results::stored(&result);
        match results::tool_error(&result) {
            Some(error) => Err(error),
            None => Ok(Compensated::Done { result }),
        }
    }
}
