-- API keys, version 2. Only a hash of each key is kept; the key itself is shown once, at creation.

CREATE TABLE api_keys (
    id         TEXT    PRIMARY KEY,
    org        TEXT    NOT NULL,
    hash       TEXT    NOT NULL UNIQUE,
    label      TEXT,
    created_at INTEGER NOT NULL
);
