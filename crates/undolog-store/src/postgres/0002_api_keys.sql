-- API keys, version 2. Only a hash of each key is kept; the key itself is shown once, at creation.
--
-- A key is looked up before its org is known, so no `app.org_id` policy can admit the lookup. The
-- application role therefore gets no SELECT on this table at all: it may only insert a key for the
-- org its transaction names, and call two functions that run as the table's owner (SECURITY
-- DEFINER) — one returns the row of one exact hash, the other whether any key exists. A policy
-- such as `USING (true)` for SELECT would have let the role list every org's keys; the functions
-- cannot. Their search_path is pinned so that no object of another schema can stand in for
-- `api_keys`.

CREATE TABLE api_keys (
    id         TEXT   PRIMARY KEY,
    org        TEXT   NOT NULL,
    hash       TEXT   NOT NULL UNIQUE,
    label      TEXT,
    created_at BIGINT NOT NULL
);

GRANT INSERT ON api_keys TO undolog_app;

ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY insert_own_org ON api_keys FOR INSERT TO undolog_app
    WITH CHECK (org = current_setting('app.org_id', true));
-- The owner (CURRENT_USER here is the migrating user), and so the two functions below, may read.
CREATE POLICY owner_reads ON api_keys FOR SELECT TO CURRENT_USER USING (true);

CREATE FUNCTION undolog_api_key_by_hash(key_hash TEXT)
RETURNS TABLE (id TEXT, org TEXT, hash TEXT, label TEXT, created_at BIGINT)
LANGUAGE sql STABLE SECURITY DEFINER
AS $$
    SELECT k.id, k.org, k.hash, k.label, k.created_at FROM api_keys AS k WHERE k.hash = key_hash
$$;

CREATE FUNCTION undolog_has_api_keys()
RETURNS BOOLEAN
LANGUAGE sql STABLE SECURITY DEFINER
AS $$
    SELECT EXISTS (SELECT 1 FROM api_keys)
$$;

DO $$
BEGIN
    EXECUTE format(
        'ALTER FUNCTION undolog_api_key_by_hash(TEXT) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
    EXECUTE format(
        'ALTER FUNCTION undolog_has_api_keys() SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;

REVOKE ALL ON FUNCTION undolog_api_key_by_hash(TEXT), undolog_has_api_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION undolog_api_key_by_hash(TEXT), undolog_has_api_keys() TO undolog_app;
