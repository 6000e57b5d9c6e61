//! The gateway's errors, and the one place that maps them to HTTP statuses and JSON-RPC errors.
//! Store and internal details are logged, never sent: a client sees what to do next.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use rmcp::ErrorData;
use serde_json::json;
use undolog_engine::Error as EngineError;
use undolog_notify::links::LinkError;

use crate::oauth::Challenge;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no tool named {0:?}; list the tools to see what this gateway offers")]
    UnknownTool(String),
    #[error(
        "no tool named {tool:?} is known yet: upstream {} is unavailable and has not listed its \
         tools; nothing was recorded or run, retry once it is up",
        upstreams.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", ")
    )]
    UpstreamUnavailable {
        tool: String,
        upstreams: Vec<String>,
    },
    #[error(
        "upstream `{upstream}` cannot be reached ({reason}); the call was not sent, so nothing ran \
         (effect {effect_id} records it as rejected): retry once it is up"
    )]
    NotSent {
        effect_id: undolog_types::EffectId,
        upstream: String,
        reason: String,
    },
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error("{0}")]
    RequestTimeout(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    /// An access token that is not good here (bad signature, expired, another resource's...).
    #[error("{0}")]
    InvalidToken(String),
    /// The principal's role does not include `needed`.
    #[error("{message}")]
    RoleMissing {
        needed: undolog_types::Role,
        message: String,
    },
    #[error("the request was cancelled by the client")]
    Cancelled,
    #[error(
        "the tool {0:?} runs only as a task: declare the tasks extension \
         (io.modelcontextprotocol/tasks) in the client's capabilities"
    )]
    TasksRequired(String),
    #[error(
        "the tool ran upstream, but its outcome could not be recorded (effect {effect_id}); the \
         gateway keeps trying to record it. Do not retry blindly: GET /v1/effects/{effect_id} \
         shows it once recorded, and if the store stays away it is in doubt for an operator"
    )]
    OutcomeNotRecorded {
        effect_id: undolog_types::EffectId,
        reason: String,
    },
    #[error(
        "the identical call (effect {effect_id}) failed: {error}; it is not run again. To try \
         again, change the arguments or send a new idempotency key or step"
    )]
    CallFailed {
        effect_id: undolog_types::EffectId,
        error: String,
    },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Config(#[from] crate::config::Error),
    #[error("{0}")]
    Startup(String),
    /// The interceptor chain blocked the call (recorded as a rejected effect when it never ran)
    /// or its result; `error` is the chain's JSON-RPC error (−32602, −32603 or −32000).
    #[error(
        "the engine at {url} cannot be reached ({reason}); nothing was recorded or run, retry \
         shortly"
    )]
    EngineUnreachable { url: String, reason: String },
    /// The engine this gateway asks (`serve --engine`) refused: its status, code and message,
    /// passed on as they are.
    #[error("{message}")]
    Remote {
        status: StatusCode,
        code: String,
        message: String,
        effect_id: Option<undolog_types::EffectId>,
    },
    #[error("{}", .error.message)]
    Intercepted {
        effect_id: Option<undolog_types::EffectId>,
        error: ErrorData,
    },
    /// An approve or deny link that is not good here.
    #[error(transparent)]
    Link(#[from] LinkError),
}

impl From<undolog_traces::ExporterError> for Error {
    fn from(e: undolog_traces::ExporterError) -> Error {
        Error::Startup(e.to_string())
    }
}

impl From<undolog_identity::Error> for Error {
    fn from(refused: undolog_identity::Error) -> Error {
        use undolog_identity::Error as Refused;
        match refused {
            Refused::Unauthorized(why) => Error::Unauthorized(why),
            Refused::InvalidToken(why) => Error::InvalidToken(why),
            Refused::RoleMissing { needed, message } => Error::RoleMissing { needed, message },
            Refused::Store(e) => Error::Engine(e.into()),
            Refused::KeyNotStored(e) => Error::Startup(format!("cannot store the key: {e}")),
        }
    }
}

