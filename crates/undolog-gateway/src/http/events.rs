//! `GET /events`: the engine's typed events as Server-Sent Events, only the caller's org.
//! Browsers' `EventSource` cannot send headers, so this route alone also takes the key as
//! `?access_token=` (see [`crate::auth::require_principal`]).

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    Extension,
    extract::State,
    response::sse::{Event as SseEvent, KeepAlive, Sse},
};
use futures::{Stream, StreamExt};
use tokio_stream::wrappers::{BroadcastStream, errors::BroadcastStreamRecvError};

use crate::{Gateway, Principal};

pub(crate) async fn stream(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let org = principal.org;
    let events = BroadcastStream::new(gateway.engine.subscribe()).filter_map(move |event| {
        let org = org.clone();
        async move {
            match event {
                Ok(event) if *event.org() == org => {
                    let json = serde_json::to_value(&event).ok()?;
                    let name = json.get("type")?.as_str()?.to_owned();
                    Some(Ok(SseEvent::default().event(name).data(json.to_string())))
                }
                Ok(_) => None,
                // A slow reader missed events: say so, so a live view knows to reload.
                Err(BroadcastStreamRecvError::Lagged(missed)) => Some(Ok(SseEvent::default()
                    .event("lagged")
                    .data(format!("{{\"missed\":{missed}}}")))),
            }
        }
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
