//! The standing upstream `subscriptions/listen` of a 2026-07-28 connection, for its list changes.

use std::{sync::Arc, time::Duration};

use rmcp::model::SubscriptionFilter;
use tokio_util::sync::CancellationToken;

use super::{Connection, Era};
use crate::listeners::{Change, Listeners};

/// How long a broken upstream listen waits before it listens again.
const RELISTEN_AFTER: Duration = Duration::from_secs(1);

/// Keeps a `subscriptions/listen` open on `conn`'s stateless connection for its list changes
/// (2026-07-28 servers send them nowhere else) and hands each to `listeners`, until `stop`.
/// A stream that ends is opened again.
pub(crate) async fn watch(
    conn: Arc<Connection>,
    listeners: Arc<Listeners>,
    stop: CancellationToken,
) {
    let filter = SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .resources_list_changed()
        .build();
    while !stop.is_cancelled() {
        let listened = async {
            let peer = conn.peer(Era::Stateless).await.map_err(|e| e.to_string())?;
            let mut subscription = peer
                .listen(filter.clone())
                .await
                .map_err(|e| e.to_string())?;
            while let Some(notification) = subscription.next().await.map_err(|e| e.to_string())? {
                if let Some(change) = Change::of(&notification) {
                    listeners.broadcast(&change).await;
                }
            }
            Ok::<(), String>(())
        };
        tokio::select! {
            () = stop.cancelled() => return,
            ended = listened => {
                if let Err(e) = ended {
                    tracing::debug!(upstream = %conn.name(), error = %e, "upstream listen ended");
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(RELISTEN_AFTER) => {}
        }
    }
}
