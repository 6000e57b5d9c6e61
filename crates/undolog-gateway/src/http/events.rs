//! `GET /events`: the engine's typed events as Server-Sent Events, only the caller's org.
//! Browsers' `EventSource` cannot send headers, so this route alone also takes the key as
//! `?access_token=` (see [`crate::auth::require_principal`]).

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    Extension,
    extract::State,
    response::sse::{Event as SseEvent, KeepAlive, Sse},
};
use futures::{Stream, StreamExt, stream::BoxStream};
use tokio_stream::wrappers::{BroadcastStream, errors::BroadcastStreamRecvError};

use serde_json::Value;
use undolog_types::OrgId;

use crate::{Gateway, Principal, engine_link::EngineLink};

pub(crate) async fn stream(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let events = of_org(&gateway, principal.org)
        .map(|(name, json)| Ok(SseEvent::default().event(name).data(json.to_string())));
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// The engine's events of `org` alone, each with its type, as JSON (every surface streams
/// these). A reader too slow to keep up hears `lagged` with how many it missed, so a live view
/// knows to read the state again.
pub(crate) fn of_org(gateway: &Gateway, org: OrgId) -> BoxStream<'static, (String, Value)> {
    let engine = match &gateway.engine {
        EngineLink::Local(engine) => engine,
        // The engine streams the org of the credentials being served, and only that org.
        EngineLink::Remote(remote) => return remote.org_events().boxed(),
    };
    BroadcastStream::new(engine.subscribe())
        .filter_map(move |event| {
            let org = org.clone();
            async move {
                let json = match event {
                    Ok(event) if *event.org() == org => serde_json::to_value(&event).ok()?,
                    Ok(_) => return None,
                    Err(BroadcastStreamRecvError::Lagged(missed)) => {
                        serde_json::json!({"type": "lagged", "missed": missed})
                    }
                };
                let name = json.get("type")?.as_str()?.to_owned();
                Some((name, json))
            }
        })
        .boxed()
}
