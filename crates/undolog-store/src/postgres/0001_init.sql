-- The effect log, version 1, for PostgreSQL. Every table that holds org data leads with `org`, and
-- row-level security confines the application role `undolog_app` to the org that its transaction
-- names in the setting `app.org_id`.
--
-- The role does not own the tables (the user that runs this migration does), so the policies hold
-- for it; FORCE makes them hold for a non-superuser owner too. Superusers bypass row-level security
-- whatever is forced, which is why every transaction of the store switches to `undolog_app` first.
--
-- JSON (args, results, compensations, snapshot bodies) is kept as the exact text undolog wrote, so
-- a replayed result is byte-identical to the first one.

-- Roles belong to the whole cluster: several databases (and test runs) share this one, and two of
-- them may create it at the same moment.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'undolog_app') THEN
        CREATE ROLE undolog_app NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created concurrently by a migration of another database
END
$$;

-- The migrating user must be able to `SET ROLE undolog_app` (a superuser always can).
DO $$
BEGIN
    IF NOT pg_catalog.pg_has_role(current_user, 'undolog_app', 'MEMBER') THEN
        EXECUTE format('GRANT undolog_app TO %I', current_user);
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO undolog_app', current_schema());
END
$$;

CREATE TABLE sessions (
    org           TEXT   NOT NULL,
    id            TEXT   NOT NULL,
    state         TEXT   NOT NULL,
    next_seq      BIGINT NOT NULL,
    failed_effect TEXT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (org, id)
);

-- References between tables include `org`, so a row can only point at a row of its own org.
CREATE TABLE effects (
    id               TEXT   PRIMARY KEY,
    org              TEXT   NOT NULL,
    session          TEXT   NOT NULL,
    seq              BIGINT NOT NULL,
    tool             TEXT   NOT NULL,
    args             TEXT   NOT NULL,
    step             BIGINT,
    signature        TEXT   NOT NULL,
    idempotency_key  TEXT,
    tier             TEXT   NOT NULL,
    compensation     TEXT,
    state            TEXT   NOT NULL,
    result           TEXT,
    error            TEXT,
    approval         TEXT,
    lease_holder     TEXT,
    lease_expires_at BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    completed_at     BIGINT,
    UNIQUE (org, id),
    UNIQUE (org, session, seq),
    FOREIGN KEY (org, session) REFERENCES sessions (org, id)
);
CREATE INDEX effects_by_signature ON effects (org, signature, seq);
CREATE INDEX effects_by_key ON effects (org, idempotency_key, created_at)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX effects_pending ON effects (org, lease_expires_at) WHERE state = 'pending';

-- `position` comes from a sequence, so two transactions pushing onto one session's stack at once
-- never collide; the stack is read in position order.
CREATE TABLE undo_stack (
    org       TEXT   NOT NULL,
    session   TEXT   NOT NULL,
    position  BIGINT GENERATED ALWAYS AS IDENTITY,
    effect_id TEXT   NOT NULL,
    pushed_at BIGINT NOT NULL,
    PRIMARY KEY (org, session, position),
    FOREIGN KEY (org, effect_id) REFERENCES effects (org, id)
);

CREATE TABLE approvals (
    id           TEXT   PRIMARY KEY,
    org          TEXT   NOT NULL,
    session      TEXT   NOT NULL,
    effect_id    TEXT   NOT NULL,
    signature    TEXT   NOT NULL,
    state        TEXT   NOT NULL,
    requested_at BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    decided_by   TEXT,
    decided_at   BIGINT,
    reason       TEXT,
    FOREIGN KEY (org, effect_id) REFERENCES effects (org, id)
);
CREATE INDEX approvals_by_state ON approvals (org, state, requested_at);

CREATE TABLE session_snapshots (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org      TEXT   NOT NULL,
    session  TEXT   NOT NULL,
    taken_at BIGINT NOT NULL,
    body     TEXT   NOT NULL
);
CREATE INDEX session_snapshots_by_session ON session_snapshots (org, session, id);

-- The log is appended to and updated, never deleted from, by the application.
GRANT SELECT, INSERT, UPDATE ON sessions, effects, approvals TO undolog_app;
GRANT SELECT, INSERT ON undo_stack, session_snapshots TO undolog_app;

ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY org_isolation ON sessions
    USING (org = current_setting('app.org_id', true))
    WITH CHECK (org = current_setting('app.org_id', true));

ALTER TABLE effects ENABLE ROW LEVEL SECURITY;
ALTER TABLE effects FORCE ROW LEVEL SECURITY;
CREATE POLICY org_isolation ON effects
    USING (org = current_setting('app.org_id', true))
    WITH CHECK (org = current_setting('app.org_id', true));

ALTER TABLE undo_stack ENABLE ROW LEVEL SECURITY;
ALTER TABLE undo_stack FORCE ROW LEVEL SECURITY;
CREATE POLICY org_isolation ON undo_stack
    USING (org = current_setting('app.org_id', true))
    WITH CHECK (org = current_setting('app.org_id', true));

ALTER TABLE approvals ENABLE ROW LEVEL SECURITY;
ALTER TABLE approvals FORCE ROW LEVEL SECURITY;
CREATE POLICY org_isolation ON approvals
    USING (org = current_setting('app.org_id', true))
    WITH CHECK (org = current_setting('app.org_id', true));

ALTER TABLE session_snapshots ENABLE ROW LEVEL SECURITY;
ALTER TABLE session_snapshots FORCE ROW LEVEL SECURITY;
CREATE POLICY org_isolation ON session_snapshots
    USING (org = current_setting('app.org_id', true))
    WITH CHECK (org = current_setting('app.org_id', true));
