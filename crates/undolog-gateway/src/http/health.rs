//! `GET /healthz`: whether this gateway can take calls, for load balancers and operators. Open to
//! anyone who can reach the gateway: it names no org and nothing recorded.
//!
//! Ready means the store took this gateway's last heartbeat (a write, so a full disk or a dead
//! database shows) within three heartbeats. Otherwise the answer is 503 with the store's reason.
//! In front of a remote engine, ready means the engine says so of its own store.

use std::sync::Arc;

use axum::{Json, extract::State, http::StatusCode, response::IntoResponse};
use serde_json::json;
use undolog_engine::Engine;
use undolog_types::Timestamp;

use crate::{Gateway, engine_link::EngineLink, grpc::client::RemoteEngine};

pub(crate) async fn healthz(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    let engine = match &gateway.engine {
        EngineLink::Local(engine) => engine,
        EngineLink::Remote(remote) => return of_remote(remote).await,
    };
    let (reason, last_beat) = readiness(engine);
    let store = json!({
        "backend": gateway.store.as_ref().map(|s| s.backend()),
        "ready": reason.is_none(),
        "reason": reason,
        "last_beat": last_beat.map(|t| t.to_string()),
    });
    match reason {
        None => (
            StatusCode::OK,
            Json(json!({"status": "ok", "store": store})),
        ),
        Some(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "store_unavailable", "store": store})),
        ),
    }
}

/// Why `engine` cannot take calls (`None`: it can), and when its store took its last beat.
pub(crate) fn readiness(engine: &Engine) -> (Option<String>, Option<Timestamp>) {
    let health = engine.health();
    let now = Timestamp::now();
    let beat = engine.config().heartbeat;
    // A beat that hangs (a store that does not answer) is as bad as one that fails.
    let late = health.last_beat.and_then(|at| {
        let silent = std::time::Duration::from_millis(
            u64::try_from(now.as_millis() - at.as_millis()).unwrap_or(0),
        );
        (silent > beat * 3 + std::time::Duration::from_secs(1)).then_some(silent)
    });
    let reason = match (&health.reason, late) {
        (Some(reason), _) => Some(reason.clone()),
        (None, Some(silent)) => Some(format!(
            "no heartbeat reached the store for {:.1} s",
            silent.as_secs_f64()
        )),
        (None, None) => None,
    };
    (reason, health.last_beat)
}

/// In front of a remote engine: ready when the engine is, said of its store in the same shape.
async fn of_remote(remote: &RemoteEngine) -> (StatusCode, Json<serde_json::Value>) {
    let (status, store) = match remote.health().await {
        Ok(health) => (
            if health.ready {
                "ok"
            } else {
                "store_unavailable"
            },
            json!({
                "backend": health.backend,
                "ready": health.ready,
                "reason": health.reason,
                "last_beat": health.last_beat_ms.map(|t| Timestamp(t).to_string()),
            }),
        ),
        Err(e) => (
            "engine_unavailable",
            json!({"backend": null, "ready": false, "reason": e.to_string(), "last_beat": null}),
        ),
    };
    let code = match status {
        "ok" => StatusCode::OK,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let answer = json!({"status": status, "store": store, "engine": remote.url()});
    (code, Json(answer))
}
