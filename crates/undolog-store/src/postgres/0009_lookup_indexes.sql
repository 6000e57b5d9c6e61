-- Lookup indexes lead with the column that selects, version 9.
--
-- Every org's rows share one value of `org`, so an index that leads with `org` narrows nothing
-- until its second column. On a table not yet analyzed (a new database, its first minute) the
-- planner does not know that: it takes `org = $1` for selective, and a plan made then, kept for
-- the connection's life, may find one effect by its id by scanning every effect of the org
-- through another index that starts with `org`. The foreign-key checks of the references to an
-- effect (an undo stack entry's, an approval's) were planned so on a new database, and each check
-- then grew with the log. Indexes for lookups by signature and by session now lead with those columns, so
-- only the index on `(org, id)` can serve a lookup by id; queries still name the org.

DROP INDEX effects_by_signature;
CREATE INDEX effects_by_signature ON effects (signature, org, seq);
ALTER TABLE effects DROP CONSTRAINT effects_org_session_seq_key;
ALTER TABLE effects ADD CONSTRAINT effects_session_seq_key UNIQUE (session, org, seq);
