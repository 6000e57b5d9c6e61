//! A principal's implicit runs, closing sessions, and exporting their history.

use std::time::Duration;

use serde_json::json;
use undolog_store::{Session, Snapshot};
use undolog_types::{LockKey, OrgId, SessionId, SessionState, Timestamp};

use crate::{
    Engine, Error, Event, Reader, Rejection,
    core::{self, RunChoice, Write},
};

/// How long an implicit run just read is taken as the principal's current one without reading it
/// again: under load a principal's calls come every few milliseconds, and each would otherwise
/// read its run in a transaction of its own.
const RUN_CACHE_FOR: Duration = Duration::from_secs(1);
/// How many principals a [`RunCache`] holds before it lets go of those it read more than
/// [`RUN_CACHE_FOR`] ago: a gateway whose users each have a principal (OAuth subjects) would
/// otherwise keep one entry per user it ever served.
const RUNS_HELD: usize = 4096;

/// The implicit runs last read, per org and principal, and when: the engine's own, and a
/// gateway's in front of an engine in another process (which then need not ask it on every
/// call). A run that closes in this engine, or in another process that shares the store through
/// hints, is forgotten at once; one that closes elsewhere is taken as current for at most
/// [`RUN_CACHE_FOR`] more, or until a call finds it closed ([`RunCache::closed`]).
///
/// Callers that find a principal's run missing or stale read it one at a time, each first
/// looking again at what the one before it read: when the remembered run goes stale under load,
/// one caller reads it and the rest take its answer, instead of each queueing on the principal's
/// lock for a transaction of its own.
#[derive(Debug, Default)]
pub struct RunCache(std::sync::Mutex<std::collections::HashMap<(OrgId, String), Run>>);

/// A principal's run as last read, and the turn its readers take.
#[derive(Debug, Default)]
struct Run {
    read: Option<(SessionId, Timestamp)>,
    reading: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl RunCache {
    /// The principal's current run: the one read within the last moment (at most half of
    /// `idle`, the time a run lasts without a call), or else what `read` says at the time
    /// `now` gives, one reader at a time.
    pub async fn current<E, F>(
        &self,
        (org, principal): (&OrgId, &str),
        idle: Duration,
        now: impl Fn() -> Timestamp,
        read: impl FnOnce(Timestamp) -> F,
    ) -> Result<SessionId, E>
    where
        F: Future<Output = Result<SessionId, E>>,
    {
        let fresh_for = (idle / 2).min(RUN_CACHE_FOR);
        if let Some(id) = self.get(org, principal, now(), fresh_for) {
            return Ok(id);
        }
        let turn = self.reading(org, principal, now());
        let _reading = turn.lock().await;
        let now = now();
        if let Some(id) = self.get(org, principal, now, fresh_for) {
            return Ok(id); // read by the caller before this one
        }
        let id = read(now).await?;
        self.put(org, principal, &id, now);
        Ok(id)
    }

    /// Forgets `run` wherever it is remembered as a principal's current one: it takes no more
    /// calls (closed, failed, undone).
    pub fn closed(&self, org: &OrgId, run: &SessionId) {
        let mut runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for ((o, _), remembered) in runs.iter_mut() {
            if o == org && remembered.read.as_ref().is_some_and(|(id, _)| id == run) {
                remembered.read = None;
            }
        }
    }

    fn get(
        &self,
        org: &OrgId,
        principal: &str,
        now: Timestamp,
        fresh_for: Duration,
    ) -> Option<SessionId> {
        let runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (id, seen) = runs
            .get(&(org.clone(), principal.to_owned()))?
            .read
            .as_ref()?;
        fresh(*seen, now, fresh_for).then(|| id.clone())
    }

    fn put(&self, org: &OrgId, principal: &str, id: &SessionId, now: Timestamp) {
        let mut runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let run = runs.entry((org.clone(), principal.to_owned())).or_default();
        run.read = Some((id.clone(), now));
    }

    /// The principal's turn to read its run; held while reading. A principal new here, when
    /// [`RUNS_HELD`] are held, first lets go of those read long ago and not being read.
    fn reading(
        &self,
        org: &OrgId,
        principal: &str,
        now: Timestamp,
    ) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        let mut runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let key = (org.clone(), principal.to_owned());
        if runs.len() >= RUNS_HELD && !runs.contains_key(&key) {
            runs.retain(|_, run| {
                let recent =
                    (run.read.as_ref()).is_some_and(|(_, seen)| fresh(*seen, now, RUN_CACHE_FOR));
                recent || std::sync::Arc::strong_count(&run.reading) > 1
            });
        }
        runs.entry(key).or_default().reading.clone()
    }

    /// How many principals' runs are held.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Forgets the session when it stops taking calls.
    pub(crate) fn saw(&self, event: &Event) {
        if let Event::SessionChanged {
            org,
            session,
            state,
        } = event
            && *state != SessionState::Active
        {
            self.closed(org, session);
        }
    }
}

