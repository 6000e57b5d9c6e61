//! The storage contract. Each backend implements [`Store`] and [`Tx`]; the conformance suite in
//! [`crate::conformance`] holds them to the same behaviour.

use std::{fmt::Debug, sync::Arc};

use async_trait::async_trait;
use undolog_types::{
    ApprovalId, ApprovalState, EffectId, LockKey, OrgId, SessionId, Signature, Timestamp,
};

use crate::{ApiKey, Approval, Effect, Notifications, Result, Session, Snapshot};

/// A durable effect log.
#[async_trait]
pub trait Store: Send + Sync + Debug {
    /// Opens a read-write transaction that sees and touches only `org`'s rows.
    async fn begin(&self, org: &OrgId) -> Result<Box<dyn Tx>>;

    /// As [`Store::begin`], for a transaction whose commit does not wait for the disk: its writes
    /// are visible at once and on disk a moment later, and a crash in between loses all of them
    /// (never part). For writes that no caller acts on, such as the record of a read-only call.
    /// A backend that cannot tell the two apart begins an ordinary transaction.
    async fn begin_unsynced(&self, org: &OrgId) -> Result<Box<dyn Tx>> {
        self.begin(org).await
    }

    /// A short name for logs and errors, such as `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Whether the store runs one writing transaction at a time (SQLite's single writer): then
    /// operations that arrive together are best carried out in one transaction, one commit.
    fn one_writer_at_a_time(&self) -> bool {
        false
    }

    /// The same store on a pool of its own of at most `connections` connections, each opened by
    /// the runtime that first needs it, so that its replies wake that runtime (an engine's thread
    /// for its batches); `None` when the backend has no connections to open (SQLite).
    fn on_own_connections(&self, connections: u32) -> Option<Arc<dyn Store>> {
        let _ = connections;
        None
    }

    /// Hints between processes that share this store; `None` when one process owns it.
    fn notifications(&self) -> Option<Arc<dyn Notifications>> {
        None
    }

    /// Stores a new API key. Fails with [`crate::Error::AlreadyExists`] when its id or hash is taken.
    async fn insert_api_key(&self, key: &ApiKey) -> Result<()>;
    /// The key whose secret hashes to `hash`, of any org: credentials are checked before the org
    /// is known.
    async fn api_key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>>;
    /// Whether any org has a key, revoked ones included; with none, the gateway serves only
    /// loopback clients.
    async fn has_api_keys(&self) -> Result<bool>;
    /// The keys of `org`, or of every org, oldest first: for the operator, never for a request.
    async fn api_keys(&self, org: Option<&OrgId>) -> Result<Vec<ApiKey>>;
    /// Marks a key revoked at `at` (a key revoked before keeps its time); the key as it is now,
    /// or `None` when no key has this id. For the operator, never for a request.
    async fn revoke_api_key(&self, id: &str, at: Timestamp) -> Result<Option<ApiKey>>;

    /// Records that an executor (one gateway process) is alive, and ends the leases of those that
    /// are not: see [`Beat`]. One transaction, outside any org: executors serve every org.
    async fn beat(&self, beat: &Beat<'_>) -> Result<BeatReport>;
}

/// One heartbeat of an executor.
///
/// The executor's row says it was alive at `at`. Executors taken for dead now are those other than
/// this one whose last beat is older than `stale_before`, and — when `starting` — every earlier
/// executor of the same `name` (a restart: the process before this one is gone). A dead executor's
/// leases on pending effects and its undo claims end at `at`, so its calls are in doubt at once and
/// its undos may be taken over, instead of when their leases would have run out.
#[derive(Debug, Clone)]
pub struct Beat<'a> {
    /// The executor id, unique per process (the lease holder of the effects it runs).
    pub executor: &'a str,
    /// Stable across restarts of the same gateway (its host and listen address).
    pub name: &'a str,
    pub at: Timestamp,
    pub stale_before: Timestamp,
    pub starting: bool,
}

/// What a [`Beat`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BeatReport {
    /// The executors taken for dead by this beat.
    pub dead: Vec<String>,
    /// How many leases (on effects and undo claims) of dead executors this beat ended.
    pub leases_ended: u64,
    /// This executor had been taken for dead by another (it stopped beating for a while): the
    /// calls it was running then are in doubt.
    pub was_taken_for_dead: bool,
}

