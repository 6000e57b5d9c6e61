-- The effect log, version 1. Every table that holds org data leads with `org`.

CREATE TABLE sessions (
    org           TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    next_seq      INTEGER NOT NULL,
    failed_effect TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (org, id)
);

CREATE TABLE effects (
    id               TEXT    PRIMARY KEY,
    org              TEXT    NOT NULL,
    session          TEXT    NOT NULL,
    seq              INTEGER NOT NULL,
    tool             TEXT    NOT NULL,
    args             TEXT    NOT NULL,
    step             INTEGER,
    signature        TEXT    NOT NULL,
    idempotency_key  TEXT,
    tier             TEXT    NOT NULL,
    compensation     TEXT,
    state            TEXT    NOT NULL,
    result           TEXT,
    error            TEXT,
    approval         TEXT,
    lease_holder     TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    completed_at     INTEGER,
    UNIQUE (org, session, seq),
    FOREIGN KEY (org, session) REFERENCES sessions (org, id)
);
CREATE INDEX effects_by_signature ON effects (org, signature, seq);
CREATE INDEX effects_by_key ON effects (org, idempotency_key, created_at)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX effects_pending ON effects (org, lease_expires_at) WHERE state = 'pending';

CREATE TABLE undo_stack (
    org       TEXT    NOT NULL,
    session   TEXT    NOT NULL,
    position  INTEGER NOT NULL,
    effect_id TEXT    NOT NULL REFERENCES effects (id),
    pushed_at INTEGER NOT NULL,
    PRIMARY KEY (org, session, position)
);

CREATE TABLE approvals (
    id           TEXT    PRIMARY KEY,
    org          TEXT    NOT NULL,
    session      TEXT    NOT NULL,
    effect_id    TEXT    NOT NULL REFERENCES effects (id),
    signature    TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    requested_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    decided_by   TEXT,
    decided_at   INTEGER,
    reason       TEXT
);
CREATE INDEX approvals_by_state ON approvals (org, state, requested_at);

CREATE TABLE session_snapshots (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    org      TEXT    NOT NULL,
    session  TEXT    NOT NULL,
    taken_at INTEGER NOT NULL,
    body     TEXT    NOT NULL
);
CREATE INDEX session_snapshots_by_session ON session_snapshots (org, session, id);
