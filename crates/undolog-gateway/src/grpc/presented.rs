//! The credentials of the client being served, carried along its request's future (as its
//! trace context is), for a gateway in front of a remote engine to present with every engine
//! request the client's request makes.

use std::future::Future;

use tonic::metadata::AsciiMetadataValue;

tokio::task_local! {
    static PRESENTED: Presented;
}

/// The `authorization` a client sent, passed on to the engine. Never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Presented(Option<AsciiMetadataValue>);

impl std::fmt::Debug for Presented {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Presented(…)"
        } else {
            "Presented(none)"
        })
    }
}

impl Presented {
    /// The header as the client sent it (`Bearer …`), if it did.
    pub(crate) fn of(authorization: Option<&axum::http::HeaderValue>) -> Presented {
        Presented(authorization.and_then(|v| {
            let mut value = AsciiMetadataValue::try_from(v.as_bytes()).ok()?;
            // Never indexed by HPACK, as the header itself is not.
            value.set_sensitive(true);
            Some(value)
        }))
    }

    /// The header, to put in an engine request's metadata.
    pub(super) fn header(&self) -> Option<&AsciiMetadataValue> {
        self.0.as_ref()
    }

    /// The header's text, empty when none was sent.
    pub(crate) fn text(&self) -> &str {
        self.0
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

/// Runs `work` with `presented` as the credentials every engine request it makes carries.
pub(crate) fn presenting<F: Future>(
    presented: Presented,
    work: F,
) -> impl Future<Output = F::Output> {
    PRESENTED.scope(presented, work)
}

/// `work`, carrying the credentials of the request that spawns it (for a task of its own).
pub(crate) fn carried<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let current = PRESENTED.try_with(Clone::clone).unwrap_or_default();
    presenting(current, work)
}

/// The credentials of the request this runs for (none outside one).
pub(super) fn current() -> Presented {
    PRESENTED.try_with(Clone::clone).unwrap_or_default()
}
