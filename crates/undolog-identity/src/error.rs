//! Why credentials were refused, or could not be checked.

use undolog_types::Role;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No credential, or one nobody knows: 401.
    #[error("{0}")]
    Unauthorized(String),
    /// An access token that does not verify: 401 with `invalid_token`.
    #[error("{0}")]
    InvalidToken(String),
    /// A credential whose role does not include the one asked for: 403.
    #[error("{message}")]
    RoleMissing { needed: Role, message: String },
    /// The store could not be asked about a key.
    #[error("the store cannot be read: {0}")]
    Store(undolog_store::Error),
    /// A new key could not be stored.
    #[error("cannot store the key: {0}")]
    KeyNotStored(undolog_store::Error),
}
