-- Executors and their heartbeats, version 6.
--
-- Each gateway process is an executor: it holds the leases of the calls it runs. Its row says when
-- it last beat; a process that restarts (same name) or stops beating is taken for dead, and the
-- leases it held end at once, so its calls are in doubt within seconds instead of when a long
-- lease would have run out. Executors serve every org: the table holds no org data, and only the
-- owning user (the store's own connection, outside any org's transaction) touches it; the
-- application role has no privilege on it.
--
-- Ending a dead executor's leases crosses orgs. The owner still sees no org's rows, except
-- exactly these: pending effects whose lease holder is dead, and sessions whose undo claim is
-- held by an undo a dead executor ran (`EXECUTOR/undo-…`). Those it may read and update, and nothing else.

CREATE TABLE executors (
    id         TEXT   PRIMARY KEY,
    name       TEXT   NOT NULL,
    started_at BIGINT NOT NULL,
    beat_at    BIGINT NOT NULL,
    dead_at    BIGINT
);
CREATE INDEX executors_alive ON executors (beat_at) WHERE dead_at IS NULL;
CREATE INDEX effects_pending_by_holder ON effects (lease_holder) WHERE state = 'pending';

ALTER TABLE executors ENABLE ROW LEVEL SECURITY;
ALTER TABLE executors FORCE ROW LEVEL SECURITY;
CREATE POLICY owner_only ON executors TO CURRENT_USER USING (true) WITH CHECK (true);

CREATE POLICY owner_ends_dead_leases ON effects FOR SELECT TO CURRENT_USER
    USING (state = 'pending' AND lease_holder IN (SELECT id FROM executors WHERE dead_at IS NOT NULL));
CREATE POLICY owner_ends_dead_leases_update ON effects FOR UPDATE TO CURRENT_USER
    USING (state = 'pending' AND lease_holder IN (SELECT id FROM executors WHERE dead_at IS NOT NULL));
CREATE POLICY owner_ends_dead_claims ON sessions FOR SELECT TO CURRENT_USER
    USING (EXISTS (SELECT 1 FROM executors x WHERE x.dead_at IS NOT NULL
                   AND substr(undo_holder, 1, length(x.id) + 6) = x.id || '/undo-'));
CREATE POLICY owner_ends_dead_claims_update ON sessions FOR UPDATE TO CURRENT_USER
    USING (EXISTS (SELECT 1 FROM executors x WHERE x.dead_at IS NOT NULL
                   AND substr(undo_holder, 1, length(x.id) + 6) = x.id || '/undo-'));
