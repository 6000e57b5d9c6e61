//! Choosing a backend from a store URL.

use std::{path::PathBuf, str::FromStr, sync::Arc};

use crate::{Error, Result, SqliteOptions, SqliteStore, Store};

/// Where the log lives: `sqlite://PATH`, `sqlite::memory:`, or a bare file path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    SqliteFile(PathBuf),
    SqliteMemory,
}

impl FromStr for StoreUrl {
    type Err = Error;

    fn from_str(url: &str) -> Result<StoreUrl> {
        let unsupported = |why: &str| Error::Open {
            url: url.to_owned(),
            reason: why.to_owned(),
        };
        if url == "sqlite::memory:" {
            return Ok(StoreUrl::SqliteMemory);
        }
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(unsupported(
                    "no file path after sqlite://; write sqlite://undolog.db",
                ));
            }
            return Ok(StoreUrl::SqliteFile(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Err(unsupported(
                "this build has no PostgreSQL backend yet; use sqlite://PATH",
            ));
        }
        if url.contains("://") {
            return Err(unsupported(
                "unknown scheme; use sqlite://PATH or sqlite::memory:",
            ));
        }
        if url.is_empty() {
            return Err(unsupported("empty store URL; use sqlite://PATH"));
        }
        Ok(StoreUrl::SqliteFile(PathBuf::from(url)))
    }
}

/// Opens the store a URL names, applying migrations.
pub async fn open(url: &StoreUrl) -> Result<Arc<dyn Store>> {
    Ok(match url {
        StoreUrl::SqliteFile(path) => Arc::new(SqliteStore::open(SqliteOptions::file(path)).await?),
        StoreUrl::SqliteMemory => Arc::new(SqliteStore::in_memory().await?),
    })
}
