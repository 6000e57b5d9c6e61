//! Errors as gRPC statuses: the HTTP API's status mapped to its gRPC code (as gRPC's own
//! HTTP-to-gRPC table does), the message that says what to do, and the API's error code in the
//! `x-undolog-code` metadata.

use axum::http::StatusCode;
use tonic::{Code, Status, metadata::MetadataValue};

use crate::Error;

pub(crate) fn status(error: impl Into<Error>) -> Status {
    let error = error.into();
    let code = match error.status() {
        StatusCode::BAD_REQUEST
        | StatusCode::UNPROCESSABLE_ENTITY
        | StatusCode::PAYLOAD_TOO_LARGE => Code::InvalidArgument,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::CONFLICT => Code::FailedPrecondition,
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::BAD_GATEWAY => Code::Unavailable,
        StatusCode::GATEWAY_TIMEOUT | StatusCode::REQUEST_TIMEOUT => Code::DeadlineExceeded,
        // Still waiting for a person: ask again later.
        StatusCode::ACCEPTED => Code::Unavailable,
        _ => Code::Internal,
    };
    let mut answer = Status::new(code, error.to_string());
    answer
        .metadata_mut()
        .insert("x-undolog-code", MetadataValue::from_static(error.code()));
    answer
}
