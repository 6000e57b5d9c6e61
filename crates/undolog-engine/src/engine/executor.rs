//! This process as an executor: its heartbeat in the store, its health, and the lease it keeps on
//! the calls it runs.
//!
//! A gateway starts with [`Engine::start_executor`]: the store records it, takes every earlier
//! process of the same name for dead (it restarted: whatever the last one was running is in doubt
//! at once), and a task beats every `heartbeat`. Each beat also takes for dead any executor silent
//! for `executor_timeout` (another gateway on a shared store) and ends its leases. While a tool
//! runs, [`Engine::while_running`] renews the call's lease every third of `lease`, so the lease
//! can be seconds long: it runs out only when its executor is gone.

use std::{future::Future, pin::pin, time::Duration};

use undolog_store::{Beat, BeatReport};
use undolog_types::{EffectId, LeaseToken, OrgId, Timestamp};

use crate::{Engine, Error};

/// Whether the store takes this executor's writes, as its heartbeats found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// Why the last heartbeat did not reach the store (its error); `None` while it did, or
    /// none was due yet.
    pub reason: Option<String>,
    /// When the store last took a heartbeat.
    pub last_beat: Option<Timestamp>,
}

impl Health {
    pub(crate) fn starting() -> Health {
        Health {
            reason: None,
            last_beat: None,
        }
    }
}

impl Engine {
    /// Records this process as an executor named `name` (stable across its restarts: host and
    /// listen address), ending the leases of its previous incarnation, and starts its heartbeat.
    /// Call once, at start-up, before serving.
    pub async fn start_executor(&self, name: &str) -> Result<BeatReport, Error> {
        let report = self.beat(name, true).await?;
        if !report.dead.is_empty() {
            tracing::warn!(
                executors = ?report.dead,
                leases_ended = report.leases_ended,
                "the previous gateway of this name is gone; the calls it was running are in doubt \
                 (GET /v1/effects/in_doubt)"
            );
        }
        let engine = self.downgrade();
        let name = name.to_owned();
        let every = self.config().heartbeat;
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let Some(engine) = engine.upgrade().map(Engine::from_inner) else {
                    return; // the engine is gone: so is this executor
                };
                engine.beat_once(&name).await;
            }
        });
        Ok(report)
    }

    /// One heartbeat; failures are kept as the engine's health, never raised.
    async fn beat_once(&self, name: &str) {
        match self.beat(name, false).await {
            Ok(report) => {
                if report.was_taken_for_dead {
                    tracing::error!(
                        "this gateway was silent long enough to be taken for dead; the calls it \
                         was running then are in doubt"
                    );
                }
                if !report.dead.is_empty() {
                    tracing::warn!(
                        executors = ?report.dead,
                        leases_ended = report.leases_ended,
                        "gateways stopped beating; the calls they were running are in doubt"
                    );
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "heartbeat not recorded: the store is unavailable")
            }
        }
    }

    async fn beat(&self, name: &str, starting: bool) -> Result<BeatReport, Error> {
        let now = self.now();
        let window = self.config().executor_timeout;
        let beat = Beat {
            executor: &self.config().executor_id,
            name,
            at: now,
            stale_before: Timestamp(now.as_millis() - duration_ms(window)),
            starting,
        };
        let result = self.store().beat(&beat).await;
        {
            let mut health = self
                .inner()
                .health
                .lock()
                .expect("health is never poisoned");
            match &result {
                Ok(_) => {
                    *health = Health {
                        reason: None,
                        last_beat: Some(now),
                    };
                }
                Err(e) => {
                    health.reason = Some(e.to_string());
                }
            }
        }
        let report = result?;
        if report.leases_ended > 0 {
            self.published(Vec::new()); // waiters for those calls look again, and find them in doubt
        }
        Ok(report)
    }

    /// Whether the store took this executor's last heartbeat, and why not.
    pub fn health(&self) -> Health {
        self.inner()
            .health
            .lock()
            .expect("health is never poisoned")
            .clone()
    }

    /// Runs `work` (the tool of `effect`, which this executor was told to execute, with `token`),
    /// renewing the effect's lease every third of the lease while it runs. A renewal that fails
    /// is logged and tried again at the next tick; `work` is never interrupted.
    pub async fn while_running<T>(
        &self,
        org: &OrgId,
        effect: EffectId,
        token: &LeaseToken,
        work: impl Future<Output = T>,
    ) -> T {
        renewing(self.config().lease, effect, work, || {
            self.renew_lease(org, effect, token)
        })
        .await
    }
}

/// Runs `work`, calling `renew` every third of `lease` while it runs. A renewal that fails is
/// logged and tried again at the next tick; `work` is never interrupted. (The engine renews its
/// own leases so; a gateway in front of an engine elsewhere, through it.)
pub async fn renewing<T, E: std::fmt::Display, Renewed: Future<Output = Result<Timestamp, E>>>(
    lease: Duration,
    effect: EffectId,
    work: impl Future<Output = T>,
    renew: impl Fn() -> Renewed,
) -> T {
    let every = (lease / 3).max(Duration::from_millis(10));
    let mut work = pin!(work);
    let mut ticks = tokio::time::interval(every);
    ticks.tick().await;
    loop {
        tokio::select! {
            done = &mut work => return done,
            _ = ticks.tick() => {
                if let Err(e) = renew().await {
                    tracing::warn!(%effect, error = %e, "the call's lease could not be renewed");
                }
            }
        }
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
