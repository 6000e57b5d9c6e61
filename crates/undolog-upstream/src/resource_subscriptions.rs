//! Subscriptions to a resource's updates, made upstream for the clients that ask: a 2025-11-25
//! client's `resources/subscribe`, or a URI a 2026-07-28 listen stream names. The upstream is
//! asked once per URI, by the first subscriber, and told to stop when the last one goes.

// resources/subscribe is how a 2025-11-25 upstream sends updates; the gateway still asks it so.
#![allow(deprecated)]

use rmcp::{
    ErrorData,
    model::{SubscribeRequestParams, UnsubscribeRequestParams},
};
use tokio_util::sync::CancellationToken;

use super::{Era, ListenerId, Subscriber, Upstreams};

impl Upstreams {
    /// Subscribes `subscriber` to `uri` at the upstream that has it (the first of the
    /// candidates that accepts), over `era`'s connection.
    pub async fn subscribe(
        &self,
        uri: &str,
        subscriber: Subscriber,
        era: Era,
        cancel: &CancellationToken,
    ) -> Result<(), ErrorData> {
        let mut last = None;
        for index in self.resource_candidates(uri).await {
            let conn = self.connection(index);
            if !conn.relay.subscribe(uri, subscriber.clone()) {
                return Ok(()); // the upstream already sends this URI's updates
            }
            let request = SubscribeRequestParams::new(uri);
            match conn
                .request(
                    era,
                    cancel,
                    |peer| async move { peer.subscribe(request).await },
                )
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) => {
                    match &subscriber {
                        Subscriber::Listen(id, _) => conn.relay.unsubscribe_listener(uri, *id),
                        Subscriber::Session(_) => conn.relay.unsubscribe(uri),
                    };
                    last = Some(e.into_error_data());
                }
            }
        }
        Err(last.unwrap_or_else(|| {
            ErrorData::resource_not_found(format!("no upstream has {uri}"), None)
        }))
    }

    /// Drops a subscription to `uri`: listen stream `listener`'s, or (`None`) one 2025-11-25
    /// session's; the upstream is told when nobody is left.
    pub async fn unsubscribe(&self, uri: &str, listener: Option<ListenerId>, era: Era) {
        let never = CancellationToken::new();
        for index in self.resource_candidates(uri).await {
            let conn = self.connection(index);
            let none_left = match listener {
                Some(id) => conn.relay.unsubscribe_listener(uri, id),
                None => conn.relay.unsubscribe(uri),
            };
            if !none_left {
                continue;
            }
            let request = UnsubscribeRequestParams::new(uri);
            let sent = conn
                .request(era, &never, |peer| async move {
                    peer.unsubscribe(request).await
                })
                .await;
            if let Err(e) = sent {
                tracing::debug!(upstream = %conn.name(), error = %e, "unsubscribe not forwarded");
            }
        }
    }
}
