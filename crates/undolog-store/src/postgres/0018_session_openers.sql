-- Session openers, version 18: the credential that opened a session, whose alone it is (other
-- agents of the org may neither join it nor read it). Sessions from before have none, and stay
-- open to the whole org as they were. Like `run_of`, it never changes: the conditional writes
-- of sessions compare no opener.
ALTER TABLE sessions ADD COLUMN opened_by TEXT;
CREATE INDEX sessions_by_opener ON sessions (org, opened_by, created_at) WHERE opened_by IS NOT NULL;
