//! The chain on `tools/call`. The client's request is received by the gateway (validate, then
//! mutate); what the upstream receives, what is signed and what is recorded are the arguments
//! after mutation. The upstream's result goes through the response phase before the client sees
//! it; the log keeps what the upstream answered as the effect's result, and every chain verdict
//! in the effect's own `verdicts` record.

use std::{future::Future, pin::Pin};

use futures::future::{Either, Ready, ready};
use rmcp::{
    ErrorData,
    model::{ErrorCode, RequestMetaObject},
};
use serde_json::{Map, Value, json};
use undolog_interceptors::{
    ChainExecutionResult, ChainRequest, Direction, InvocationContext, Phase, wire::Principal,
};
use undolog_types::{Args, OrgId, SessionId};

use super::Interceptors;

const EVENT: &str = "tools/call";

/// A phase's verdict: ready when no interceptor runs on it, else the chain's run.
pub(crate) type Phased<'a, T> = Either<Ready<T>, Pin<Box<dyn Future<Output = T> + Send + 'a>>>;

/// What the request phase decided.
#[derive(Debug)]
pub(crate) enum RequestVerdict {
    /// Go on with these arguments (mutated or not); `record` is the chain's result when it ran.
    Pass {
        args: Args,
        record: Option<ChainExecutionResult>,
    },
    /// Refused: answer `error`; `record` goes into the rejected effect.
    Blocked { error: ErrorData, record: Value },
}

/// What the response phase decided.
#[derive(Debug)]
pub(crate) enum ResponseVerdict {
    /// Answer with this result; `record` is the chain's result when it ran.
    Pass {
        result: Value,
        record: Option<ChainExecutionResult>,
    },
    /// Withhold the result and answer `error`.
    Blocked {
        error: ErrorData,
        record: ChainExecutionResult,
    },
}

/// Who and where, for every interceptor of one call: the org, the UndoLog session, and the trace
/// and span ids of a W3C `traceparent` in the request's `_meta`, when the client sent one.
pub(crate) fn context(
    org: &OrgId,
    session: &SessionId,
    meta: Option<&RequestMetaObject>,
) -> InvocationContext {
    let traceparent = meta
        .and_then(|m| m.get("traceparent"))
        .and_then(Value::as_str);
    // version-traceid-spanid-flags, as in `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`.
    let (trace_id, span_id) = match traceparent.map(|t| t.split('-').collect::<Vec<_>>()) {
        Some(parts) if parts.len() == 4 && parts[1].len() == 32 && parts[2].len() == 16 => {
            (Some(parts[1].to_owned()), Some(parts[2].to_owned()))
        }
        _ => (None, None),
    };
    InvocationContext {
        principal: Some(Principal {
            kind: "org".into(),
            id: org.to_string(),
            claims: None,
        }),
        session_id: Some(session.to_string()),
        trace_id,
        span_id,
        timestamp: None,
    }
}

