-- Roles, revocation, four eyes and undo claims, version 4.
--
-- Keys made before roles existed become agents (least privilege): make approver and admin keys
-- with `undolog keys create --role`. An approval names who made the call, so that principal
-- cannot decide it. A session being undone names the undo that owns it until the claim runs out.
--
-- Listing and revoking keys are the operator's (`undolog keys list`, `keys revoke`): they run as
-- the owning user, not as `undolog_app`, which still cannot read the table.

ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'agent'
    CHECK (role IN ('agent', 'approver', 'admin'));
ALTER TABLE api_keys ADD COLUMN revoked_at BIGINT;
CREATE POLICY owner_revokes ON api_keys FOR UPDATE TO CURRENT_USER USING (true);

-- The lookup now answers the role and whether the key was revoked; its result type changes, so
-- it is made anew (with the same pinned search_path and grants).
DROP FUNCTION undolog_api_key_by_hash(TEXT);
CREATE FUNCTION undolog_api_key_by_hash(key_hash TEXT)
RETURNS TABLE (id TEXT, org TEXT, hash TEXT, role TEXT, label TEXT, created_at BIGINT,
               revoked_at BIGINT)
LANGUAGE sql STABLE SECURITY DEFINER
AS $$
    SELECT k.id, k.org, k.hash, k.role, k.label, k.created_at, k.revoked_at
    FROM api_keys AS k WHERE k.hash = key_hash
$$;
DO $$
BEGIN
    EXECUTE format(
        'ALTER FUNCTION undolog_api_key_by_hash(TEXT) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
REVOKE ALL ON FUNCTION undolog_api_key_by_hash(TEXT) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION undolog_api_key_by_hash(TEXT) TO undolog_app;

ALTER TABLE approvals ADD COLUMN requested_by TEXT;
-- Who recorded the outcome of an in-doubt effect by hand.
ALTER TABLE effects ADD COLUMN resolved_by TEXT;

ALTER TABLE sessions ADD COLUMN undo_holder TEXT;
ALTER TABLE sessions ADD COLUMN undo_expires_at BIGINT;

-- A run the gateway started for a principal whose client names no session: that principal.
ALTER TABLE sessions ADD COLUMN run_of TEXT;
CREATE INDEX sessions_by_run ON sessions (org, run_of, created_at) WHERE run_of IS NOT NULL;
