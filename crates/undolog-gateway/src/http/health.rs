//! `GET /healthz`: whether this gateway can take calls, for load balancers and operators. Open to
//! anyone who can reach the gateway: it names no org and nothing recorded.
//!
//! Ready means the store took this gateway's last heartbeat (a write, so a full disk or a dead
//! database shows) within three heartbeats. Otherwise the answer is 503 with the store's reason.

use std::sync::Arc;

use axum::{Json, extract::State, http::StatusCode, response::IntoResponse};
use serde_json::json;

use crate::Gateway;

pub(crate) async fn healthz(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    let engine = &gateway.engine;
    let health = engine.health();
    let now = undolog_types::Timestamp::now();
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
    let store = json!({
        "backend": gateway.store.backend(),
        "ready": reason.is_none(),
        "reason": reason,
        "last_beat": health.last_beat.map(|t| t.to_string()),
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
