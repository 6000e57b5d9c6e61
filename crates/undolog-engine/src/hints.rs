//! Telling other processes on the same store what changed, and hearing what they changed.
//!
//! After each committed change the engine publishes its events as a hint (PostgreSQL
//! LISTEN/NOTIFY); every other engine on the database wakes its waiters — a held call whose
//! approval was given at another gateway, an identical call that finished there — and passes the
//! events on to its own subscribers (SSE). Waiters also poll, so a lost hint only costs time.
//!
//! One task per engine sends the hints, in commit order, at most one NOTIFY transaction every
//! [`MIN_GAP`]: changes committed meanwhile leave together in the next one, so under load a few
//! hundred NOTIFY transactions a second carry every event instead of one transaction per change
//! (each costs the database a commit and wakes every listening connection).

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast::error::RecvError, mpsc};
use undolog_store::{MAX_HINT_BYTES, Notifications};

use crate::{Event, engine::Inner};

#[derive(Debug, Serialize, Deserialize)]
struct Hint {
    /// The executor that made the change; it does not hear its own hints.
    from: String,
    events: Vec<Event>,
}

/// The shortest time between two sends: what a hint may wait for company.
const MIN_GAP: Duration = Duration::from_millis(5);

/// Starts the task that publishes what [`Engine::published`](crate::Engine) hands it: each item
/// is one commit's events. The task ends when the sender is dropped.
pub(crate) fn publisher(
    notifications: Arc<dyn Notifications>,
    from: String,
) -> mpsc::UnboundedSender<Vec<Event>> {
    let (sender, mut commits) = mpsc::unbounded_channel::<Vec<Event>>();
    tokio::spawn(async move {
        while let Some(first) = commits.recv().await {
            let next_send = tokio::time::Instant::now() + MIN_GAP;
            let mut events = first;
            while let Ok(more) = commits.try_recv() {
                events.extend(more);
            }
            if let Err(e) = notifications.publish(&encode(&from, &events)).await {
                tracing::debug!(error = %e, "hints not sent; other processes will poll");
            }
            tokio::time::sleep_until(next_send).await;
        }
    });
    sender
}

/// The hints that carry `events` in order, each within [`MAX_HINT_BYTES`]; an event too large for
/// any hint travels as a bare wake-up (listeners then read the log). No events: one wake-up.
pub(crate) fn encode(from: &str, events: &[Event]) -> Vec<String> {
    let from = serde_json::to_string(from).unwrap_or_default();
    let head = format!(r#"{{"from":{from},"events":["#);
    let tail = "]}";
    let room = MAX_HINT_BYTES - head.len() - tail.len();
    let mut hints = Vec::new();
    let mut body = String::new();
    let mut finish =
        |body: &mut String| hints.push(format!("{head}{}{tail}", std::mem::take(body)));
    for event in events {
        let Ok(json) = serde_json::to_string(event) else {
            continue;
        };
        if json.len() > room {
            if !body.is_empty() {
                finish(&mut body);
            }
            finish(&mut String::new());
            continue;
        }
        let comma = usize::from(!body.is_empty());
        if body.len() + comma + json.len() > room {
            finish(&mut body);
        }
        if !body.is_empty() {
            body.push(',');
        }
        body.push_str(&json);
    }
    if !body.is_empty() || events.is_empty() {
        finish(&mut body);
    }
    hints
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
                inner.runs.saw(&event);
                let _ = inner.events.send(event);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use undolog_types::{EffectId, OrgId, SessionId};

    use super::*;

    fn failed(error: &str) -> Event {
        Event::EffectFailed {
            org: OrgId::new("acme").unwrap(),
            session: SessionId::new("s-1").unwrap(),
            effect_id: EffectId::generate(),
            error: error.to_owned(),
        }
    }

    fn decoded(hints: &[String]) -> Vec<Hint> {
        hints
            .iter()
            .map(|h| {
                assert!(h.len() <= MAX_HINT_BYTES, "a hint of {} bytes", h.len());
                serde_json::from_str(h).unwrap()
            })
            .collect()
    }

    #[test]
    fn many_events_travel_in_order_in_as_few_hints_as_fit() {
        let events: Vec<Event> = (0..400).map(|n| failed(&format!("error {n}"))).collect();
        let hints = decoded(&encode("gateway-a", &events));
        assert!(hints.len() > 1 && hints.len() < 20, "{} hints", hints.len());
        assert!(hints.iter().all(|h| h.from == "gateway-a"));
        let carried: Vec<Event> = hints.into_iter().flat_map(|h| h.events).collect();
        assert_eq!(
            serde_json::to_value(&carried).unwrap(),
            serde_json::to_value(&events).unwrap()
        );
    }

    #[test]
    fn an_event_too_large_for_any_hint_becomes_a_bare_wake_up_between_its_neighbours() {
        let events = [
            failed("before"),
            failed(&"x".repeat(MAX_HINT_BYTES)),
            failed("after"),
        ];
        let hints = decoded(&encode("gateway-a", &events));
        let sizes: Vec<usize> = hints.iter().map(|h| h.events.len()).collect();
        assert_eq!(sizes, [1, 0, 1]);
    }

    #[test]
    fn a_change_without_events_still_wakes_the_others() {
        let hints = decoded(&encode("gateway-a", &[]));
        assert_eq!(hints.len(), 1);
        assert!(hints[0].events.is_empty());
    }
}
