//! Runs: the session of a client that names none. A principal's calls that arrive without a
//! session (stateless clients, and clients that open an MCP session per call) belong to its
//! current run, which ends after an idle gap; the next call then starts a new one.

use std::time::Duration;

use undolog_store::Session;
use undolog_types::{OrgId, SessionId, SessionState, Timestamp};

/// Which run a call of the principal joins.
#[derive(Debug, Clone, PartialEq)]
pub enum RunChoice {
    /// Its current run goes on.
    Continue(SessionId),
    /// A new run starts: write this session.
    Start(Session),
}

/// The run of `principal` at `now`: its newest (`latest`) while that still takes calls and was
/// used within `idle`, else a new one, `fresh` (an id the executor drew).
pub fn current_run(
    latest: Option<Session>,
    org: &OrgId,
    principal: &str,
    (now, fresh): (Timestamp, SessionId),
    idle: Duration,
) -> RunChoice {
    match latest {
        Some(run) if run.state == SessionState::Active && now < run.updated_at.plus(idle) => {
            RunChoice::Continue(run.id)
        }
        _ => RunChoice::Start(Session {
            org: org.clone(),
            id: fresh,
            state: SessionState::Active,
            next_seq: 0,
            failed_effect: None,
            undo_claim: None,
            run_of: Some(principal.to_owned()),
            opened_by: Some(principal.to_owned()),
            created_at: now,
            updated_at: now,
        }),
    }
}
