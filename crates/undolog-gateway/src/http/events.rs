//! `GET /events`: the engine's typed events as Server-Sent Events, only the caller's org.
//! Browsers' `EventSource` cannot send headers, so this route alone also takes the key as
//! `?access_token=` (see [`crate::auth::require_principal`]).

use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Extension,
    extract::State,
    response::sse::{Event as SseEvent, KeepAlive, Sse},
};
use futures::{Stream, StreamExt, stream::BoxStream};
use tokio_stream::wrappers::{BroadcastStream, errors::BroadcastStreamRecvError};

use serde_json::Value;
use undolog_engine::{Engine, Reader};
use undolog_types::{OrgId, SessionId};

use crate::{Gateway, Principal, engine_link::EngineLink};

pub(crate) async fn stream(
    State(gateway): State<Arc<Gateway>>,
    Extension(principal): Extension<Principal>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let events = of_org(&gateway, &principal)
        .map(|(name, json)| Ok(SseEvent::default().event(name).data(json.to_string())));
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// The engine's events of `principal`'s org, each with its type, as JSON (every surface streams
/// these), and of an agent only those of its own sessions ([`Reader`]). A reader too slow to
/// keep up hears `lagged` with how many it missed, so a live view knows to read the state again.
pub(crate) fn of_org(
    gateway: &Gateway,
    principal: &Principal,
) -> BoxStream<'static, (String, Value)> {
    let engine = match &gateway.engine {
        EngineLink::Local(engine) => engine.clone(),
        // The engine streams what the credentials being served read, and only that.
        EngineLink::Remote(remote) => return remote.org_events(&principal.presented).boxed(),
    };
    let (org, reader) = (principal.org.clone(), principal.reader());
    // Whether the reader sees a session, asked of the log once per session.
    let seen: Arc<Mutex<HashMap<SessionId, bool>>> = Arc::default();
    BroadcastStream::new(engine.subscribe())
        .filter_map(move |event| {
            let (org, reader, engine, seen) =
                (org.clone(), reader.clone(), engine.clone(), seen.clone());
            async move {
                let json = match event {
                    Ok(event) if *event.org() == org => {
                        if !reads(&engine, &reader, &seen, &org, event.session()).await {
                            return None;
                        }
                        serde_json::to_value(&event).ok()?
                    }
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

/// Whether `reader` sees `session` (remembered in `seen`: a session's opener never changes).
async fn reads(
    engine: &Engine,
    reader: &Reader,
    seen: &Mutex<HashMap<SessionId, bool>>,
    org: &OrgId,
    session: &SessionId,
) -> bool {
    if let Reader::Org = reader {
        return true;
    }
    if let Some(known) = seen.lock().unwrap_or_else(|p| p.into_inner()).get(session) {
        return *known;
    }
    let readable = engine.session_read_by(org, session, reader).await.is_ok();
    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    seen.insert(session.clone(), readable);
    readable
}
