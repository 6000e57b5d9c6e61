//! Cross-process hints: what one process publishes, every process on the same database hears.
//! On PostgreSQL this is LISTEN/NOTIFY; a backend that one process owns has none. Hints only
//! wake and inform: the tables hold the truth, so a lost hint costs a poll interval, never data.

use std::fmt::Debug;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::Result;

/// The largest payload a hint may carry (PostgreSQL refuses 8000 bytes and more).
pub const MAX_HINT_BYTES: usize = 7900;

#[async_trait]
pub trait Notifications: Send + Sync + Debug {
    /// Sends hints, in order, to every subscriber of the database, this process's included; one
    /// transaction carries them all. Payloads over [`MAX_HINT_BYTES`] are refused (then none is
    /// sent). Hints are not data: the transaction does not wait for its commit to reach the disk.
    async fn publish(&self, payloads: &[String]) -> Result<()>;

    /// Hints published from now on, by any process.
    fn subscribe(&self) -> broadcast::Receiver<String>;
}
