//! The credentials of the client being served, carried along its request's future (as its
//! trace context is), for a gateway in front of a remote engine to present with every engine
//! request the client's request makes.

use std::future::Future;

use undolog_identity::Presented;

tokio::task_local! {
    static PRESENTED: Presented;
}

/// Runs `work` with `presented` as the credentials every engine request it makes carries.
pub(crate) fn presenting<F: Future>(
    presented: Presented,
    work: F,
) -> impl Future<Output = F::Output> {
    PRESENTED.scope(presented, work)
}

/// `work`, carrying the credentials of the request that spawns it (for a task of its own).
pub(crate) fn carried<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let current = PRESENTED.try_with(Clone::clone).unwrap_or_default();
    presenting(current, work)
}

/// The credentials of the request this runs for (none outside one).
pub(super) fn current() -> Presented {
    PRESENTED.try_with(Clone::clone).unwrap_or_default()
}
