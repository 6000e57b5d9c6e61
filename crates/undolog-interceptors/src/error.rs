//! The crate's one error type, and its mapping to JSON-RPC error codes.

use rmcp::model::{ErrorCode, ErrorData};

/// JSON-RPC code for a validation failure and for invalid params (unknown interceptor, bad config).
pub const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC code for a mutation or execution failure.
pub const INTERNAL_ERROR: i32 = -32603;
/// JSON-RPC code for a timeout (per interceptor or whole chain).
pub const TIMEOUT: i32 = -32000;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "no interceptor named `{0}` is registered; call interceptors/list to see the registered names"
    )]
    UnknownInterceptor(String),
    #[error("interceptor `{0}` is registered twice; give each interceptor a unique name")]
    DuplicateName(String),
    #[error(
        "interceptor `{name}` has an invalid configSchema: {reason}; fix the schema in its descriptor"
    )]
    InvalidConfigSchema { name: String, reason: String },
    #[error(
        "config for interceptor `{name}` does not match its configSchema: {reason}; fix the config"
    )]
    InvalidConfig { name: String, reason: String },
    #[error("invalid params for {method}: {reason}; check the request against SEP-2624")]
    InvalidParams {
        method: &'static str,
        reason: String,
    },
    #[error("interceptor `{name}` failed: {reason}")]
    Handler { name: String, reason: String },
    #[error(
        "interceptor `{name}` returned a {got} result but is declared as {declared}; fix its handler"
    )]
    WrongResultType {
        name: String,
        declared: &'static str,
        got: &'static str,
    },
    #[error("interceptor `{name}` timed out after {ms} ms; raise its timeout or make it faster")]
    Timeout { name: String, ms: u64 },
    #[error("interceptor server answered with JSON-RPC error {code}: {message}")]
    Rpc { code: i32, message: String },
    #[error("interceptor server unreachable: {0}; check that it is running and speaks MCP")]
    Transport(String),
    #[error("interceptor server sent a malformed {method} result: {reason}")]
    MalformedResult {
        method: &'static str,
        reason: String,
    },
}

impl Error {
    /// The JSON-RPC error code this error is reported with.
    pub fn code(&self) -> i32 {
        match self {
            Error::UnknownInterceptor(_)
            | Error::InvalidConfig { .. }
            | Error::InvalidParams { .. } => INVALID_PARAMS,
            Error::Timeout { .. } => TIMEOUT,
            Error::Rpc { code, .. } => *code,
            Error::DuplicateName(_)
            | Error::InvalidConfigSchema { .. }
            | Error::Handler { .. }
            | Error::WrongResultType { .. }
            | Error::Transport(_)
            | Error::MalformedResult { .. } => INTERNAL_ERROR,
        }
    }

    /// This error as a JSON-RPC error object.
    pub fn to_error_data(&self) -> ErrorData {
        ErrorData::new(ErrorCode(self.code()), self.to_string(), None)
    }
}

impl From<Error> for ErrorData {
    fn from(error: Error) -> Self {
        error.to_error_data()
    }
}
