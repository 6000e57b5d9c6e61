-- Executors and their heartbeats, version 5.
--
-- Each gateway process is an executor: it holds the leases of the calls it runs. Its row says when
-- it last beat; a process that restarts (same name) or stops beating is taken for dead, and the
-- leases it held end at once, so its calls are in doubt within seconds instead of when a long
-- lease would have run out. Executors serve every org: the table holds no org data.

CREATE TABLE executors (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL,
    started_at INTEGER NOT NULL,
    beat_at    INTEGER NOT NULL,
    dead_at    INTEGER
);
CREATE INDEX executors_alive ON executors (beat_at) WHERE dead_at IS NULL;
CREATE INDEX effects_pending_by_holder ON effects (lease_holder) WHERE state = 'pending';
