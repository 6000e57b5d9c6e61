use std::time::Duration;

/// The engine's knobs. Defaults are safe for a single gateway.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Who this executor is, in leases; unique per process.
    pub executor_id: String,
    /// Largest accepted arguments, in bytes of canonical JSON.
    pub max_args_bytes: usize,
    /// How long an effect's lease lasts: the executor renews it while the tool runs
    /// ([`crate::Engine::while_running`]), so a lease that runs out means the executor is gone.
    pub lease: Duration,
    /// How long an undo's claim on its session lasts (renewed at every step). The claim of an
    /// executor taken for dead ends at once.
    pub undo_claim: Duration,
    /// How often this executor records that it is alive ([`crate::Engine::start_executor`]).
    pub heartbeat: Duration,
    /// An executor silent this long is taken for dead: its leases end, its calls are in doubt.
    pub executor_timeout: Duration,
    /// How long a request for approval stays open.
    pub approval_timeout: Duration,
    /// How long an identical call waits for the one in flight.
    pub wait_timeout: Duration,
    /// How often a waiter looks again without a wake-up (another process may finish the call).
    pub poll_interval: Duration,
    /// How long this engine goes on sending hints of its changes to other engines on the store
    /// (PostgreSQL NOTIFY) after it last heard one; it says hello every third of this. An engine
    /// alone on its store sends nothing but its hellos.
    pub peer_silence: Duration,
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
            lease: Duration::from_secs(10),
            undo_claim: Duration::from_secs(300),
            heartbeat: Duration::from_secs(1),
            executor_timeout: Duration::from_secs(5),
            approval_timeout: Duration::from_secs(24 * 60 * 60),
            wait_timeout: Duration::from_secs(60),
            poll_interval: Duration::from_millis(200),
            peer_silence: Duration::from_secs(6),
            compensation_attempts: 3,
            compensation_backoff: Duration::from_millis(200),
        }
    }
}