/// Whether a run read at `seen` is still taken as current at `now`.
fn fresh(seen: Timestamp, now: Timestamp, fresh_for: Duration) -> bool {
    let age = u64::try_from(now.as_millis() - seen.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(age) < fresh_for
}

/// The format tag of an exported session history.
pub const SNAPSHOT_FORMAT: &str = "undolog.session-snapshot.v1";

impl Engine {
    /// The run a call of `principal` without a session joins: its current one, or a new one
    /// when the last ended more than `idle` ago (or is closed). One transaction, serialized per
    /// principal, so that gateways sharing a store agree on the run.
    pub async fn implicit_run(
        &self,
        org: &OrgId,
        principal: &str,
        idle: Duration,
    ) -> Result<SessionId, Error> {
        // Asked again within a moment, the answer is the one just read (see `RunCache`).
        let read = |now| async move {
            let mut tx = self.begin(org).await?;
            tx.lock(LockKey::of(format!("run\0{org}\0{principal}").as_bytes()))
                .await?;
            let latest = tx.latest_run(principal).await?;
            let fresh = SessionId::new(format!("run-{}", uuid::Uuid::now_v7()))
                .expect("a valid session id");
            Ok(
                match core::current_run(latest, org, principal, (now, fresh), idle) {
                    RunChoice::Continue(id) => {
                        tx.commit().await?; // it wrote nothing; committing frees the store at once
                        id
                    }
                    RunChoice::Start(run) => {
                        let id = run.id.clone();
                        self.commit_writes(tx, &[Write::PutSession(run)]).await?;
                        self.session_changed(org, &id, SessionState::Active);
                        id
                    }
                },
            )
        };
        (self.inner().runs)
            .current((org, principal), idle, || self.now(), read)
            .await
    }

    /// Forgets `session` as anyone's current run when `refused` says a call found it taking no
    /// more calls: it was closed by a process whose events this engine does not hear, and the
    /// principal's next call reads its run afresh.
    pub(crate) fn found_closed(&self, org: &OrgId, session: &SessionId, refused: &Rejection) {
        if let Rejection::SessionClosed { .. } = refused {
            self.inner().runs.closed(org, session);
        }
    }

    /// Closes an active session normally; it takes no more calls but can still be undone.
    pub async fn close_session(&self, org: &OrgId, id: &SessionId) -> Result<Session, Error> {
        self.set_session_state(org, id, &[SessionState::Completed])
            .await
    }

    /// Moves a session through `path`, one legal transition after another, in one transaction.
    pub(crate) async fn set_session_state(
        &self,
        org: &OrgId,
        id: &SessionId,
        path: &[SessionState],
    ) -> Result<Session, Error> {
        let mut tx = self.begin(org).await?;
        let mut session = tx
            .session(id)
            .await?
            .ok_or_else(|| Error::UnknownSession(id.clone()))?;
        for &to in path {
            session.state = session.state.transition(to)?;
        }
        session.updated_at = self.now();
        self.commit_writes(tx, &[Write::PutSession(session.clone())])
            .await?;
        self.published(vec![Event::SessionChanged {
            org: org.clone(),
            session: id.clone(),
            state: session.state,
        }]);
        Ok(session)
    }

    /// Exports a session's whole history (session, effects, approvals, undo stack) as JSON, and
    /// keeps the export in the log.
    pub async fn snapshot(&self, org: &OrgId, id: &SessionId) -> Result<Snapshot, Error> {
        self.snapshot_read_by(org, id, &Reader::Org).await
    }

    /// [`Engine::snapshot`] of a session `reader` sees.
    pub async fn snapshot_read_by(
        &self,
        org: &OrgId,
        id: &SessionId,
        reader: &Reader,
    ) -> Result<Snapshot, Error> {
        let mut tx = self.begin(org).await?;
        let session = crate::engine::readers::readable(&mut *tx, id, reader).await?;
        let effects = tx.session_effects(id).await?;
        let approvals: Vec<_> = tx
            .approvals(None)
            .await?
            .into_iter()
            .filter(|a| &a.session == id)
            .collect();
        let undo_stack = tx.undo_stack(id).await?;
        let taken_at = self.now();
        let snapshot = Snapshot {
            org: org.clone(),
            session: id.clone(),
            taken_at,
            body: json!({
                "format": SNAPSHOT_FORMAT,
                "taken_at": taken_at,
                "session": session,
                "effects": effects,
                "approvals": approvals,
                "undo_stack": undo_stack,
            }),
        };
        tx.insert_snapshot(&snapshot).await?;
        tx.commit().await?;
        Ok(snapshot)
    }

    /// The snapshots kept for a session, oldest first.
    pub async fn snapshots(&self, org: &OrgId, id: &SessionId) -> Result<Vec<Snapshot>, Error> {
        Ok(self.begin(org).await?.snapshots(id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_at(cache: &RunCache, principal: &str, now: Timestamp) {
        let org = OrgId::new("acme").unwrap();
        let run = SessionId::new(format!("run-{principal}")).unwrap();
        let read = |_| async { Ok::<_, ()>(run.clone()) };
        let got = cache.current((&org, principal), RUN_CACHE_FOR * 2, || now, read);
        assert_eq!(got.await, Ok(run.clone()));
    }

    #[tokio::test]
    async fn principals_read_long_ago_are_let_go_once_many_are_held() {
        let cache = RunCache::default();
        let start = Timestamp(1_700_000_000_000);
        for n in 0..RUNS_HELD {
            read_at(&cache, &format!("p{n}"), start).await;
        }
        assert_eq!(cache.held(), RUNS_HELD);
        // Read a moment ago, they are all kept: a new principal is held beside them.
        read_at(&cache, "fresh", start).await;
        assert_eq!(cache.held(), RUNS_HELD + 1);
        // One already held is read again without letting go of any.
        let later = Timestamp(start.0 + 2_000);
        read_at(&cache, "p0", later).await;
        assert_eq!(cache.held(), RUNS_HELD + 1);
        // A new one, once the rest are stale, lets go of all but the fresh ones.
        read_at(&cache, "newcomer", later).await;
        assert_eq!(cache.held(), 2, "p0, read again, and the newcomer");
    }
}
