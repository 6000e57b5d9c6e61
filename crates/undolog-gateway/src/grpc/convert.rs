//! Between the proto's messages and the engine's and records' types: JSON text parsed with
//! what to send, ids, tiers, decisions, records as the HTTP API's JSON.

use std::time::Duration;

use serde_json::{Map, Value};
use tonic::{Response, Status};
use undolog_engine::{Intercept, Rejection};
use undolog_store::{Compensation, Effect as EffectRecord};
use undolog_types::Tier;

use super::{proto, status::status};
use crate::{
    Error,
    http::{admin, sdk},
};

type Reply<T> = Result<Response<T>, Status>;

pub(super) fn json_text(what: &str, text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| Error::BadRequest(format!("{what}: not JSON: {e}")))
}

pub(super) fn id<T: std::str::FromStr>(what: &str, text: &str) -> Result<T, Error> {
    admin::parse_id(what, text)
}

pub(super) fn tier(tier: i32) -> Result<Tier, Error> {
    match proto::Tier::try_from(tier) {
        Ok(proto::Tier::ReadOnly) => Ok(Tier::ReadOnly),
        Ok(proto::Tier::Compensable) => Ok(Tier::Compensable),
        Ok(proto::Tier::Irreversible) => Ok(Tier::Irreversible),
        _ => Err(Error::BadRequest(
            "tier: name one: TIER_READ_ONLY, TIER_COMPENSABLE or TIER_IRREVERSIBLE".into(),
        )),
    }
}

/// The request as the SDK's HTTP body says it, checked by the same code.
pub(super) fn intercept_body(
    request: proto::InterceptRequest,
) -> Result<sdk::InterceptBody, Error> {
    let arguments = match request.arguments_json.trim() {
        "" => Map::new(),
        text => match json_text("arguments_json", text)? {
            Value::Object(map) => map,
            _ => {
                return Err(Error::BadRequest(
                    "arguments_json: must be a JSON object".into(),
                ));
            }
        },
    };
    let compensation = request
        .compensation_json
        .map(|text| {
            serde_json::from_str::<Compensation>(&text).map_err(|e| {
                Error::BadRequest(format!(
                    "compensation_json: {e}; send {{\"kind\": \"local\", \"function\": \"…\"}} \
                     or {{\"kind\": \"upstream\", \"tool\": \"…\", \"args\": {{…}}}}"
                ))
            })
        })
        .transpose()?;
    Ok(sdk::InterceptBody {
        session_id: request.session_id,
        tool: request.tool,
        arguments,
        step: request.step,
        tier: tier(request.tier)?,
        compensation,
        idempotent: request.idempotent,
        requires_approval: request.requires_approval,
        idempotency_key: request.idempotency_key,
        lease: request.lease_ms.map(std::time::Duration::from_millis),
        wait: request.wait_ms.map(std::time::Duration::from_millis),
    })
}

pub(super) fn decision(decided: Intercept) -> proto::InterceptReply {
    use proto::intercept_reply::Decision;
    let decision = match decided {
        Intercept::Execute {
            effect_id,
            lease_expires_at,
            lease_token,
        } => Decision::Execute(proto::Execute {
            effect_id: effect_id.to_string(),
            lease_expires_at_ms: lease_expires_at.as_millis(),
            lease_token: lease_token.into(),
        }),
        Intercept::Replay { effect_id, result } => Decision::Replay(proto::Replay {
            effect_id: effect_id.to_string(),
            result_json: result.to_string(),
        }),
        Intercept::Failed {
            effect_id,
            error,
            result,
        } => Decision::Failed(proto::Failed {
            effect_id: effect_id.to_string(),
            error,
            result_json: result.map(|r| r.to_string()),
        }),
        Intercept::AwaitingApproval {
            effect_id,
            approval_id,
            expires_at,
        } => Decision::AwaitingApproval(proto::AwaitingApproval {
            effect_id: effect_id.to_string(),
            approval_id: approval_id.to_string(),
            expires_at_ms: expires_at.as_millis(),
        }),
        Intercept::Rejected { effect_id, reason } => Decision::Rejected(proto::Rejected {
            effect_id: effect_id.map(|id| id.to_string()),
            in_doubt: reason == Rejection::InDoubt,
            reason: reason.message(),
            rejection_json: serde_json::to_string(&reason).unwrap_or_default(),
        }),
    };
    proto::InterceptReply {
        decision: Some(decision),
    }
}

/// A record's text field as the HTTP API's JSON names it.
pub(super) fn named(record: &Value, field: &str) -> String {
    record[field].as_str().unwrap_or_default().to_owned()
}

pub(super) fn optional_json(what: &str, text: Option<String>) -> Result<Option<Value>, Status> {
    text.map(|text| json_text(what, &text).map_err(status))
        .transpose()
}

pub(super) fn approval_reply(record: undolog_store::Approval) -> Reply<proto::ApprovalReply> {
    Ok(Response::new(proto::ApprovalReply {
        approval: Some(approval(&record)),
    }))
}

pub(super) fn record_reply(record: &impl serde::Serialize) -> Reply<proto::RecordReply> {
    Ok(Response::new(proto::RecordReply {
        record_json: serde_json::to_string(record).unwrap_or_default(),
    }))
}

/// The longest a gateway's WaitForDecision holds a request open; it asks again after.
pub(super) const LONGEST_WAIT: Duration = Duration::from_secs(60);

pub(super) fn effect(record: &EffectRecord) -> proto::Effect {
    let json = serde_json::to_value(record).unwrap_or(Value::Null);
    proto::Effect {
        effect_id: record.id.to_string(),
        session_id: record.session.to_string(),
        tool: record.tool.clone(),
        state: named(&json, "state"),
        record_json: json.to_string(),
    }
}

pub(super) fn approval(record: &undolog_store::Approval) -> proto::Approval {
    let json = serde_json::to_value(record).unwrap_or(Value::Null);
    proto::Approval {
        approval_id: record.id.to_string(),
        effect_id: record.effect.to_string(),
        session_id: record.session.to_string(),
        state: named(&json, "state"),
        record_json: json.to_string(),
    }
}
