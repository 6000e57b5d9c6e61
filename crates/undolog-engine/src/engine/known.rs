//! What a transaction knows of the rows its operations decide on: each session it holds, and the
//! earlier effect each intercept looks for. They are read once, at the start, all in one round
//! trip where the store allows (`Tx::session_with_effects`), and kept up to date with the
//! transaction's own writes as each operation makes them, so a batch of operations costs one
//! read however many it holds, and each sees what those before it wrote.
//!
//! Nothing else can change these rows meanwhile: the transaction holds the session's row and
//! each intercept's lock (its signature's or its idempotency key's) from the read to the commit.
//!
//! Or they are not read at all but assumed (`Known::assumed`): the sessions as this engine
//! remembers them and no earlier effect of any call, which the store then checks where it writes
//! (see `remembered`).

use std::collections::{HashMap, HashSet};

use undolog_store::{Effect, EffectLookup, Session, Tx};
use undolog_types::{LockKey, SessionId, Signature};

use crate::{Call, Error, core::Write, engine::Expected};

/// An effect lookup, owned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Lookup {
    Signature(Signature),
    Key(String),
}

impl Lookup {
    /// The lookups that find `effect` when it is the newest of its kind.
    pub(crate) fn finding(effect: &Effect) -> impl Iterator<Item = Lookup> + '_ {
        std::iter::once(Lookup::Signature(effect.signature.clone()))
            .chain(effect.idempotency_key.clone().map(Lookup::Key))
    }

    pub(crate) fn borrowed(&self) -> EffectLookup<'_> {
        match self {
            Lookup::Signature(signature) => EffectLookup::LatestBySignature(signature),
            Lookup::Key(key) => EffectLookup::LatestByKey(key),
        }
    }
}

/// What an intercept of one call looks at, worked out once per call (the signature is a hash
/// of the canonical arguments): the lock it takes, and the earlier effect it decides on — by
/// its idempotency key, else by its signature when its tier replays, else none.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) lock: LockKey,
    pub(crate) lookup: Option<Lookup>,
}

impl Target {
    pub(crate) fn of(call: &Call) -> Target {
        match &call.idempotency_key {
            Some(key) => Target {
                lock: LockKey::of(format!("{}\0{key}", call.org).as_bytes()),
                lookup: Some(Lookup::Key(key.clone())),
            },
            None => {
                let signature = call.signature();
                Target {
                    lock: signature.lock_key(),
                    lookup: call
                        .policy
                        .tier
                        .replays()
                        .then_some(Lookup::Signature(signature)),
                }
            }
        }
    }
}

/// One session an operation reads, and the earlier effect it looks for, if any.
pub(crate) struct Wanted<'a> {
    pub(crate) session: &'a SessionId,
    pub(crate) lookup: Option<&'a Lookup>,
}

#[derive(Debug, Default)]
pub(crate) struct Known {
    /// `None`: the session does not exist (yet).
    sessions: HashMap<SessionId, Option<Session>>,
    /// `None`: no effect matches.
    effects: HashMap<Lookup, Option<Effect>>,
    /// Sessions taken as remembered instead of read, each until this transaction first writes
    /// it: that write is made only if the stored session is still this one (see `remembered`).
    unconfirmed: Vec<Session>,
    /// Sessions that exist in the store and whose writes wait for the end of the transaction,
    /// when it holds them back (see [`Known::holding_session_writes`]).
    held: Option<HashSet<SessionId>>,
    /// Held sessions the transaction's operations changed, in the order they first did.
    changed: Vec<SessionId>,
}

impl Known {
    /// Reads what `wanted` needs, one round trip per session.
    pub(crate) async fn read(
        tx: &mut dyn Tx,
        wanted: impl IntoIterator<Item = Wanted<'_>>,
    ) -> Result<Known, Error> {
        let mut per_session: Vec<(&SessionId, Vec<Lookup>)> = Vec::new();
        for want in wanted {
            let at = match per_session.iter().position(|(s, _)| *s == want.session) {
                Some(at) => at,
                None => {
                    per_session.push((want.session, Vec::new()));
                    per_session.len() - 1
                }
            };
            let lookups = &mut per_session[at].1;
            if let Some(lookup) = want.lookup
                && !lookups.contains(lookup)
            {
                lookups.push(lookup.clone());
            }
        }
        let mut known = Known::default();
        for (session, lookups) in per_session {
            let borrowed: Vec<EffectLookup<'_>> = lookups.iter().map(Lookup::borrowed).collect();
            let (row, effects) = tx.session_with_effects(session, &borrowed).await?;
            known.sessions.insert(session.clone(), row);
            known.effects.extend(lookups.into_iter().zip(effects));
        }
        Ok(known)
    }

