//! One `tools/call` as MCP answers it, for the MCP server's handler and the stateless path.

use super::*;

/// One `tools/call` as an MCP client sent it, answered as MCP answers it: the MCP server's
/// handler and the stateless path ([`crate::http::stateless`]) share it. `named` says what the
/// request names of its session but its `_meta`, which is the request's own (else
/// `context_meta`, where the transport put it).
pub(crate) async fn answer_tool_call(
    gateway: &Arc<Gateway>,
    principal: Principal,
    request: CallToolRequestParams,
    context_meta: &RequestMetaObject,
    named: Named<'_>,
    caller: &Caller,
) -> Result<CallToolResponse, ErrorData> {
    let meta = request.meta.as_ref().unwrap_or(context_meta);
    let named = Named {
        meta: Some(meta),
        ..named
    };
    let session = CallSession::of(&principal, named)?;
    let (idempotency_key, step) = runs::fresh_run_of(Some(meta))?;
    let wait = runs::wait_of(Some(meta))?;
    let args = Args::try_from(Value::Object(request.arguments.unwrap_or_default()))
        .map_err(|e| ErrorData::invalid_params(format!("arguments: {e}"), None))?;
    let call = ToolCall {
        caller: principal.actor(),
        presented: principal.presented.clone(),
        org: principal.org,
        session,
        tool: request.name.to_string(),
        args,
        idempotency_key,
        step,
        meta: forwarded_meta(meta),
        round: InputRound::of(request.input_responses, request.request_state),
        wait,
    };
    let outcome = gateway
        .call_tool(call, caller)
        .await
        .map_err(|e| e.to_jsonrpc())?;
    if let Outcome::Refused { error, .. } = outcome {
        return Err(error);
    }
    Ok(results::to_mcp_response(&outcome))
}
