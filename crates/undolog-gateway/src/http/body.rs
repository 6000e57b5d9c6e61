//! Request bodies as JSON, with the errors of the rest of the API (a JSON `{"error"}` that says
//! what is wrong) and the same number rules as signatures: integers a double cannot carry exactly
//! are refused, so every language computes the same signature.

use std::{sync::Arc, time::Duration};

use axum::{
    body::Bytes,
    extract::{FromRequest, Request},
};
use serde::de::DeserializeOwned;

use crate::{Error, Gateway};

/// Like `axum::Json`, with UndoLog's error shape and number checks.
#[derive(Debug)]
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<T: DeserializeOwned> FromRequest<Arc<Gateway>> for JsonBody<T> {
    type Rejection = Error;

    async fn from_request(request: Request, gateway: &Arc<Gateway>) -> Result<Self, Error> {
        let timeout = gateway.config.limits.body_timeout;
        let bytes = tokio::time::timeout(timeout, Bytes::from_request(request, gateway))
            .await
            .map_err(|_| too_slow(timeout))?
            .map_err(|e| Error::BadRequest(format!("cannot read the request body: {e}")))?;
        parse(&bytes).map(JsonBody)
    }
}

/// The answer to a body that did not arrive within `timeout`.
pub(crate) fn too_slow(timeout: Duration) -> Error {
    Error::RequestTimeout(format!(
        "the request body did not arrive within {timeout:?}; send it at once (or raise \
         limits.body_timeout_secs)"
    ))
}

/// Parses a JSON body; an empty body reads as `{}` when `T` allows it.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Error::BadRequest("the body is not UTF-8 text".into()))?;
    // Blank is JSON's whitespace only (space, tab, LF, CR), not Unicode's: "\u{2028}" is no body.
    let blank = text
        .bytes()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    let text = if blank { "{}" } else { text };
    let value = undolog_types::canonical::parse(text)
        .map_err(|e| Error::BadRequest(format!("the body is not usable JSON: {e}")))?;
    serde_json::from_value(value)
        .map_err(|e| Error::BadRequest(format!("the body has the wrong shape: {e}")))
}
