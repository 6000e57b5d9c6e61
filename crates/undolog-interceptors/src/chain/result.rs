//! What a chain run returns: `ChainExecutionResult` and its parts.

use rmcp::model::{ErrorCode, ErrorData};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::descriptor::{InterceptorType, Mode, Phase};
use crate::error::{INTERNAL_ERROR, INVALID_PARAMS, TIMEOUT};
use crate::event::Direction;
use crate::wire::{Mutation, Severity, Validation};

/// How a chain run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainStatus {
    /// Every interceptor passed (or was skipped fail-open); `finalPayload` goes on.
    Success,
    /// An active validator returned severity `error`.
    ValidationFailed,
    /// An active, fail-closed mutator crashed or answered wrongly.
    MutationFailed,
    /// An active, fail-closed validator crashed or answered wrongly.
    ExecutionFailed,
    /// A fail-closed interceptor, or the whole chain, ran out of time.
    Timeout,
}

/// The result of running one message through a chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainExecutionResult {
    pub status: ChainStatus,
    pub event: String,
    pub phase: Phase,
    pub direction: Direction,
    /// One entry per interceptor that ran, in the order they finished their stage.
    pub results: Vec<ChainEntry>,
    /// The payload after every applied mutation; absent when the chain aborted (mutations are
    /// all-or-nothing: nothing of an aborted chain goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_payload: Option<Value>,
    pub validation_summary: ValidationSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_at: Option<AbortedAt>,
    pub total_duration_ms: u64,
}

/// What one interceptor did in a chain run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainEntry {
    pub interceptor: String,
    #[serde(rename = "type")]
    pub kind: InterceptorType,
    pub mode: Mode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation: Option<Mutation>,
    /// For mutators: whether the mutation was applied (never in audit mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<bool>,
    /// The interceptor crashed, answered wrongly or timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<EntryError>,
    /// It failed but was skipped (fail-open or audit).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
    pub duration_ms: u64,
}

/// An interceptor failure as recorded in a chain entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntryError {
    pub code: i32,
    pub message: String,
}

/// Counts of validation findings by severity (audit findings included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationSummary {
    pub errors: u32,
    pub warnings: u32,
    pub infos: u32,
}

impl ValidationSummary {
    pub(crate) fn add(&mut self, validation: &Validation) {
        let mut count = |s: Severity| match s {
            Severity::Error => self.errors += 1,
            Severity::Warn => self.warnings += 1,
            Severity::Info => self.infos += 1,
        };
        if validation.messages.is_empty() {
            if !validation.valid {
                count(validation.severity.unwrap_or(Severity::Error));
            }
        } else {
            validation.messages.iter().for_each(|m| count(m.severity));
        }
    }
}

/// Where and why a chain stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbortedAt {
    /// The interceptor that stopped the chain; absent when the whole chain ran out of time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interceptor: Option<String>,
    pub phase: Phase,
    pub reason: String,
}

impl ChainExecutionResult {
    /// Whether the message may go on.
    pub fn is_allowed(&self) -> bool {
        self.status == ChainStatus::Success
    }

    /// The JSON-RPC error to answer with when the chain did not succeed: −32602 for a validation
    /// failure, −32603 for a mutation or execution failure, −32000 for a timeout. `data` carries
    /// the whole result so a client can see every finding.
    pub fn to_error(&self) -> Option<ErrorData> {
        let code = match self.status {
            ChainStatus::Success => return None,
            ChainStatus::ValidationFailed => INVALID_PARAMS,
            ChainStatus::MutationFailed | ChainStatus::ExecutionFailed => INTERNAL_ERROR,
            ChainStatus::Timeout => TIMEOUT,
        };
        let reason = self
            .aborted_at
            .as_ref()
            .map_or("blocked", |a| a.reason.as_str());
        let message = format!("{} blocked by interceptors: {reason}", self.event);
        let data = serde_json::to_value(self).unwrap_or(Value::Null);
        Some(ErrorData::new(ErrorCode(code), message, Some(data)))
    }
}