impl Error {
    pub(crate) fn status(&self) -> StatusCode {
        use EngineError as E;
        match self {
            Error::UnknownTool(_) => StatusCode::NOT_FOUND,
            Error::UpstreamUnavailable { .. } | Error::NotSent { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Error::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Error::Unauthorized(_) | Error::InvalidToken(_) => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) | Error::RoleMissing { .. } => StatusCode::FORBIDDEN,
            Error::Cancelled => StatusCode::BAD_REQUEST,
            Error::TasksRequired(_) => StatusCode::BAD_REQUEST,
            Error::CallFailed { .. } => StatusCode::CONFLICT,
            Error::Config(_) | Error::Startup(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Error::OutcomeNotRecorded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::EngineUnreachable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::Remote { status, .. } => *status,
            Error::Link(e) => match e {
                LinkError::Malformed => StatusCode::BAD_REQUEST,
                LinkError::Tampered => StatusCode::FORBIDDEN,
                LinkError::Expired => StatusCode::GONE,
            },
            Error::Intercepted { error, .. } => match error.code.0 {
                -32602 => StatusCode::FORBIDDEN,
                -32000 => StatusCode::GATEWAY_TIMEOUT,
                _ => StatusCode::BAD_GATEWAY,
            },
            Error::Engine(e) => match e {
                E::InvalidInput(_) | E::EmptyToolName | E::EmptyIdempotencyKey => {
                    StatusCode::BAD_REQUEST
                }
                E::ArgsTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                E::WrongVerdict { .. } => StatusCode::UNPROCESSABLE_ENTITY,
                E::KeyReused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
                E::UnknownEffect(_) | E::UnknownApproval(_) | E::UnknownSession(_) => {
                    StatusCode::NOT_FOUND
                }
                E::OwnCall { .. } | E::NotOwner(_) => StatusCode::FORBIDDEN,
                E::NotPending { .. }
                | E::AlreadyDecided { .. }
                | E::UndoRunning { .. }
                | E::UndoInterrupted { .. }
                | E::CompensationInDoubt { .. }
                | E::UndoLost { .. }
                | E::StepNotBegun(_)
                | E::ApprovalExpired(_)
                | E::NotInDoubt(_)
                | E::SessionBusy { .. }
                | E::NothingToUndo { .. }
                | E::NotUndoing { .. }
                | E::OutOfOrder { .. }
                | E::IllegalTransition(_)
                | E::StillRunning { .. } => StatusCode::CONFLICT,
                E::ApprovalWaitTimedOut(_) => StatusCode::ACCEPTED,
                E::Store(_) | E::Stopped => StatusCode::SERVICE_UNAVAILABLE,
            },
        }
    }

    /// The effect the error is about, when one was recorded: every error body names it.
    pub(crate) fn effect_id(&self) -> Option<undolog_types::EffectId> {
        match self {
            Error::CallFailed { effect_id, .. }
            | Error::OutcomeNotRecorded { effect_id, .. }
            | Error::NotSent { effect_id, .. } => Some(*effect_id),
            Error::Intercepted { effect_id, .. } | Error::Remote { effect_id, .. } => *effect_id,
            Error::Engine(EngineError::StillRunning { effect, .. }) => Some(*effect),
            _ => None,
        }
    }

    /// A machine-readable name of what went wrong, beside the message in every error body.
    pub(crate) fn code(&self) -> &str {
        use EngineError as E;
        match self {
            Error::UnknownTool(_) => "unknown_tool",
            Error::UpstreamUnavailable { .. } | Error::NotSent { .. } => "upstream_unavailable",
            Error::BadRequest(_) => "bad_request",
            Error::Unprocessable(_) => "unprocessable",
            Error::RequestTimeout(_) => "body_too_slow",
            Error::Unauthorized(_) => "unauthorized",
            Error::Forbidden(_) | Error::RoleMissing { .. } => "forbidden",
            Error::InvalidToken(_) => "invalid_token",
            Error::Cancelled => "cancelled",
            Error::TasksRequired(_) => "tasks_required",
            Error::CallFailed { .. } => "call_failed",
            Error::OutcomeNotRecorded { .. } => "outcome_not_recorded",
            Error::Config(_) | Error::Startup(_) => "internal",
            Error::Intercepted { .. } => "intercepted",
            Error::EngineUnreachable { .. } => "engine_unavailable",
            Error::Remote { code, .. } => code,
            Error::Link(e) => e.code(),
            Error::Engine(e) => match e {
                E::InvalidInput(_) => "invalid_input",
                E::EmptyToolName => "empty_tool_name",
                E::EmptyIdempotencyKey => "empty_idempotency_key",
                E::ArgsTooLarge { .. } => "args_too_large",
                E::KeyReused { .. } => "idempotency_key_reused",
                E::UnknownEffect(_) => "unknown_effect",
                E::UnknownApproval(_) => "unknown_approval",
                E::UnknownSession(_) => "unknown_session",
                E::NotPending { .. } => "not_pending",
                E::AlreadyDecided { .. } => "already_decided",
                E::OwnCall { .. } => "own_call",
                E::NotOwner(_) => "not_owner",
                E::ApprovalExpired(_) => "approval_expired",
                E::StillRunning { .. } => "still_running",
                E::ApprovalWaitTimedOut(_) => "still_waiting_for_approval",
                E::NotInDoubt(_) => "not_in_doubt",
                E::SessionBusy { .. } => "session_busy",
                E::NothingToUndo { .. } => "nothing_to_undo",
                E::UndoRunning { .. } => "undo_running",
                E::UndoInterrupted { .. } => "undo_interrupted",
                E::CompensationInDoubt { .. } => "compensation_in_doubt",
                E::WrongVerdict { .. } => "wrong_verdict",
                E::UndoLost { .. } => "undo_lost",
                E::StepNotBegun(_) => "step_not_begun",
                E::NotUndoing { .. } => "not_undoing",
                E::OutOfOrder { .. } => "out_of_order",
                E::IllegalTransition(_) => "illegal_transition",
                E::Store(_) => "store_unavailable",
                E::Stopped => "stopped",
            },
        }
    }

    /// What the client is told. Store failures are logged in full and summarized.
    fn public_message(&self) -> String {
        match self {
            Error::OutcomeNotRecorded { reason, .. } => {
                tracing::error!(%reason, "an outcome could not be recorded");
                self.to_string()
            }
            Error::Engine(EngineError::Store(e)) => {
                tracing::error!(error = %e, "store failure");
                "the effect log is unavailable; nothing was recorded, retry shortly".to_owned()
            }
            other => other.to_string(),
        }
    }

    /// The JSON-RPC error for MCP clients.
    pub(crate) fn to_jsonrpc(&self) -> ErrorData {
        if let Error::TasksRequired(_) = self {
            return ErrorData::missing_required_client_capability(
                rmcp::model::ClientCapabilities::builder()
                    .enable_tasks()
                    .build(),
            );
        }
        if let Error::Intercepted { effect_id, error } = self {
            // The chain's own error, with the effect that records it.
            let mut error = error.clone();
            if let (Some(id), Some(serde_json::Value::Object(data))) = (effect_id, &mut error.data)
            {
                data.insert(crate::results::META_EFFECT_ID.into(), json!(id.to_string()));
            }
            return error;
        }
        let message = self.public_message();
        let data = self.fields();
        match self.status() {
            StatusCode::BAD_REQUEST
            | StatusCode::NOT_FOUND
            | StatusCode::PAYLOAD_TOO_LARGE
            | StatusCode::UNPROCESSABLE_ENTITY => ErrorData::invalid_params(message, data),
            _ => ErrorData::internal_error(message, data),
        }
    }

    /// The fields a body or a JSON-RPC error's `data` carries besides the message: the effect
    /// (when one was recorded), whether the tool may have run without its outcome recorded
    /// (`in_doubt`), and the upstreams that could not be reached.
    fn fields(&self) -> Option<serde_json::Value> {
        let mut fields = serde_json::Map::new();
        if let Some(effect_id) = self.effect_id() {
            fields.insert("effect_id".into(), json!(effect_id.to_string()));
        }
        match self {
            Error::OutcomeNotRecorded { .. } => {
                fields.insert("in_doubt".into(), json!(true));
            }
            Error::UpstreamUnavailable { upstreams, .. } => {
                fields.insert("upstreams".into(), json!(upstreams));
            }
            Error::NotSent { upstream, .. } => {
                fields.insert("upstreams".into(), json!([upstream]));
                fields.insert("in_doubt".into(), json!(false));
            }
            _ => {}
        }
        (!fields.is_empty()).then_some(serde_json::Value::Object(fields))
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = json!({ "error": self.public_message(), "code": self.code() });
        if let Some(serde_json::Value::Object(fields)) = self.fields() {
            body.as_object_mut()
                .expect("a body is an object")
                .extend(fields);
        }
        let challenge = match &self {
            Error::Unauthorized(_) => Some(Challenge::Missing),
            Error::InvalidToken(why) => Some(Challenge::InvalidToken(why.clone())),
            Error::RoleMissing { needed, .. } => Some(Challenge::InsufficientScope(*needed)),
            _ => None,
        };
        let mut response = (status, Json(body)).into_response();
        if let Some(challenge) = challenge {
            response.extensions_mut().insert(challenge);
        }
        response
    }
}
