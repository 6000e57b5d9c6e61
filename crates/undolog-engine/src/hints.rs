//! Telling other processes on the same store what changed, and hearing what they changed.
//!
//! After each committed change the engine publishes its events as a hint (PostgreSQL
//! LISTEN/NOTIFY); every other engine on the database wakes its waiters — a held call whose
//! approval was given at another gateway, an identical call that finished there — and passes the
//! events on to its own subscribers (SSE). Waiters also poll, so a lost hint only costs time.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use undolog_store::{MAX_HINT_BYTES, Notifications};

use crate::{Event, engine::Inner};

#[derive(Debug, Serialize, Deserialize)]
struct Hint {
    /// The executor that made the change; it does not hear its own hints.
    from: String,
    events: Vec<Event>,
}

/// The text to publish for `events`; past the size limit, a bare wake-up.
pub(crate) fn encode(from: &str, events: &[Event]) -> String {
    let hint = |events: &[Event]| {
        serde_json::to_string(&Hint {
            from: from.to_owned(),
            events: events.to_vec(),
        })
        .unwrap_or_default()
    };
    let full = hint(events);
    if full.len() <= MAX_HINT_BYTES {
        full
    } else {
        hint(&[])
    }
}

/// Relays other processes' hints into this engine until the engine is dropped.
pub(crate) fn listen(inner: Weak<Inner>, notifications: &Arc<dyn Notifications>, me: String) {
    let mut hints = notifications.subscribe();
    tokio::spawn(async move {
        loop {
            let received = tokio::time::timeout(Duration::from_secs(5), hints.recv()).await;
            let Some(inner) = inner.upgrade() else {
                break;
            };
            let payload = match received {
                Err(_) => continue, // quiet: look again whether the engine still exists
                Ok(Ok(payload)) => payload,
                Ok(Err(RecvError::Lagged(_))) => {
                    inner.changed.notify_waiters();
                    continue;
                }
                Ok(Err(RecvError::Closed)) => break,
            };
            let Ok(hint) = serde_json::from_str::<Hint>(&payload) else {
                tracing::debug!(payload, "ignoring a hint this version does not read");
                continue;
            };
            if hint.from == me {
                continue;
            }
            inner.changed.notify_waiters();
            for event in hint.events {
                let _ = inner.events.send(event);
            }
        }
    });
}
