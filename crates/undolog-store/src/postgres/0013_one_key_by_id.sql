-- One unique key on an effect's id, version 13.
--
-- Effects had two unique keys on their id: the primary key `(id)` of version 1, and `(id, org)`,
-- which references to an effect need and by which every query finds one (version 10). Every
-- effect written, and every outcome (an update that changes indexed columns, so a new index entry
-- in each), paid for both. The key `(id, org)` is the one kept: an id is unique in its org, which
-- is all any query or reference asks (each names the org, and row-level security confines each
-- to one), and ids are UUIDv7s the gateway makes. It becomes the replica identity, as the primary
-- key was.

ALTER TABLE effects DROP CONSTRAINT effects_pkey;
ALTER TABLE effects REPLICA IDENTITY USING INDEX effects_id_org_key;
