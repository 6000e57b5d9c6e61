//! Which UndoLog session a call belongs to, whatever the client does. An agent run is one
//! session; in order of precedence it is:
//!
//! 1. `X-UndoLog-Session-Id`, when the client sends it;
//! 2. `_meta["io.undolog/session"]` on the request, for clients that can set `_meta` but not
//!    headers;
//! 3. for a connection that outlives one call (a 2025-11-25 MCP session, the stdio client), the
//!    run it joined at its first call;
//! 4. otherwise the principal's implicit run (`Engine::implicit_run`), which ends after
//!    `[sessions] idle_secs` without a call: stateless 2026-07-28 clients, and clients that open
//!    an MCP session per call, get replay and undo across their calls too.
//!
//! So two agents that share one key share a run unless they name their sessions.

use std::sync::{Arc, Mutex};

use rmcp::model::RequestMetaObject;
use serde_json::Value;
use undolog_types::SessionId;

use crate::{Error, Gateway, Principal};

/// Names the session in a request's `_meta`.
pub(crate) const META_SESSION: &str = "io.undolog/session";
/// A fresh key in a request's `_meta` runs an identical call again (as `Idempotency-Key`).
pub(crate) const META_IDEMPOTENCY_KEY: &str = "io.undolog/idempotency_key";
/// A step number in a request's `_meta` is part of the signature, as the SDK's steps are.
pub(crate) const META_STEP: &str = "io.undolog/step";
/// How long the client waits for its answer, in milliseconds (its own timeout).
pub(crate) const META_WAIT_MS: &str = "io.undolog/wait_ms";

/// The run a long-lived connection joined at its first call, and whose it is.
#[derive(Debug, Default)]
pub(crate) struct BoundRun(Mutex<Option<(Principal, SessionId)>>);

impl BoundRun {
    fn get(&self, principal: &Principal) -> Option<SessionId> {
        let bound = self.0.lock().unwrap_or_else(|p| p.into_inner());
        bound
            .as_ref()
            .filter(|(owner, _)| owner == principal)
            .map(|(_, run)| run.clone())
    }

    fn bind(&self, principal: &Principal, run: &SessionId) {
        let mut bound = self.0.lock().unwrap_or_else(|p| p.into_inner());
        bound.get_or_insert_with(|| (principal.clone(), run.clone()));
    }

    /// Lets go of `run`, when it is the one bound: it closed before the first call was kept.
    fn unbind(&self, run: &SessionId) {
        let mut bound = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if bound.as_ref().is_some_and(|(_, bound)| bound == run) {
            *bound = None;
        }
    }
}

/// What a request says about its session.
#[derive(Debug, Default)]
pub(crate) struct Named<'a> {
    /// The `X-UndoLog-Session-Id` header.
    pub(crate) header: Option<&'a str>,
    /// The request's `_meta`.
    pub(crate) meta: Option<&'a RequestMetaObject>,
    /// The connection's bound run, when the connection outlives one call.
    pub(crate) connection: Option<&'a Arc<BoundRun>>,
}

/// The session of one call: named by the client or its connection, or the principal's run,
/// which the call joins only once it is known to be a call (its tool exists), so that a bad
/// request starts no run.
#[derive(Debug, Clone)]
pub(crate) enum CallSession {
    Named(SessionId),
    Run {
        principal: Principal,
        connection: Option<Arc<BoundRun>>,
    },
}

impl CallSession {
    /// The session a request names for `principal` (see the module's order), or its run.
    pub(crate) fn of(principal: &Principal, named: Named<'_>) -> Result<CallSession, Error> {
        if let Some(id) = named.header.filter(|h| !h.is_empty()) {
            return SessionId::new(id)
                .map(CallSession::Named)
                .map_err(|e| Error::BadRequest(format!("X-UndoLog-Session-Id: {e}")));
        }
        if let Some(value) = named.meta.and_then(|m| m.get(META_SESSION)) {
            let id = value.as_str().ok_or_else(|| {
                Error::BadRequest(format!("_meta[\"{META_SESSION}\"] must be a string"))
            })?;
            return SessionId::new(id)
                .map(CallSession::Named)
                .map_err(|e| Error::BadRequest(format!("_meta[\"{META_SESSION}\"]: {e}")));
        }
        if let Some(run) = named.connection.and_then(|c| c.get(principal)) {
            return Ok(CallSession::Named(run));
        }
        Ok(CallSession::Run {
            principal: principal.clone(),
            connection: named.connection.cloned(),
        })
    }
}

impl Gateway {
    /// The session id of a call: its named one, or the principal's current run (bound to the
    /// connection, when it outlives one call).
    pub(crate) async fn join(&self, session: &CallSession) -> Result<SessionId, Error> {
        match session {
            CallSession::Named(id) => Ok(id.clone()),
            CallSession::Run {
                principal,
                connection,
            } => {
                let run = self
                    .engine
                    .implicit_run(principal.acting(), &principal.actor(), self.config.run_idle)
                    .await?;
                if let Some(connection) = connection {
                    connection.bind(principal, &run);
                }
                Ok(run)
            }
        }
    }

    /// The run to decide a call in again when `closed`, the run it joined, was found taking no
    /// more calls: a run remembered for a moment (by this gateway, or by an engine that does not
    /// hear every other's events) may have been closed or undone meanwhile. The principal's
    /// current run, read afresh; `None` when the client named the session (its choice stands,
    /// and it is told the session is closed) or no other run is there.
    pub(crate) async fn rejoin(
        &self,
        session: &CallSession,
        closed: &SessionId,
    ) -> Result<Option<SessionId>, Error> {
        let CallSession::Run {
            principal,
            connection,
        } = session
        else {
            return Ok(None);
        };
        self.engine.run_closed(&principal.org, closed);
        if let Some(connection) = connection {
            connection.unbind(closed);
        }
        let run = self.join(session).await?;
        Ok((run != *closed).then_some(run))
    }
}

/// How long a request's `_meta` says its client waits, less a tenth for the answer to travel.
pub(crate) fn wait_of(
    meta: Option<&RequestMetaObject>,
) -> Result<Option<std::time::Duration>, Error> {
    let Some(wait) = meta.and_then(|m| m.get(META_WAIT_MS)) else {
        return Ok(None);
    };
    let ms = wait.as_u64().filter(|ms| *ms > 0).ok_or_else(|| {
        Error::BadRequest(format!(
            "_meta[\"{META_WAIT_MS}\"] must be a whole number of milliseconds above 0"
        ))
    })?;
    Ok(Some(std::time::Duration::from_millis(ms - ms / 10)))
}

/// The idempotency key and step a request's `_meta` asks for, to run an identical call afresh.
pub(crate) fn fresh_run_of(
    meta: Option<&RequestMetaObject>,
) -> Result<(Option<String>, Option<u64>), Error> {
    let Some(meta) = meta else {
        return Ok((None, None));
    };
    let key = match meta.get(META_IDEMPOTENCY_KEY) {
        None => None,
        Some(Value::String(key)) => Some(key.clone()),
        Some(_) => {
            return Err(Error::BadRequest(format!(
                "_meta[\"{META_IDEMPOTENCY_KEY}\"] must be a string"
            )));
        }
    };
    let step = match meta.get(META_STEP) {
        None => None,
        Some(step) => Some(step.as_u64().ok_or_else(|| {
            Error::BadRequest(format!(
                "_meta[\"{META_STEP}\"] must be a whole number of 0 or more"
            ))
        })?),
    };
    Ok((key, step))
}