impl Interceptors {
    /// A phase's verdict: `pass` at once when no interceptor of the chain looks at `tools/call`
    /// in `phase`, and nothing is built for a chain; otherwise the chain's run, boxed, so that
    /// the call's own future stays small (it is moved whole at every await that makes it).
    fn phase<'a, T, F>(
        &self,
        phase: Phase,
        pass: impl FnOnce() -> T,
        chain: impl FnOnce() -> F,
    ) -> Phased<'a, T>
    where
        F: Future<Output = T> + Send + 'a,
    {
        match self.chain.intercepts(EVENT, phase) {
            false => Either::Left(ready(pass())),
            true => Either::Right(Box::pin(chain())),
        }
    }

    /// The request phase of a `tools/call` (received from the client: validate, then mutate).
    pub(crate) fn tool_request<'a>(
        &'a self,
        tool: &'a str,
        args: &'a Args,
        context: &'a InvocationContext,
    ) -> Phased<'a, RequestVerdict> {
        let pass = || RequestVerdict::Pass {
            args: args.clone(),
            record: None,
        };
        self.phase(Phase::Request, pass, || {
            self.chain_request(tool, args, context)
        })
    }

    async fn chain_request(
        &self,
        tool: &str,
        args: &Args,
        context: &InvocationContext,
    ) -> RequestVerdict {
        let payload = json!({"name": tool, "arguments": args.as_map()});
        let request = ChainRequest::new(EVENT, Phase::Request, payload)
            .with_direction(Direction::Receiving)
            .with_context(context.clone());
        let Some(record) = self.run(request).await else {
            return RequestVerdict::Pass {
                args: args.clone(),
                record: None,
            };
        };
        if let Some(error) = record.to_error() {
            return RequestVerdict::Blocked {
                error,
                record: serde_json::to_value(&record).unwrap_or(Value::Null),
            };
        }
        let payload = record.final_payload.clone().unwrap_or(Value::Null);
        let refuse = |why: &str| RequestVerdict::Blocked {
            error: ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("{EVENT} blocked by interceptors: {why}; fix the mutator"),
                Some(serde_json::to_value(&record).unwrap_or(Value::Null)),
            ),
            record: serde_json::to_value(&record).unwrap_or(Value::Null),
        };
        if payload.get("name").and_then(Value::as_str) != Some(tool) {
            return refuse("a mutator renamed the tool; mutators may change the arguments only");
        }
        let arguments = payload
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        match Args::try_from(arguments) {
            Ok(args) => RequestVerdict::Pass {
                args,
                record: Some(record),
            },
            Err(e) => refuse(&format!("the mutated arguments are not usable: {e}")),
        }
    }

    /// The response phase of a `tools/call` (the result comes back to the gateway as a client:
    /// validate, then mutate). `None` when no chain looks at `tools/call` results: the result
    /// passes as it is, and nothing is copied for a verdict.
    pub(crate) fn tool_response<'a>(
        &'a self,
        result: &'a Value,
        context: &'a InvocationContext,
    ) -> Phased<'a, Option<ResponseVerdict>> {
        self.phase(
            Phase::Response,
            || None,
            || async move { Some(self.chain_response(result, context).await) },
        )
    }

    async fn chain_response(&self, result: &Value, context: &InvocationContext) -> ResponseVerdict {
        let request =
            ChainRequest::new(EVENT, Phase::Response, result.clone()).with_context(context.clone());
        let Some(record) = self.run(request).await else {
            return ResponseVerdict::Pass {
                result: result.clone(),
                record: None,
            };
        };
        match (record.to_error(), record.final_payload.clone()) {
            (None, Some(result)) => ResponseVerdict::Pass {
                result,
                record: Some(record),
            },
            (Some(error), _) => ResponseVerdict::Blocked { error, record },
            (None, None) => ResponseVerdict::Blocked {
                error: ErrorData::internal_error("the interceptor chain lost the result", None),
                record,
            },
        }
    }
}

/// What the chains decided about a call, as the log keeps it beside the result
/// (`{request?, response?}`), when a chain ran. A verdict's `finalPayload` is left out: it is the
/// call's arguments or its result, recorded already.
pub(crate) fn verdicts(
    request: Option<&ChainExecutionResult>,
    response: Option<&ChainExecutionResult>,
) -> Option<Value> {
    let verdict = |r: &ChainExecutionResult| {
        let mut v = json!(r);
        if let Some(map) = v.as_object_mut() {
            map.remove("finalPayload");
        }
        v
    };
    let mut verdicts = Map::new();
    if let Some(r) = request {
        verdicts.insert("request".into(), verdict(r));
    }
    if let Some(r) = response {
        verdicts.insert("response".into(), verdict(r));
    }
    (!verdicts.is_empty()).then_some(Value::Object(verdicts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_carries_org_session_and_a_valid_traceparent_only() {
        let org = OrgId::new("acme").unwrap();
        let session = SessionId::new("s1").unwrap();
        let cases = [
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Some("4bf92f3577b34da6a3ce929d0e0e4736"),
                Some("00f067aa0ba902b7"),
            ),
            ("garbage", None, None),
            ("00-short-00f067aa0ba902b7-01", None, None),
        ];
        for (traceparent, trace, span) in cases {
            let meta: RequestMetaObject =
                serde_json::from_value(json!({"traceparent": traceparent})).unwrap();
            let c = context(&org, &session, Some(&meta));
            assert_eq!(c.trace_id.as_deref(), trace, "{traceparent}");
            assert_eq!(c.span_id.as_deref(), span, "{traceparent}");
            assert_eq!(c.session_id.as_deref(), Some("s1"));
            assert_eq!(c.principal.unwrap().id, "acme");
        }
        assert_eq!(context(&org, &session, None).trace_id, None);
    }

    #[test]
    fn verdicts_are_kept_apart_without_their_final_payload() {
        assert_eq!(verdicts(None, None), None, "no chain ran: nothing to keep");
        let chain = ChainExecutionResult {
            status: undolog_interceptors::ChainStatus::Success,
            event: EVENT.into(),
            phase: Phase::Request,
            direction: Direction::Receiving,
            results: vec![],
            final_payload: Some(json!({"name": "t", "arguments": {}})),
            validation_summary: Default::default(),
            aborted_at: None,
            total_duration_ms: 0,
        };
        let kept = verdicts(Some(&chain), None).expect("a chain ran");
        assert_eq!(kept["request"]["status"], "success");
        assert!(kept.get("response").is_none());
        assert!(kept["request"].get("finalPayload").is_none());
        let both = verdicts(Some(&chain), Some(&chain)).unwrap();
        assert_eq!(both["response"]["status"], "success");
    }
}
