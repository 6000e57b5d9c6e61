//! Why a request to an upstream got no usable answer.

use std::time::Duration;

use rmcp::ErrorData;

/// Why a request to an upstream got no usable answer. Messages name the upstream and what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    #[error(
        "upstream `{upstream}` cannot be reached: {reason}; check that it runs, it is retried on the next call"
    )]
    Unavailable { upstream: String, reason: String },
    #[error("upstream `{upstream}` did not answer within {after:?}")]
    TimedOut { upstream: String, after: Duration },
    #[error(
        "upstream `{upstream}` closed the connection before answering (it may have crashed); it is restarted on the next call"
    )]
    Closed { upstream: String },
    #[error("upstream `{upstream}` answered with something that is not a valid MCP result")]
    Garbage { upstream: String },
    #[error("upstream `{upstream}` refused the request: {}", error.message)]
    Refused { upstream: String, error: ErrorData },
    #[error("the request was cancelled by the client")]
    Cancelled,
}

impl UpstreamError {
    /// The JSON-RPC error a client gets: the upstream's own, else one that says what happened.
    pub fn into_error_data(self) -> ErrorData {
        match self {
            UpstreamError::Refused { error, .. } => error,
            other => ErrorData::internal_error(other.to_string(), None),
        }
    }

    /// Whether the upstream may have run a request that failed so: it was sent, and no
    /// definite answer came back (the connection broke, time ran out, the answer was unreadable,
    /// or the client cancelled it on the way). Unreachable upstreams and their own JSON-RPC
    /// errors are definite: the request did not run.
    pub fn may_have_run(&self) -> bool {
        match self {
            UpstreamError::Closed { .. }
            | UpstreamError::TimedOut { .. }
            | UpstreamError::Garbage { .. }
            | UpstreamError::Cancelled => true,
            UpstreamError::Unavailable { .. } | UpstreamError::Refused { .. } => false,
        }
    }
}
