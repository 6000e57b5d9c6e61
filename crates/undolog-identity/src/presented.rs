//! The credentials a client presented, as it sent them, for a gateway in front of a remote
//! engine to present with every engine request the client's request makes.

use tonic::metadata::AsciiMetadataValue;
use undolog_types::OrgId;

/// The `authorization` a client sent, passed on to the engine. Never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Presented(Option<AsciiMetadataValue>);

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
    pub fn of(authorization: Option<&http::HeaderValue>) -> Presented {
        Presented(authorization.and_then(|v| {
            let mut value = AsciiMetadataValue::try_from(v.as_bytes()).ok()?;
            // Never indexed by HPACK, as the header itself is not.
            value.set_sensitive(true);
            Some(value)
        }))
    }

    /// The header, to put in an engine request's metadata.
    pub fn header(&self) -> Option<&AsciiMetadataValue> {
        self.0.as_ref()
    }

    /// The header's text, empty when none was sent.
    pub fn text(&self) -> &str {
        self.0
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

/// Whom an engine request acts for: the org it acts in (this process's engine), and the
/// credentials a remote engine reads that org from. Every engine request takes one, so none is
/// made for nobody.
#[derive(Debug, Clone, Copy)]
pub struct Acting<'a> {
    pub org: &'a OrgId,
    pub presented: &'a Presented,
}
