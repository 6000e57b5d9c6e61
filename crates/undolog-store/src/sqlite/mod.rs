//! The embedded backend: one SQLite file in WAL mode, or memory for tests.
//!
//! Every transaction starts with `BEGIN IMMEDIATE`, which takes SQLite's single write lock up front:
//! transactions never interleave, so [`crate::Tx::lock`] needs no lock of its own, and a
//! read-then-write transaction can never fail on a stale snapshot.

mod connection;
mod executors;
mod immediate;
mod keys;
mod migrate;
mod rows;
mod tx;

use std::{path::PathBuf, time::Duration};

use async_trait::async_trait;
use undolog_types::{OrgId, Timestamp};

use crate::{ApiKey, Beat, BeatReport, Result, Store, Tx};
use connection::Shared;
pub use immediate::commit_on_this_thread;

/// When SQLite syncs the write-ahead log to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Every commit is on disk before it returns: nothing committed is lost on power failure.
    #[default]
    Full,
    /// Commits survive a crash of the process but may be lost on power failure.
    Normal,
}

/// Where and how to open the embedded store.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// The database file; `None` keeps everything in memory (tests).
    pub path: Option<PathBuf>,
    pub synchronous: Synchronous,
    /// How long a transaction waits for another process's hold on the database before it fails.
    pub busy_timeout: Duration,
}

impl SqliteOptions {
    pub fn file(path: impl Into<PathBuf>) -> SqliteOptions {
        SqliteOptions {
            path: Some(path.into()),
            ..SqliteOptions::in_memory()
        }
    }

    pub fn in_memory() -> SqliteOptions {
        SqliteOptions {
            path: None,
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(30),
        }
    }
}

/// The embedded effect log, on one connection: SQLite admits one writer at a time, and every
/// transaction here writes, so callers queue for the connection in order.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    conn: Shared,
}

impl SqliteStore {
    /// Opens (creating if needed) the database and applies pending migrations.
    pub async fn open(options: SqliteOptions) -> Result<SqliteStore> {
        let conn = Shared::open(options)?;
        migrate::apply(&conn).await?;
        Ok(SqliteStore { conn })
    }

    /// A fresh in-memory store.
    pub async fn in_memory() -> Result<SqliteStore> {
        SqliteStore::open(SqliteOptions::in_memory()).await
    }

    /// The schema version this database is at.
    pub async fn schema_version(&self) -> Result<i64> {
        let mut held = self.conn.take().await?;
        Shared::with(&mut held, migrate::current_version).await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn begin(&self, org: &OrgId) -> Result<Box<dyn Tx>> {
        let tx = immediate::Immediate::begin(&self.conn).await?;
        Ok(Box::new(tx::SqliteTx::new(tx, org.clone())))
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn one_writer_at_a_time(&self) -> bool {
        true
    }

    async fn insert_api_key(&self, key: &ApiKey) -> Result<()> {
        keys::insert(&self.conn, key).await
    }

    async fn api_key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>> {
        keys::by_hash(&self.conn, hash).await
    }

    async fn has_api_keys(&self) -> Result<bool> {
        keys::any(&self.conn).await
    }

    async fn api_keys(&self, org: Option<&OrgId>) -> Result<Vec<ApiKey>> {
        keys::list(&self.conn, org).await
    }

    async fn revoke_api_key(&self, id: &str, at: Timestamp) -> Result<Option<ApiKey>> {
        keys::revoke(&self.conn, id, at).await
    }

    async fn beat(&self, beat: &Beat<'_>) -> Result<BeatReport> {
        let mut tx = immediate::Immediate::begin(&self.conn).await?;
        let report = executors::beat(tx.conn()?, beat)?;
        tx.commit(true).await?;
        Ok(report)
    }
}
