-- Effects are found by id through a key that leads with the id, version 10.
--
-- Migration 9 made the lookup indexes lead with the column that selects, but the unique key that
-- references to an effect need, `(org, id)`, still led with `org`, which narrows nothing. A plan
-- a connection keeps is made once, on the table as it is then: made while the log was a page or
-- two, the earlier-effect check of a new call could find its way through that key (every effect
-- of the org read, each compared by signature), and kept that plan as the log grew, at every call,
-- until autovacuum analyzed the table again. With the key as `(id, org)`, no index on effects
-- leads with `org` but the partial ones, which a lookup by signature or by id cannot use.

ALTER TABLE approvals DROP CONSTRAINT approvals_org_effect_id_fkey;
ALTER TABLE undo_stack DROP CONSTRAINT undo_stack_org_effect_id_fkey;
ALTER TABLE effects DROP CONSTRAINT effects_org_id_key;
ALTER TABLE effects ADD CONSTRAINT effects_id_org_key UNIQUE (id, org);
ALTER TABLE approvals ADD CONSTRAINT approvals_org_effect_id_fkey
    FOREIGN KEY (org, effect_id) REFERENCES effects (org, id);
ALTER TABLE undo_stack ADD CONSTRAINT undo_stack_org_effect_id_fkey
    FOREIGN KEY (org, effect_id) REFERENCES effects (org, id);
