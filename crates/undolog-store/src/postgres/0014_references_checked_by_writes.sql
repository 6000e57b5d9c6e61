-- References checked by the writes that make them, version 14.
--
-- An effect names its session, and an undo entry its effect. Foreign keys checked each: one more
-- query per effect written and per undo entry pushed, each with a lock on the row it found, about
-- a tenth of a call's time on the server. The store's writes establish the same thing in the
-- transaction that makes the reference, and nothing of the application deletes from these tables
-- (the role has no DELETE):
--
-- * an effect's session is read and locked, created, or written only if it is still as
--   remembered (`undolog_replace_session` raises UL001 when the row is gone), in the transaction
--   that inserts the effect;
-- * an undo entry is pushed with the outcome of its effect, and only when the outcome's
--   conditional update found the row (`undolog_replace_effect_push_undo`), or after an update
--   that must change it (`undolog_expect_rows`).
--
-- The approvals' reference to their effect keeps its foreign key: approvals are few. Every row
-- still leads with its org, and row-level security's WITH CHECK confines it to its transaction's
-- org, so a reference names a row of the same org.

ALTER TABLE effects DROP CONSTRAINT effects_org_session_fkey;
ALTER TABLE undo_stack DROP CONSTRAINT undo_stack_org_effect_id_fkey;
