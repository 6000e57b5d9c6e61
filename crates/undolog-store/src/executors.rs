//! The statements of [`crate::Store::beat`], the same text for both backends (`$n` parameters
//! read the same in SQLite and PostgreSQL). Each backend runs them in order in one transaction
//! (`sqlite::executors`, `postgres::executors`).

/// `$1` executor: whether another executor took this one for dead (a row with `dead_at`).
pub(crate) const WAS_DEAD: &str = "SELECT dead_at IS NOT NULL FROM executors WHERE id = $1";

/// `$1` executor, `$2` name, `$3` now: this executor is alive.
pub(crate) const ALIVE: &str = "INSERT INTO executors (id, name, started_at, beat_at, dead_at) \
     VALUES ($1, $2, $3, $3, NULL) \
     ON CONFLICT (id) DO UPDATE SET beat_at = excluded.beat_at, dead_at = NULL";

/// `$1` executor, `$2` now, `$3` stale before, `$4` starting, `$5` name: the executors now dead.
pub(crate) const TAKE_FOR_DEAD: &str = "UPDATE executors SET dead_at = $2 \
     WHERE dead_at IS NULL AND id <> $1 AND (beat_at < $3 OR ($4 AND name = $5)) RETURNING id";

/// `$1` now: the leases of dead executors on pending effects end now.
pub(crate) const END_LEASES: &str = "UPDATE effects SET lease_expires_at = $1 \
     WHERE state = 'pending' AND lease_expires_at > $1 \
     AND lease_holder IN (SELECT id FROM executors WHERE dead_at IS NOT NULL)";

/// `$1` now: the claims of undos that dead executors ran (held as `EXECUTOR/undo-…`) end now.
/// Step-by-step undos run by an SDK caller are that caller's, and keep their claims.
pub(crate) const END_CLAIMS: &str = "UPDATE sessions SET undo_expires_at = $1 \
     WHERE undo_expires_at > $1 AND EXISTS (SELECT 1 FROM executors x WHERE x.dead_at IS NOT NULL \
     AND substr(sessions.undo_holder, 1, length(x.id) + 6) = x.id || '/undo-')";

/// `$1` forget before: executors dead for long enough are forgotten (their leases ended when they
/// were taken for dead).
pub(crate) const FORGET: &str = "DELETE FROM executors WHERE dead_at < $1";

/// How long a dead executor's row is kept, in milliseconds: a week.
pub(crate) const KEEP_DEAD_MS: i64 = 7 * 24 * 60 * 60 * 1000;
