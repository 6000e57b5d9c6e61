use std::time::Duration;

/// The engine's knobs. Defaults are safe for a single gateway.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Who this executor is, in leases; unique per process.
    pub executor_id: String,
    /// Largest accepted arguments, in bytes of canonical JSON.
    pub max_args_bytes: usize,
    /// How long an executor may take to commit or fail an effect before it counts as gone.
    pub lease: Duration,
    /// How long a request for approval stays open.
    pub approval_timeout: Duration,
    /// How long an identical call waits for the one in flight.
    pub wait_timeout: Duration,
    /// How often a waiter looks again without a wake-up (another process may finish the call).
    pub poll_interval: Duration,
    /// How many times a compensation is tried before the undo stops for a person.
    pub compensation_attempts: u32,
    /// The pause before the first retry of a compensation; doubled each time.
    pub compensation_backoff: Duration,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            executor_id: format!("undolog-{}", uuid::Uuid::now_v7()),
            max_args_bytes: 1024 * 1024,
            lease: Duration::from_secs(300),
            approval_timeout: Duration::from_secs(24 * 60 * 60),
            wait_timeout: Duration::from_secs(60),
            poll_interval: Duration::from_millis(200),
            compensation_attempts: 3,
            compensation_backoff: Duration::from_millis(200),
        }
    }
}
