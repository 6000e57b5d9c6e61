//! The storage contract of the effect log and its backends.
//!
//! [`Store`] opens a transaction bound to one org; every read and write goes through a [`Tx`], and
//! nothing is visible to others until [`Tx::commit`]. An engine operation is one transaction, so a
//! crash leaves either all of it or none. The embedded backend is SQLite ([`SqliteStore`]); the
//! shared one is PostgreSQL ([`PostgresStore`]), where row-level security enforces the org. The
//! [`conformance`] module holds the cases every backend must pass.
//!
//! Invariant: only this crate knows SQL.

pub mod conformance;
mod contract;
mod error;
mod executors;
mod notify;
mod open;
mod postgres;
mod records;
mod rows;
#[cfg(any(test, feature = "scratch"))]
pub mod scratch;
mod small_disk;
mod sqlite;

pub use contract::{Beat, BeatReport, EffectLookup, Store, Tx};
pub use error::Error;
pub use notify::{MAX_HINT_BYTES, Notifications};
pub use open::{PoolSettings, StoreUrl, open, open_with};
pub use postgres::{PostgresOptions, PostgresStore};
pub use records::{ApiKey, Approval, Compensation, Effect, Lease, Session, Snapshot};
pub use small_disk::SmallDisk;
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous, commit_on_this_thread};

pub type Result<T, E = Error> = std::result::Result<T, E>;
