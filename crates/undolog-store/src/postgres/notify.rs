//! LISTEN/NOTIFY on the channel `undolog_events`. The listening connection is opened on the first
//! subscription and closed once nobody subscribes any more, so a store that only stores holds no
//! extra connection.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{PgPool, postgres::PgListener};
use tokio::sync::{Mutex, broadcast};

use super::literal::render;
use crate::{Error, MAX_HINT_BYTES, Notifications, Result};

const CHANNEL: &str = "undolog_events";

#[derive(Debug)]
pub(super) struct PgNotifications {
    pool: PgPool,
    hints: broadcast::Sender<String>,
    listening: Arc<Mutex<bool>>,
}

impl PgNotifications {
    pub(super) fn new(pool: PgPool) -> PgNotifications {
        PgNotifications {
            pool,
            hints: broadcast::channel(1024).0,
            listening: Arc::default(),
        }
    }

    fn start_listening(&self) {
        let (pool, hints, listening) = (
            self.pool.clone(),
            self.hints.clone(),
            self.listening.clone(),
        );
        tokio::spawn(async move {
            let mut running = listening.lock().await;
            if *running {
                return;
            }
            let mut listener = match PgListener::connect_with(&pool).await {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot LISTEN for other gateways' hints; polling only");
                    return;
                }
            };
            if let Err(e) = listener.listen(CHANNEL).await {
                tracing::warn!(error = %e, "cannot LISTEN for other gateways' hints; polling only");
                return;
            }
            *running = true;
            drop(running);
            loop {
                tokio::select! {
                    received = listener.recv() => match received {
                        Ok(hint) => drop(hints.send(hint.payload().to_owned())),
                        // `recv` reconnects on the next call; hints sent meanwhile are lost,
                        // which costs listeners a poll interval.
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN connection lost; reconnecting");
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                    },
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                if hints.receiver_count() == 0 {
                    break;
                }
            }
            *listening.lock().await = false;
        });
    }
}

#[async_trait]
impl Notifications for PgNotifications {
    /// A transaction that NOTIFYs holds a lock that serializes every other NOTIFYing commit of the
    /// cluster until its commit is on disk; hints need no durability, so this one does not wait
    /// for the disk and holds that lock only briefly.
    async fn publish(&self, payloads: &[String]) -> Result<()> {
        if let Some(long) = payloads.iter().find(|p| p.len() > MAX_HINT_BYTES) {
            return Err(Error::Corrupt(format!(
                "a hint of {} bytes is over the limit of {MAX_HINT_BYTES}",
                long.len()
            )));
        }
        if payloads.is_empty() {
            return Ok(());
        }
        // One message, one round trip; a failed statement skips the rest, COMMIT included.
        let mut sql = String::from("BEGIN; SET LOCAL synchronous_commit TO OFF;\n");
        for payload in payloads {
            sql.push_str(&render(
                "SELECT pg_notify($1, $2);\n",
                &[CHANNEL.into(), payload.into()],
            )?);
        }
        sql.push_str("COMMIT");
        let mut conn = self.pool.acquire().await?;
        if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *conn)
            .await
        {
            // The server may be left inside the aborted transaction: do not pool the connection.
            conn.close_on_drop();
            return Err(e.into());
        }
        Ok(())
    }

    fn subscribe(&self) -> broadcast::Receiver<String> {
        let receiver = self.hints.subscribe();
        self.start_listening();
        receiver
    }
}
