//! The rows of the log, as the engine sees them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use undolog_types::{
    ApprovalId, ApprovalState, Args, EffectId, EffectState, OrgId, SessionId, SessionState,
    Signature, Tier, Timestamp,
};

/// One agent session: the unit of replay and of undo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub org: OrgId,
    pub id: SessionId,
    pub state: SessionState,
    /// The sequence number the next effect of this session gets.
    pub next_seq: i64,
    /// The effect whose compensation failed, kept for a person to resolve.
    pub failed_effect: Option<EffectId>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// How to undo an effect: a tool and an argument template that may read the original `args` and
/// `result`. Recorded with the effect before the tool runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compensation {
    pub tool: String,
    pub args: Value,
}

/// Who is executing a pending effect, and until when that claim holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub holder: String,
    pub expires_at: Timestamp,
}

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    pub id: EffectId,
    pub org: OrgId,
    pub session: SessionId,
    /// Order of interception within the session.
    pub seq: i64,
    pub tool: String,
    pub args: Args,
    pub step: Option<u64>,
    pub signature: Signature,
    pub idempotency_key: Option<String>,
    pub tier: Tier,
    pub compensation: Option<Compensation>,
    pub state: EffectState,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub approval: Option<ApprovalId>,
    pub lease: Option<Lease>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub completed_at: Option<Timestamp>,
}

/// A request for a person's decision, bound to one call's signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub id: ApprovalId,
    pub org: OrgId,
    pub session: SessionId,
    pub effect: EffectId,
    pub signature: Signature,
    pub state: ApprovalState,
    pub requested_at: Timestamp,
    pub expires_at: Timestamp,
    pub decided_by: Option<String>,
    pub decided_at: Option<Timestamp>,
    pub reason: Option<String>,
}

/// A session's whole history, exported as JSON at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub org: OrgId,
    pub session: SessionId,
    pub taken_at: Timestamp,
    pub body: Value,
}

/// A credential that names an org. Only the hash of the secret is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    /// A short public id, safe to print and to list.
    pub id: String,
    pub org: OrgId,
    /// Lowercase hex BLAKE3 of the secret.
    pub hash: String,
    pub label: Option<String>,
    pub created_at: Timestamp,
}