    /// What a transaction knows without reading: `sessions` as remembered, and no earlier
    /// effect for any of `lookups` (the store checks both where it writes).
    pub(crate) fn assumed<'a>(
        sessions: Vec<Session>,
        lookups: impl IntoIterator<Item = &'a Lookup>,
    ) -> Known {
        Known {
            sessions: sessions
                .iter()
                .map(|s| (s.id.clone(), Some(s.clone())))
                .collect(),
            effects: lookups.into_iter().map(|l| (l.clone(), None)).collect(),
            unconfirmed: sessions,
            ..Known::default()
        }
    }

    /// This transaction's writes of each session that exists wait for its end, when
    /// [`Known::held_writes`] gives them, as the last operation left each: one write per session
    /// however many operations change it (every intercept and record takes the session's next
    /// number). Only this transaction could see the rows in between, and it decides on what it
    /// knows, not on what it reads back. A session the transaction creates is written at once,
    /// so that the effects recorded in it can refer to it, and held from then on.
    pub(crate) fn holding_session_writes(mut self) -> Known {
        let existing = self.sessions.iter().filter(|(_, row)| row.is_some());
        self.held = Some(existing.map(|(id, _)| id.clone()).collect());
        self
    }

    /// The sessions whose writes wait for the end of the transaction, when it holds them back.
    pub(crate) fn held(&self) -> Option<&HashSet<SessionId>> {
        self.held.as_ref()
    }

    /// Each held session the transaction changed, as it now has it, with the row the store must
    /// still hold for the write to be made: the session as remembered, when it was not read.
    pub(crate) fn held_writes(&self) -> impl Iterator<Item = (Option<&Session>, &Session)> {
        self.changed.iter().filter_map(|id| {
            let after = self.sessions.get(id)?.as_ref()?;
            let before = self.unconfirmed.iter().find(|u| u.id == *id);
            Some((before, after))
        })
    }

    /// The rows the next writes must find as remembered.
    pub(crate) fn expected(&self) -> Expected<'_> {
        Expected {
            sessions: &self.unconfirmed,
            effects: &[],
            held: self.held.as_ref(),
        }
    }

    /// The session as this transaction has it now.
    pub(crate) fn session(&self, id: &SessionId) -> Option<Session> {
        self.sessions
            .get(id)
            .expect("every session an operation decides on is read first")
            .clone()
    }

    /// The earlier effect `lookup` finds, as this transaction has it now.
    pub(crate) fn earlier_effect(&self, lookup: Option<&Lookup>) -> Option<Effect> {
        self.effects
            .get(lookup?)
            .expect("every intercept's lookup is read first")
            .clone()
    }

    /// The sessions read that exist.
    pub(crate) fn sessions_read(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values().flatten()
    }

    /// The lookups that found an earlier effect.
    pub(crate) fn lookups_that_found(&self) -> impl Iterator<Item = &Lookup> {
        self.effects
            .iter()
            .filter_map(|(lookup, found)| found.as_ref().map(|_| lookup))
    }

    /// Takes in writes the transaction has just made.
    pub(crate) fn saw(&mut self, writes: &[Write]) {
        for write in writes {
            match write {
                Write::PutSession(session) => {
                    if let Some(held) = &mut self.held {
                        if held.contains(&session.id) {
                            if !self.changed.contains(&session.id) {
                                self.changed.push(session.id.clone());
                            }
                            self.sessions
                                .insert(session.id.clone(), Some(session.clone()));
                            continue;
                        }
                        // Written now: it did not exist, and its effects refer to it.
                        held.insert(session.id.clone());
                    }
                    self.unconfirmed.retain(|u| u.id != session.id);
                    self.sessions
                        .insert(session.id.clone(), Some(session.clone()));
                }
                // The newest effect of its signature and of its key (effects are numbered in
                // their session, and a signature names one session).
                Write::InsertEffect(effect) => {
                    for lookup in Lookup::finding(effect) {
                        self.effects.insert(lookup, Some(effect.clone()));
                    }
                }
                Write::UpdateEffect(effect) => {
                    for lookup in Lookup::finding(effect) {
                        if let Some(Some(known)) = self.effects.get_mut(&lookup)
                            && known.id == effect.id
                        {
                            *known = effect.clone();
                        }
                    }
                }
                Write::InsertApproval(_) | Write::UpdateApproval(_) | Write::PushUndo { .. } => {}
            }
        }
    }
}