/// Which effect [`Tx::session_with_effects`] reads beside the session.
#[derive(Debug, Clone, Copy)]
pub enum EffectLookup<'a> {
    Nothing,
    /// As [`Tx::latest_effect_by_signature`].
    LatestBySignature(&'a Signature),
    /// As [`Tx::latest_effect_by_key`].
    LatestByKey(&'a str),
}

/// One transaction over one org's rows. Dropped without [`Tx::commit`], it rolls back.
///
/// Writes may travel later than their call, with the transaction's next read or its commit (the
/// PostgreSQL backend sends them so, to save round trips); a write's error — [`crate::Error::AlreadyExists`],
/// [`crate::Error::NotFound`] — then comes from that read or commit, and the transaction is over:
/// none of its writes is kept. Reads always see the transaction's own earlier writes.
#[async_trait]
pub trait Tx: Send {
    /// Serializes transactions that take the same key until they end. Transactions of one
    /// backend that cannot run concurrently anyway may take no extra lock.
    async fn lock(&mut self, key: LockKey) -> Result<()>;

    /// The session, which no other transaction may change until this one ends: a transaction
    /// that reads a session and writes it back never overwrites a newer copy.
    async fn session(&mut self, id: &SessionId) -> Result<Option<Session>>;
    /// Inserts the session or replaces the stored one.
    async fn put_session(&mut self, session: &Session) -> Result<()>;
    /// Every session of the org, oldest first.
    async fn sessions(&mut self) -> Result<Vec<Session>>;
    /// The sessions of the org that belong to `caller` ([`Session::belongs_to`]), oldest first:
    /// those it opened, its runs, and those recorded with no opener.
    async fn sessions_of(&mut self, caller: &str) -> Result<Vec<Session>>;
    /// The newest implicit run of `principal` (the session whose `run_of` it is), if any.
    async fn latest_run(&mut self, principal: &str) -> Result<Option<Session>>;

    async fn effect(&mut self, id: EffectId) -> Result<Option<Effect>>;
    /// The effects with these ids, in any order; ids with no effect are left out. A backend may
    /// read them all in one round trip.
    async fn effects(&mut self, ids: &[EffectId]) -> Result<Vec<Effect>> {
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            found.extend(self.effect(*id).await?);
        }
        Ok(found)
    }
    /// [`Tx::session`] (locked the same way) and effect lookups, read together: a backend may
    /// send them all in one round trip. One answer per lookup, in order.
    async fn session_with_effects(
        &mut self,
        session: &SessionId,
        lookups: &[EffectLookup<'_>],
    ) -> Result<(Option<Session>, Vec<Option<Effect>>)> {
        let session = self.session(session).await?;
        let mut effects = Vec::with_capacity(lookups.len());
        for lookup in lookups {
            effects.push(match lookup {
                EffectLookup::Nothing => None,
                EffectLookup::LatestBySignature(signature) => {
                    self.latest_effect_by_signature(signature).await?
                }
                EffectLookup::LatestByKey(key) => self.latest_effect_by_key(key).await?,
            });
        }
        Ok((session, effects))
    }
    /// The newest effect with this signature.
    async fn latest_effect_by_signature(&mut self, signature: &Signature)
    -> Result<Option<Effect>>;
    /// The newest effect with this client-supplied idempotency key.
    async fn latest_effect_by_key(&mut self, key: &str) -> Result<Option<Effect>>;
    /// Fails with [`crate::Error::AlreadyExists`] when the id is taken.
    async fn insert_effect(&mut self, effect: &Effect) -> Result<()>;
    /// Fails with [`crate::Error::NotFound`] when there is no such effect.
    async fn update_effect(&mut self, effect: &Effect) -> Result<()>;
    /// Writes `after` over the session, provided the stored one is still `before` (as the caller
    /// last saw it, without reading it in this transaction); otherwise fails with
    /// [`crate::Error::Changed`] and the transaction is over. For writes decided on a remembered
    /// row: the store checks, where it writes, what the caller did not read.
    async fn replace_session(&mut self, before: &Session, after: &Session) -> Result<()> {
        match self.session(&before.id).await? {
            Some(stored) if stored == *before => self.put_session(after).await,
            _ => Err(crate::Error::Changed {
                what: "session",
                id: before.id.to_string(),
            }),
        }
    }
    /// As [`Tx::replace_session`], for an effect: `after` is written over it, provided it is still
    /// `before`.
    async fn replace_effect(&mut self, before: &Effect, after: &Effect) -> Result<()> {
        match self.effect(before.id).await? {
            Some(stored) if stored == *before => self.update_effect(after).await,
            _ => Err(crate::Error::Changed {
                what: "effect",
                id: before.id.to_string(),
            }),
        }
    }
    /// Fails with [`crate::Error::Changed`] (and the transaction is over) when an effect matches
    /// `lookup`: the condition of an intercept decided without reading, on the assumption that
    /// the call is new. Nothing for [`EffectLookup::Nothing`].
    async fn expect_no_effect(&mut self, lookup: EffectLookup<'_>) -> Result<()> {
        let (found, value) = match lookup {
            EffectLookup::Nothing => return Ok(()),
            EffectLookup::LatestBySignature(signature) => (
                self.latest_effect_by_signature(signature).await?,
                signature.as_str(),
            ),
            EffectLookup::LatestByKey(key) => (self.latest_effect_by_key(key).await?, key),
        };
        match found {
            None => Ok(()),
            Some(_) => Err(crate::Error::Changed {
                what: "call",
                id: value.to_owned(),
            }),
        }
    }
    /// A session's effects in order of interception.
    async fn session_effects(&mut self, session: &SessionId) -> Result<Vec<Effect>>;
    /// Pending effects whose lease ended at or before `now`: their executor is gone (or gave
    /// up on the call).
    async fn expired_leases(&mut self, now: Timestamp) -> Result<Vec<Effect>>;

    async fn approval(&mut self, id: ApprovalId) -> Result<Option<Approval>>;
    async fn insert_approval(&mut self, approval: &Approval) -> Result<()>;
    async fn update_approval(&mut self, approval: &Approval) -> Result<()>;
    /// The org's approvals, oldest first, optionally only those in one state.
    async fn approvals(&mut self, state: Option<ApprovalState>) -> Result<Vec<Approval>>;

    /// Pushes a completed effect onto its session's undo stack.
    async fn push_undo(
        &mut self,
        session: &SessionId,
        effect: EffectId,
        at: Timestamp,
    ) -> Result<()>;
    /// The undo stack, bottom (first completed) to top (last completed).
    async fn undo_stack(&mut self, session: &SessionId) -> Result<Vec<EffectId>>;

    async fn insert_snapshot(&mut self, snapshot: &Snapshot) -> Result<()>;
    /// A session's snapshots, oldest first.
    async fn snapshots(&mut self, session: &SessionId) -> Result<Vec<Snapshot>>;

    /// Makes every write of this transaction durable and visible, or none of them.
    async fn commit(self: Box<Self>) -> Result<()>;
}
