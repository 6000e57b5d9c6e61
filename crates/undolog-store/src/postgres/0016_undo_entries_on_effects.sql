-- Undo entries on their effects, version 16.
--
-- An undo entry was a row of its own in `undo_stack`: the outcome of every compensable call
-- inserted one (a heap tuple, a primary-key entry and a statement of its own in the outcome's
-- function) beside the update of its effect. An effect is pushed once, onto its own session's
-- stack, when it completes, so its entry becomes two columns of the row that outcome updates
-- anyway: its position, from a sequence (two transactions pushing at once never collide, and the
-- stack is read in position order), and when it was pushed. A session's stack is its effects that
-- have a position (found by session, through `effects_session_seq_key`), in position order.
-- Measured: the outcome's function 37-40 µs -> 31-33 µs a call on the server (bench/lab/).
--
-- The entries already kept move onto their effects, with their positions. Row-level security is
-- forced on both tables, on their owner too, so it is lifted for the move and forced again in this
-- same transaction.

ALTER TABLE effects ADD COLUMN undo_position BIGINT, ADD COLUMN undo_pushed_at BIGINT;
CREATE SEQUENCE effects_undo_position_seq;
GRANT USAGE ON SEQUENCE effects_undo_position_seq TO undolog_app;

ALTER TABLE effects NO FORCE ROW LEVEL SECURITY;
ALTER TABLE undo_stack NO FORCE ROW LEVEL SECURITY;
UPDATE effects e SET undo_position = u.position, undo_pushed_at = u.pushed_at
  FROM (SELECT DISTINCT ON (org, effect_id) org, effect_id, position, pushed_at
          FROM undo_stack ORDER BY org, effect_id, position DESC) u
 WHERE e.org = u.org AND e.id = u.effect_id;
SELECT setval('effects_undo_position_seq', COALESCE((SELECT max(position) FROM undo_stack), 0) + 1,
              false);
ALTER TABLE effects FORCE ROW LEVEL SECURITY;
DROP TABLE undo_stack;

-- Either push is refused, and with it its transaction, unless the effect was found in the session
-- named. The effect is found by its id alone, so that the plan a connection keeps is always the
-- one-row lookup by `effects_id_org_key`, never a walk of the session's effects.
CREATE OR REPLACE FUNCTION undolog_replace_effect_push_undo(
    p_org TEXT, p_id TEXT,
    was_state TEXT, was_error TEXT, was_approval TEXT, was_lease_holder TEXT,
    was_lease_expires_at BIGINT, was_updated_at BIGINT, was_completed_at BIGINT,
    was_resolved_by TEXT,
    new_state TEXT, new_result TEXT, new_error TEXT, new_approval TEXT, new_lease_holder TEXT,
    new_lease_expires_at BIGINT, new_updated_at BIGINT, new_completed_at BIGINT,
    new_resolved_by TEXT, new_verdicts TEXT,
    p_session TEXT, p_pushed_at BIGINT) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    v_session TEXT;
BEGIN
    UPDATE effects SET state = new_state, result = new_result, error = new_error,
           approval = new_approval, lease_holder = new_lease_holder,
           lease_expires_at = new_lease_expires_at, updated_at = new_updated_at,
           completed_at = new_completed_at, resolved_by = new_resolved_by, verdicts = new_verdicts,
           undo_position = nextval('effects_undo_position_seq'), undo_pushed_at = p_pushed_at
     WHERE org = p_org AND id = p_id AND state = was_state
       AND error IS NOT DISTINCT FROM was_error
       AND approval IS NOT DISTINCT FROM was_approval
       AND lease_holder IS NOT DISTINCT FROM was_lease_holder
       AND lease_expires_at IS NOT DISTINCT FROM was_lease_expires_at
       AND updated_at = was_updated_at
       AND completed_at IS NOT DISTINCT FROM was_completed_at
       AND resolved_by IS NOT DISTINCT FROM was_resolved_by
    RETURNING session INTO v_session;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'effect % changed since it was read', p_id USING ERRCODE = 'UL001';
    END IF;
    IF v_session IS DISTINCT FROM p_session THEN
        RAISE EXCEPTION 'no effect % in session % to push onto its undo stack', p_id, p_session
            USING ERRCODE = 'no_data_found';
    END IF;
END
$$;

-- A push on its own, not joined to an outcome.
CREATE OR REPLACE FUNCTION undolog_push_undo(p_org TEXT, p_session TEXT, p_effect TEXT, p_at BIGINT)
RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    v_session TEXT;
BEGIN
    UPDATE effects SET undo_position = nextval('effects_undo_position_seq'), undo_pushed_at = p_at
     WHERE org = p_org AND id = p_effect
    RETURNING session INTO v_session;
    IF v_session IS DISTINCT FROM p_session THEN
        RAISE EXCEPTION 'no effect % in session % to push onto its undo stack', p_effect, p_session
            USING ERRCODE = 'no_data_found';
    END IF;
END
$$;
