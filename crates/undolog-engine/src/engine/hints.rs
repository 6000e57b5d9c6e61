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
//!
//! Hints are sent only while another engine is there to hear them ([`Peers`]). Every engine says
//! hello (a hint without events, which wakes nobody) when it starts and every third of
//! `peer_silence`; one that has heard no other engine for `peer_silence` sends its hellos and
//! nothing else, so a gateway alone on its database spends nothing on hints. It counts as having
//! heard one when it starts, so an engine joining others sends its hints from its first change,
//! and those already there hear its first hello at once. An engine skips its own hints by their
//! first bytes, without reading their events.

use std::{
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::{
    sync::{broadcast::error::RecvError, mpsc},
    time::{Instant, MissedTickBehavior},
};
use undolog_store::{MAX_HINT_BYTES, Notifications};

use crate::{Event, engine::Inner};

#[derive(Debug, Serialize, Deserialize)]
struct Hint {
    /// The executor that made the change; it does not hear its own hints.
    from: String,
    /// A hello: the sender is there, and nothing changed.
    #[serde(default)]
    hello: bool,
    events: Vec<Event>,
}

/// The shortest time between two sends: what a hint may wait for company.
const MIN_GAP: Duration = Duration::from_millis(5);

/// Whether another engine on the store has been heard lately: hints go out only while one has.
#[derive(Debug)]
struct Peers {
    silence: Duration,
    /// When another engine was last heard (its hint or hello); the engine's start counts as one.
    last_heard: Mutex<Instant>,
}

/// Its methods take the time from the caller (`Instant::now()` in the engine), so the window is
/// tested without waiting for it.
impl Peers {
    fn new(silence: Duration, started: Instant) -> Peers {
        Peers {
            silence,
            last_heard: Mutex::new(started),
        }
    }

    fn heard(&self, now: Instant) {
        *self.lock() = now;
    }

    /// Another engine was heard less than `silence` before `now` (or this one started less than
    /// that before).
    fn present(&self, now: Instant) -> bool {
        now.saturating_duration_since(*self.lock()) < self.silence
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.last_heard.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// This engine's side of the hints: the publishing task's queue, and who is there to hear.
#[derive(Debug)]
pub(crate) struct Hints {
    commits: mpsc::UnboundedSender<Vec<Event>>,
    peers: Peers,
}

impl Hints {
    /// Starts the task that publishes what [`Hints::publish`] hands it (each item is one commit's
    /// events) and says hello every third of `silence`. The task ends when this is dropped.
    pub(crate) fn start(
        notifications: Arc<dyn Notifications>,
        from: String,
        silence: Duration,
    ) -> Hints {
        let (commits, mut queued) = mpsc::unbounded_channel::<Vec<Event>>();
        tokio::spawn(async move {
            let hello = hello(&from);
            let mut hellos = tokio::time::interval((silence / 3).max(Duration::from_millis(1)));
            hellos.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                let first = tokio::select! {
                    commit = queued.recv() => match commit {
                        Some(events) => events,
                        None => break,
                    },
                    _ = hellos.tick() => {
                        send(&*notifications, std::slice::from_ref(&hello)).await;
                        continue;
                    }
                };
                let next_send = Instant::now() + MIN_GAP;
                let mut events = first;
                while let Ok(more) = queued.try_recv() {
                    events.extend(more);
                }
                send(&*notifications, &encode(&from, &events)).await;
                tokio::time::sleep_until(next_send).await;
            }
        });
        Hints {
            commits,
            peers: Peers::new(silence, Instant::now()),
        }
    }

    /// Queues one commit's events for the other engines; nothing while none has been heard.
    pub(crate) fn publish(&self, events: &[Event]) {
        if self.peers.present(Instant::now()) {
            let _ = self.commits.send(events.to_vec()); // the task ends only with the engine
        }
    }
}

async fn send(notifications: &dyn Notifications, payloads: &[String]) {
    if let Err(e) = notifications.publish(payloads).await {
        tracing::debug!(error = %e, "hints not sent; other processes will poll");
    }
}

/// How every hint of the executor `from` begins: an engine knows its own by these bytes.
fn own_prefix(from: &str) -> String {
    let from = serde_json::to_string(from).unwrap_or_default();
    format!(r#"{{"from":{from},"#)
}

/// The hint that says `from` is there.
fn hello(from: &str) -> String {
    format!(r#"{}"hello":true,"events":[]}}"#, own_prefix(from))
}

/// The hints that carry `events` in order, each within [`MAX_HINT_BYTES`]; an event too large for
/// any hint travels as a bare wake-up (listeners then read the log). No events: one wake-up.
pub(crate) fn encode(from: &str, events: &[Event]) -> Vec<String> {
    let head = format!(r#"{}"events":["#, own_prefix(from));
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
pub(crate) fn listen(inner: Weak<Inner>, notifications: &Arc<dyn Notifications>, me: &str) {
    let mut hints = notifications.subscribe();
    let (own, me) = (own_prefix(me), me.to_owned());
    tokio::spawn(async move {
        loop {
            let received = tokio::time::timeout(Duration::from_secs(5), hints.recv()).await;
            let Some(inner) = inner.upgrade() else {
                break;
            };
            let peers = inner.hints.as_ref().map(|hints| &hints.peers);
            let payload = match received {
                Err(_) => continue, // quiet: look again whether the engine still exists
                Ok(Ok(payload)) => payload,
                // Hints were lost, perhaps other engines': as if one was heard.
                Ok(Err(RecvError::Lagged(_))) => {
                    if let Some(peers) = peers {
                        peers.heard(Instant::now());
                    }
                    inner.changed.notify_waiters();
                    continue;
                }
                Ok(Err(RecvError::Closed)) => break,
            };
            if payload.starts_with(&own) {
                continue;
            }
            let Ok(hint) = serde_json::from_str::<Hint>(&payload) else {
                tracing::debug!(payload, "ignoring a hint this version does not read");
                continue;
            };
            if hint.from == me {
                continue;
            }
            if let Some(peers) = peers {
                peers.heard(Instant::now());
            }
            if hint.hello {
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
    fn hints_go_out_from_the_start_and_then_while_another_engine_was_heard_lately() {
        let mut now = Instant::now();
        let peers = Peers::new(Duration::from_secs(6), now);
        // (another engine heard now, then how many seconds pass, whether hints go out)
        let steps = [
            (false, 5, true),  // just started: others may be there
            (false, 2, false), // 7 s and nobody heard
            (true, 5, true),   // another engine's hello
            (false, 2, false), // silent for 7 s
        ];
        for (n, (heard, secs, present)) in steps.into_iter().enumerate() {
            if heard {
                peers.heard(now);
            }
            now += Duration::from_secs(secs);
            assert_eq!(peers.present(now), present, "step {n}");
        }
    }

    #[test]
    fn an_engine_knows_its_own_hints_by_their_first_bytes_and_no_one_elses() {
        let own = own_prefix("gateway-a");
        // (hint, whether it is gateway-a's)
        let cases = [
            (encode("gateway-a", &[failed("x")]).remove(0), true),
            (hello("gateway-a"), true),
            (encode("gateway-ab", &[failed("x")]).remove(0), false),
            (hello("gateway-"), false),
            (hello("gateway-a\"\","), false),
            (encode("gateway-b", &[]).remove(0), false),
        ];
        for (hint, mine) in cases {
            assert_eq!(hint.starts_with(&own), mine, "{hint}");
        }
    }

    #[test]
    fn a_hello_is_read_as_a_hint_with_no_events_and_a_change_as_no_hello() {
        let hello: Hint = serde_json::from_str(&hello("gateway-a")).unwrap();
        assert!(hello.hello && hello.events.is_empty() && hello.from == "gateway-a");
        let change = decoded(&encode("gateway-a", &[failed("x")]));
        assert!(!change[0].hello);
    }

    #[test]
    fn a_change_without_events_still_wakes_the_others() {
        let hints = decoded(&encode("gateway-a", &[]));
        assert_eq!(hints.len(), 1);
        assert!(hints[0].events.is_empty());
    }
}
