//! Undo through the upstreams: each compensation is the configured tool, called with its argument
//! template filled from the original call.
//!
//! A compensation is a call like any other as far as safety goes: the tool is classified as it
//! is for an agent's call, and one that would wait for a person (irreversible, or
//! `requires_approval`) is refused, since nobody approves an undo step; and the arguments and the
//! result pass the interceptor chain, so a guard or redactor sees them. Only what the
//! configuration declares reaches here: SDK effects may name no other upstream tool.

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use undolog_engine::{Compensated, CompensationFailure, Compensator};
use undolog_store::{Compensation, Effect};
use undolog_types::Args;

use crate::{
    Gateway,
    config::Template,
    interceptors::{self, RequestVerdict, ResponseVerdict},
    results,
    upstream::Era,
};

/// Runs compensations by calling upstream tools directly (a compensation is a step of the undo,
/// recorded by the saga, not a new effect).
#[derive(Debug)]
pub(crate) struct UpstreamCompensator<'g> {
    pub(crate) gateway: &'g Gateway,
}

#[async_trait]
impl Compensator for UpstreamCompensator<'_> {
    /// Everything refused before the tool is sent, and a tool's own error answer, did not run;
    /// a call sent whose answer was lost, one that became a task, and one whose result the
    /// interceptors refused may have.
    async fn compensate(&self, effect: &Effect) -> Result<Compensated, CompensationFailure> {
        use CompensationFailure::{MayHaveRun, NotRun};
        let (params, context, upstream) = self.prepared(effect).await.map_err(NotRun)?;
        let conn = self.gateway.upstreams.connection(upstream);
        let answer = conn
            .request(Era::Session, &CancellationToken::new(), |peer| async move {
                peer.call_tool_once(params).await
            })
            .await
            .map_err(|e| match e.may_have_run() {
                true => MayHaveRun(e.to_string()),
                false => NotRun(e.to_string()),
            })?;
        let CallToolResponse::Complete(result) = answer else {
            return Err(MayHaveRun(
                "the compensating tool answered with a task, not a result: it may still run".into(),
            ));
        };
        let result = results::stored(&result);
        let gateway = self.gateway;
        let result = match gateway.interceptors.tool_response(&result, &context).await {
            None => result,
            Some(ResponseVerdict::Pass { result, .. }) => result,
            Some(ResponseVerdict::Blocked { error, .. }) => {
                return Err(MayHaveRun(format!(
                    "the compensation ran, and the interceptor chain refused its result: {}",
                    error.message
                )));
            }
        };
        match results::tool_error(&result) {
            Some(error) => Err(NotRun(error)),
            None => Ok(Compensated::Done { result }),
        }
    }
}

impl UpstreamCompensator<'_> {
    /// The compensation's request, checked as an agent's call would be, and the upstream it goes
    /// to; why not, when it cannot be sent.
    async fn prepared(
        &self,
        effect: &Effect,
    ) -> Result<
        (
            CallToolRequestParams,
            undolog_interceptors::InvocationContext,
            usize,
        ),
        String,
    > {
        let (tool, template) = match &effect.compensation {
            Some(Compensation::Upstream { tool, args }) => (tool, args),
            Some(Compensation::Local { function }) => {
                return Err(format!(
                    "{} was recorded by an SDK whose compensation {function} runs in the agent's \
                     process; undo this session there (the Python SDK's session.undo())",
                    effect.tool
                ));
            }
            None => {
                return Err(format!(
                    "{} has no compensation configured; undo it by hand",
                    effect.tool
                ));
            }
        };
        let args = Template::render(
            template,
            &Value::Object(effect.args.as_map().clone()),
            &results::template_view(effect.result.as_ref()),
        )?;
        let args = Args::try_from(args)
            .map_err(|e| format!("the compensation template must produce usable arguments: {e}"))?;
        let gateway = self.gateway;
        let route = gateway
            .upstreams
            .tool(Era::Session, tool)
            .await
            .map_err(|unlisted| match unlisted.is_empty() {
                true => format!("no upstream offers the compensating tool {tool:?}"),
                false => format!(
                    "the compensating tool {tool:?} is not known yet: upstream {} is unavailable",
                    unlisted.join(", ")
                ),
            })?;
        if gateway.classify(tool, &route).needs_approval() {
            return Err(format!(
                "the compensating tool {tool:?} waits for a person's approval (it is irreversible \
                 or requires approval), and an undo step runs unapproved; classify it with \
                 [tools.{tool}] tier = \"compensable\", or undo {} by hand",
                effect.tool
            ));
        }
        let context = interceptors::context(&effect.org, &effect.session, None);
        let args = match gateway
            .interceptors
            .tool_request(tool, &args, &context)
            .await
        {
            RequestVerdict::Pass { args, .. } => args,
            RequestVerdict::Blocked { error, .. } => {
                return Err(format!(
                    "the interceptor chain refused the compensation: {}",
                    error.message
                ));
            }
        };
        let mut params = CallToolRequestParams::new(route.name.clone());
        params.arguments = Some(args.as_map().clone());
        Ok((params, context, route.upstream))
    }
}
