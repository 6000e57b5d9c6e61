//! What this engine last wrote or read of the rows it decides on, so that the commonest operations
//! write without reading first: a new call in a session it knows, and the outcome of a call it
//! runs. On PostgreSQL that saves a round trip; on SQLite, a batch's reads (the outcome's effect,
//! its JSON parsed again), while the batch holds the one write lock. Such an operation is decided by the
//! core on the remembered rows, and its writes carry their condition, checked by the store where
//! it writes: the session and the effect are still as remembered (`Tx::replace_session`,
//! `Tx::replace_effect`), and no earlier effect of the call exists (`Tx::expect_no_effect`).
//! When a condition does not hold, the store writes nothing (`Changed`), the row is forgotten, and
//! the operation runs the ordinary way: read, decide, write.
//!
//! The memory may therefore be wrong (another gateway changed the row, a transaction that was
//! remembered rolled back) without harm: it costs that second try, never a wrong write. Only
//! successful decisions are taken from it; a refusal is always decided on rows just read.

use std::{
    collections::{HashMap, HashSet},
    hash::Hash,
    sync::{Mutex, MutexGuard},
};

use undolog_store::{Effect, Session};
use undolog_types::{EffectId, EffectState, OrgId, SessionId};

use crate::{
    core::Write,
    engine::known::{Known, Lookup},
};

/// The most rows of each kind kept; past it, that memory starts over.
const CAPACITY: usize = 4096;

#[derive(Debug)]
pub(crate) struct Remembered {
    /// This engine's executor id: it remembers the pending effects whose lease it holds.
    executor: String,
    sessions: Mutex<HashMap<(OrgId, SessionId), Session>>,
    effects: Mutex<HashMap<EffectId, Effect>>,
    /// Lookups known to find an earlier effect: an intercept of such a call reads first, since
    /// it would be decided on what it finds.
    found: Mutex<HashSet<(OrgId, Lookup)>>,
}

impl Remembered {
    pub(crate) fn new(executor: String) -> Remembered {
        Remembered {
            executor,
            sessions: Mutex::default(),
            effects: Mutex::default(),
            found: Mutex::default(),
        }
    }

    pub(crate) fn session(&self, org: &OrgId, id: &SessionId) -> Option<Session> {
        lock(&self.sessions)
            .get(&(org.clone(), id.clone()))
            .cloned()
    }

    /// A pending effect of `org` whose lease this engine holds.
    pub(crate) fn effect(&self, org: &OrgId, id: EffectId) -> Option<Effect> {
        lock(&self.effects)
            .get(&id)
            .filter(|e| e.org == *org)
            .cloned()
    }

    /// The session of a pending effect of `org` whose lease this engine holds, without a copy of
    /// the effect.
    pub(crate) fn session_of_effect(&self, org: &OrgId, id: EffectId) -> Option<SessionId> {
        lock(&self.effects)
            .get(&id)
            .filter(|e| e.org == *org)
            .map(|e| e.session.clone())
    }

    /// Whether `lookup` is known to find an earlier effect.
    pub(crate) fn finds(&self, org: &OrgId, lookup: &Lookup) -> bool {
        lock(&self.found).contains(&(org.clone(), lookup.clone()))
    }

    /// Takes in what a transaction read.
    pub(crate) fn read(&self, org: &OrgId, known: &Known) {
        for session in known.sessions_read() {
            keep(
                &self.sessions,
                (org.clone(), session.id.clone()),
                session.clone(),
            );
        }
        for lookup in known.lookups_that_found() {
            keep_in(&self.found, (org.clone(), lookup.clone()));
        }
    }

    /// Takes in writes a transaction made (before its commit: a write that was not kept makes a
    /// memory the store will refuse, never a wrong write).
    pub(crate) fn wrote(&self, writes: &[Write]) {
        for write in writes {
            match write {
                Write::PutSession(s) => {
                    keep(&self.sessions, (s.org.clone(), s.id.clone()), s.clone());
                }
                Write::InsertEffect(e) | Write::UpdateEffect(e) => {
                    if let Write::InsertEffect(_) = write {
                        for lookup in Lookup::finding(e) {
                            keep_in(&self.found, (e.org.clone(), lookup));
                        }
                    }
                    let mine = e.lease.as_ref().is_some_and(|l| l.holder == self.executor);
                    if e.state == EffectState::Pending && mine {
                        keep(&self.effects, e.id, e.clone());
                    } else {
                        lock(&self.effects).remove(&e.id);
                    }
                }
                Write::InsertApproval(_) | Write::UpdateApproval(_) | Write::PushUndo { .. } => {}
            }
        }
    }

    pub(crate) fn forget_session(&self, org: &OrgId, id: &SessionId) {
        lock(&self.sessions).remove(&(org.clone(), id.clone()));
    }

    pub(crate) fn forget_effect(&self, id: EffectId) {
        lock(&self.effects).remove(&id);
    }

    /// An intercept found an earlier effect where it expected none.
    pub(crate) fn found(&self, org: &OrgId, lookup: &Lookup) {
        keep_in(&self.found, (org.clone(), lookup.clone()));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn keep<K: Eq + Hash, V>(map: &Mutex<HashMap<K, V>>, key: K, value: V) {
    let mut map = lock(map);
    if map.len() >= CAPACITY && !map.contains_key(&key) {
        map.clear();
    }
    map.insert(key, value);
}

fn keep_in<K: Eq + Hash>(set: &Mutex<HashSet<K>>, key: K) {
    let mut set = lock(set);
    if set.len() >= CAPACITY && !set.contains(&key) {
        set.clear();
    }
    set.insert(key);
}
