//! Choosing a backend from a store URL.

use std::{fmt, path::PathBuf, str::FromStr, sync::Arc};

use crate::{
    Error, PostgresOptions, PostgresStore, Result, SqliteOptions, SqliteStore, Store,
    postgres::redacted,
};

/// Where the log lives: `sqlite://PATH`, `sqlite::memory:`, a bare file path, or
/// `postgres://…` (also `postgresql://…`).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreUrl {
    SqliteFile(PathBuf),
    SqliteMemory,
    /// The whole URL, as given; it may carry a password, so `Debug` hides it.
    Postgres(String),
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::SqliteFile(path) => f.debug_tuple("SqliteFile").field(path).finish(),
            StoreUrl::SqliteMemory => f.write_str("SqliteMemory"),
            StoreUrl::Postgres(url) => f.debug_tuple("Postgres").field(&redacted(url)).finish(),
        }
    }
}

impl FromStr for StoreUrl {
    type Err = Error;

    fn from_str(url: &str) -> Result<StoreUrl> {
        let unsupported = |why: &str| Error::Open {
            url: redacted(url),
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
        if let Some(rest) = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
        {
            if rest.is_empty() {
                return Err(unsupported(
                    "no server after postgres://; write postgres://USER@HOST:PORT/DATABASE",
                ));
            }
            return Ok(StoreUrl::Postgres(url.to_owned()));
        }
        if url.contains("://") {
            return Err(unsupported(
                "unknown scheme; use sqlite://PATH, sqlite::memory: or postgres://USER@HOST/DATABASE",
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
    open_with(url, &PoolSettings::default()).await
}

/// Connection pool settings from the configuration; unset ones keep the backend's defaults. The
/// embedded store always keeps one connection (SQLite admits one writer at a time).
#[derive(Debug, Clone, Default)]
pub struct PoolSettings {
    pub max_connections: Option<u32>,
    pub min_connections: Option<u32>,
    pub acquire_timeout: Option<std::time::Duration>,
}

/// Opens the store a URL names with these pool settings, applying migrations.
pub async fn open_with(url: &StoreUrl, pool: &PoolSettings) -> Result<Arc<dyn Store>> {
    Ok(match url {
        StoreUrl::SqliteFile(path) => Arc::new(SqliteStore::open(SqliteOptions::file(path)).await?),
        StoreUrl::SqliteMemory => Arc::new(SqliteStore::in_memory().await?),
        StoreUrl::Postgres(url) => {
            let mut options = PostgresOptions::new(url);
            if let Some(max) = pool.max_connections {
                options.max_connections = max;
            }
            if let Some(min) = pool.min_connections {
                options.min_connections = min;
            }
            if let Some(timeout) = pool.acquire_timeout {
                options.acquire_timeout = timeout;
            }
            Arc::new(PostgresStore::open(options).await?)
        }
    })
}
