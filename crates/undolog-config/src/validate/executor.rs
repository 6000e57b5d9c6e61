//! The `[executor]` section: this process's name, its leases and when a silent peer is dead.

use super::*;

/// The shortest `executor.peer_silence_ms`: a hello every third of a second at most.
const MIN_PEER_SILENCE: Duration = Duration::from_secs(1);

pub(super) fn executor(raw: &crate::raw::RawExecutor) -> Result<ExecutorSettings, Error> {
    // The defaults are the engine's own: one place says what they are.
    let defaults = undolog_engine::EngineConfig::default();
    let ms = |key: &str, value: Option<u64>, default: Duration| {
        let default = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
        positive(key, value, default).map(Duration::from_millis)
    };
    let lease = ms("executor.lease_ms", raw.lease_ms, defaults.lease)?;
    let heartbeat = ms(
        "executor.heartbeat_ms",
        raw.heartbeat_ms,
        defaults.heartbeat,
    )?;
    let dead_after = ms(
        "executor.dead_after_ms",
        raw.dead_after_ms,
        defaults.executor_timeout,
    )?;
    let peer_silence = ms(
        "executor.peer_silence_ms",
        raw.peer_silence_ms,
        defaults.peer_silence,
    )?;
    if peer_silence < MIN_PEER_SILENCE {
        return Err(Error::key(
            "executor.peer_silence_ms",
            format!(
                "is {} ms: the gateway would say hello on its store every {} ms; make it at least \
                 {} ms",
                peer_silence.as_millis(),
                (peer_silence / 3).as_millis(),
                MIN_PEER_SILENCE.as_millis()
            ),
        ));
    }
    if dead_after < heartbeat * 3 {
        return Err(Error::key(
            "executor.dead_after_ms",
            format!(
                "is {} ms, less than three heartbeats ({} ms): a live gateway would be taken for \
                 dead; make it at least {} ms",
                dead_after.as_millis(),
                heartbeat.as_millis(),
                (heartbeat * 3).as_millis()
            ),
        ));
    }
    if lease < heartbeat * 3 {
        return Err(Error::key(
            "executor.lease_ms",
            format!(
                "is {} ms, less than three heartbeats ({} ms); make it at least {} ms",
                lease.as_millis(),
                heartbeat.as_millis(),
                (heartbeat * 3).as_millis()
            ),
        ));
    }
    let name = match &raw.name {
        Some(name) if name.trim().is_empty() => {
            return Err(Error::key(
                "executor.name",
                "is empty; leave it out for the default",
            ));
        }
        name => name.clone(),
    };
    Ok(ExecutorSettings {
        name,
        lease,
        heartbeat,
        dead_after,
        peer_silence,
    })
}
