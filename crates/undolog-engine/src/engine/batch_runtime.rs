//! A thread of the engine's own for the leaders of `session_batches`, and the store on
//! connections that thread opened.
//!
//! Why: on PostgreSQL a session's batches run one after another (each holds the session's row
//! until its COMMIT), so a session's calls per second are the batches it runs per second, and
//! every moment between a batch's COMMIT and the next batch reaching the server is lost to all of
//! them. On the callers' runtime a leader heard its COMMIT late: a busy worker of a multi-threaded
//! tokio runtime looks for I/O only every 61 tasks it runs (`event_interval`). Here a connection's
//! reply wakes a thread that does nothing else: on the gateway's PostgreSQL row, 3–12% more calls
//! per second in alternating runs, the machine's idle time 18–22% → 15–19% (bench/lab/).
//!
//! A leader that yields to its callers between batches (`YieldJudge`: callers that come back at
//! once, as in a program that drives the engine in a loop) runs on the callers' runtime instead,
//! on the store's pool: there, yielding lets those callers run first, which a thread of its
//! own cannot do.

use std::sync::Arc;

use tokio::{runtime::Handle, sync::oneshot};
use undolog_store::Store;

use crate::Engine;

/// Connections of the batch thread's pool: one per batch under way.
const CONNECTIONS: u32 = crate::engine::session_batches::BATCHES_IN_FLIGHT as u32;

pub(crate) struct BatchRuntime {
    /// The batch thread's runtime.
    pub(crate) own: Handle,
    /// The runtime the engine was made on, where its callers run.
    pub(crate) callers: Handle,
    /// The store on connections the batch thread opens.
    store: Arc<dyn Store>,
    /// Dropped with the engine, which ends the thread.
    _stop: oneshot::Sender<()>,
}

impl std::fmt::Debug for BatchRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchRuntime").finish_non_exhaustive()
    }
}

impl BatchRuntime {
    /// Starts the thread, on the runtime the caller runs on; `None` (the leaders then run on
    /// that runtime) when the store has no connections of its own to give, or no thread starts.
    pub(crate) fn start(store: &Arc<dyn Store>) -> Option<BatchRuntime> {
        let callers = Handle::try_current().ok()?;
        let store = store.clone();
        let (started, start) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("undolog-batches".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        tracing::warn!(error = %e, "the batches run without a thread of their own");
                        return;
                    }
                };
                let own_store = {
                    let _inside = runtime.enter();
                    store.on_own_connections(CONNECTIONS)
                };
                let Some(own_store) = own_store else { return };
                if started.send((runtime.handle().clone(), own_store)).is_ok() {
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                }
            });
        if let Err(e) = thread {
            tracing::warn!(error = %e, "the batches run without a thread of their own");
            return None;
        }
        let (own, store) = start.recv().ok()?;
        Some(BatchRuntime {
            own,
            callers,
            store,
            _stop: stop,
        })
    }

    /// The store for a transaction begun now: on the batch thread, its own connections.
    pub(crate) fn store_here(&self) -> Option<&dyn Store> {
        let here = Handle::try_current().ok()?;
        (here.id() == self.own.id()).then_some(&*self.store)
    }
}

impl Engine {
    /// Runs `work` on a task of the runtime of the engine's callers, never on the batch thread.
    pub(crate) fn spawn_among_callers(&self, work: impl Future<Output = ()> + Send + 'static) {
        match &self.inner().batch_runtime {
            Some(runtime) => drop(runtime.callers.spawn(work)),
            None => drop(tokio::spawn(work)),
        }
    }

    /// The store to begin a transaction on from the thread this runs on: on the batch thread,
    /// its connections, so that none of the store's own is ever opened there.
    pub(crate) fn store_here(&self) -> &dyn Store {
        self.inner()
            .batch_runtime
            .as_ref()
            .and_then(|runtime| runtime.store_here())
            .unwrap_or(self.store())
    }
}
