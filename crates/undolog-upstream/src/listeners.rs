//! The 2026-07-28 `subscriptions/listen` streams of this gateway's clients, and what reaches
//! them: a list of an upstream changed, or a resource an upstream serves was updated. Each
//! stream gets only what its accepted filter names (rmcp's `SubscriptionSink` enforces it, and
//! tags every notification with the stream's subscription id).
//!
//! Changes come from every upstream: over its session (2025-11-25 notifications, and
//! `resources/subscribe` for the URIs a stream asks for), and over its stateless connection
//! through a standing upstream `subscriptions/listen` (see `connection::watch`).

use std::sync::{
    Mutex,
    atomic::{AtomicU64, Ordering},
};

use rmcp::{
    Peer, RoleServer,
    model::{
        NotificationNoParam, ResourceUpdatedNotification, ResourceUpdatedNotificationParam,
        ServerNotification,
    },
    service::{SubscriptionSendError, SubscriptionSink},
};

/// What changed upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Tools,
    Prompts,
    Resources,
    /// The resource at this URI was updated.
    Resource(String),
}

impl Change {
    /// The change an upstream's notification reports, if it reports one.
    pub fn of(notification: &ServerNotification) -> Option<Change> {
        Some(match notification {
            ServerNotification::ToolListChangedNotification(_) => Change::Tools,
            ServerNotification::PromptListChangedNotification(_) => Change::Prompts,
            ServerNotification::ResourceListChangedNotification(_) => Change::Resources,
            ServerNotification::ResourceUpdatedNotification(updated) => {
                Change::Resource(updated.params.uri.clone())
            }
            _ => return None,
        })
    }

    /// The notification a client gets (fresh: nothing of the upstream's `_meta` goes along).
    fn notification(&self) -> ServerNotification {
        match self {
            Change::Tools => {
                ServerNotification::ToolListChangedNotification(NotificationNoParam::default())
            }
            Change::Prompts => {
                ServerNotification::PromptListChangedNotification(NotificationNoParam::default())
            }
            Change::Resources => {
                ServerNotification::ResourceListChangedNotification(NotificationNoParam::default())
            }
            Change::Resource(uri) => ServerNotification::ResourceUpdatedNotification(
                ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(uri)),
            ),
        }
    }
}

/// Tells one client listen stream from the others.
pub type ListenerId = u64;

/// Every client listen stream open on this gateway, and every 2025-11-25 session (which hears
/// of list changes on its own stream).
#[derive(Debug, Default)]
pub struct Listeners {
    next: AtomicU64,
    streams: Mutex<Vec<(ListenerId, SubscriptionSink)>>,
    sessions: Mutex<Vec<Peer<RoleServer>>>,
}

impl Listeners {
    /// Adds a stream; it is dropped by [`Listeners::remove`] or once it is found closed.
    pub fn add(&self, sink: SubscriptionSink) -> ListenerId {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().push((id, sink));
        id
    }

    pub fn remove(&self, id: ListenerId) {
        self.lock().retain(|(other, _)| *other != id);
    }

    /// Adds a 2025-11-25 session (once it is initialized); it is dropped once it is closed.
    pub fn add_session(&self, peer: Peer<RoleServer>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.retain(|p| !p.is_transport_closed());
        sessions.push(peer);
    }

    /// Sends `change` to every stream whose filter takes it, and a list change to every
    /// session too (a session's resource updates go to it as a subscriber, not from here).
    pub async fn broadcast(&self, change: &Change) {
        let streams: Vec<(ListenerId, SubscriptionSink)> = self.lock().clone();
        let notification = change.notification();
        if !matches!(change, Change::Resource(_)) {
            let sessions: Vec<Peer<RoleServer>> = {
                let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
                sessions.retain(|p| !p.is_transport_closed());
                sessions.clone()
            };
            for peer in sessions {
                if let Err(e) = peer.send_notification(notification.clone()).await {
                    tracing::debug!(error = %e, "list change not delivered to a session");
                }
            }
        }
        for (id, sink) in streams {
            match sink.send(notification.clone()).await {
                Ok(()) | Err(SubscriptionSendError::NotificationNotAccepted(_)) => {}
                Err(SubscriptionSendError::SubscriptionClosed) => self.remove(id),
                Err(e) => tracing::debug!(listener = id, error = %e, "change not delivered"),
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(ListenerId, SubscriptionSink)>> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }
}
