-- Roles, revocation, four eyes and undo claims, version 3.
--
-- Keys made before roles existed become agents (least privilege): make approver and admin keys
-- with `undolog keys create --role`. An approval names who made the call, so that principal
-- cannot decide it. A session being undone names the undo that owns it until the claim runs out.

ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'agent';
ALTER TABLE api_keys ADD COLUMN revoked_at INTEGER;

ALTER TABLE approvals ADD COLUMN requested_by TEXT;
-- Who recorded the outcome of an in-doubt effect by hand.
ALTER TABLE effects ADD COLUMN resolved_by TEXT;

ALTER TABLE sessions ADD COLUMN undo_holder TEXT;
ALTER TABLE sessions ADD COLUMN undo_expires_at INTEGER;

-- A run the gateway started for a principal whose client names no session: that principal.
ALTER TABLE sessions ADD COLUMN run_of TEXT;
CREATE INDEX sessions_by_run ON sessions (org, run_of, created_at) WHERE run_of IS NOT NULL;
