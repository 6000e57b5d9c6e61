/// What the store can fail with. Messages say what to do; they never carry SQL.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no {what} {id} in this org")]
    NotFound { what: &'static str, id: String },
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// A write made on a row as the caller last saw it found the row changed since (see
    /// [`crate::Tx::replace_session`]): nothing of the transaction is kept.
    #[error("{what} {id} changed since it was read; read it again and decide anew")]
    Changed { what: &'static str, id: String },
    #[error("cannot open the store at {url}: {reason}")]
    Open { url: String, reason: String },
    #[error(
        "the database schema is at version {found}, newer than this binary understands ({supported}); \
         upgrade undolog"
    )]
    SchemaTooNew { found: i64, supported: i64 },
    #[error("a stored row cannot be read ({0}); the database was changed outside undolog")]
    Corrupt(String),
    #[error("{0} cannot be stored in PostgreSQL; remove it from the value")]
    Unstorable(&'static str),
    #[error(
        "the transaction was ended by an earlier error; nothing of it is kept, begin a new one"
    )]
    Aborted,
    #[error("the database failed: {0}; check that it is reachable and has disk space, then retry")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Error {
        Error::Database(Box::new(e))
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Error {
        Error::Database(Box::new(e))
    }
}

impl From<undolog_types::Error> for Error {
    fn from(e: undolog_types::Error) -> Error {
        Error::Corrupt(e.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::Corrupt(e.to_string())
    }
}
