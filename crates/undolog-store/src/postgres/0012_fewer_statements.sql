-- Fewer statements per call, version 12.
--
-- Every statement the store sends is parsed, analysed and planned by the server, and every
-- statement a function runs starts an executor of its own; at a few dozen calls per transaction
-- (the gateway's group commit) that was a quarter of the server's time. So:
--
-- * A transaction's advisory locks are one statement (`undolog_lock_calls`), taken in the order
--   given, which the store keeps sorted: two transactions that take several take them in the same
--   order, and never wait for each other in a circle.
-- * A call's outcome and the undo entry of its effect are one function
--   (`undolog_replace_effect_push_undo`), as `undolog_replace_effect` then `undolog_push_undo`.
-- * A new call's effect is inserted unless an earlier effect of the call exists, in one statement
--   (`undolog_insert_new_effect`, whose check and insert were two).

CREATE FUNCTION undolog_lock_calls(p_keys BIGINT[]) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    k BIGINT;
BEGIN
    FOREACH k IN ARRAY p_keys LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
END
$$;

CREATE FUNCTION undolog_replace_effect_push_undo(
    p_org TEXT, p_id TEXT,
    was_state TEXT, was_error TEXT, was_approval TEXT, was_lease_holder TEXT,
    was_lease_expires_at BIGINT, was_updated_at BIGINT, was_completed_at BIGINT,
    was_resolved_by TEXT,
    new_state TEXT, new_result TEXT, new_error TEXT, new_approval TEXT, new_lease_holder TEXT,
    new_lease_expires_at BIGINT, new_updated_at BIGINT, new_completed_at BIGINT,
    new_resolved_by TEXT, new_verdicts TEXT,
    p_session TEXT, p_pushed_at BIGINT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE effects SET state = new_state, result = new_result, error = new_error,
           approval = new_approval, lease_holder = new_lease_holder,
           lease_expires_at = new_lease_expires_at, updated_at = new_updated_at,
           completed_at = new_completed_at, resolved_by = new_resolved_by, verdicts = new_verdicts
     WHERE org = p_org AND id = p_id AND state = was_state
       AND error IS NOT DISTINCT FROM was_error
       AND approval IS NOT DISTINCT FROM was_approval
       AND lease_holder IS NOT DISTINCT FROM was_lease_holder
       AND lease_expires_at IS NOT DISTINCT FROM was_lease_expires_at
       AND updated_at = was_updated_at
       AND completed_at IS NOT DISTINCT FROM was_completed_at
       AND resolved_by IS NOT DISTINCT FROM was_resolved_by;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'effect % changed since it was read', p_id USING ERRCODE = 'UL001';
    END IF;
    INSERT INTO undo_stack (org, session, effect_id, pushed_at)
    VALUES (p_org, p_session, p_id, p_pushed_at);
END
$$;

CREATE OR REPLACE FUNCTION undolog_insert_new_effect(
    p_org TEXT, p_id TEXT, p_session TEXT, p_seq BIGINT, p_tool TEXT, p_args TEXT, p_step BIGINT,
    p_signature TEXT, p_idempotency_key TEXT, p_tier TEXT, p_compensation TEXT, p_state TEXT,
    p_result TEXT, p_error TEXT, p_approval TEXT, p_lease_holder TEXT, p_lease_expires_at BIGINT,
    p_created_at BIGINT, p_updated_at BIGINT, p_completed_at BIGINT, p_resolved_by TEXT,
    p_verdicts TEXT, p_by TEXT, p_value TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    IF p_by = 'key' THEN
        INSERT INTO effects (org, id, session, seq, tool, args, step, signature, idempotency_key,
                             tier, compensation, state, result, error, approval, lease_holder,
                             lease_expires_at, created_at, updated_at, completed_at, resolved_by,
                             verdicts)
        SELECT p_org, p_id, p_session, p_seq, p_tool, p_args, p_step, p_signature,
               p_idempotency_key, p_tier, p_compensation, p_state, p_result, p_error, p_approval,
               p_lease_holder, p_lease_expires_at, p_created_at, p_updated_at, p_completed_at,
               p_resolved_by, p_verdicts
        WHERE NOT EXISTS (SELECT FROM effects WHERE org = p_org AND idempotency_key = p_value);
    ELSE
        INSERT INTO effects (org, id, session, seq, tool, args, step, signature, idempotency_key,
                             tier, compensation, state, result, error, approval, lease_holder,
                             lease_expires_at, created_at, updated_at, completed_at, resolved_by,
                             verdicts)
        SELECT p_org, p_id, p_session, p_seq, p_tool, p_args, p_step, p_signature,
               p_idempotency_key, p_tier, p_compensation, p_state, p_result, p_error, p_approval,
               p_lease_holder, p_lease_expires_at, p_created_at, p_updated_at, p_completed_at,
               p_resolved_by, p_verdicts
        WHERE NOT EXISTS (SELECT FROM effects WHERE org = p_org AND signature = p_value);
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'an earlier call with % % exists', p_by, p_value USING ERRCODE = 'UL001';
    END IF;
END
$$;

GRANT EXECUTE ON FUNCTION undolog_lock_calls(BIGINT[]) TO undolog_app;
GRANT EXECUTE ON FUNCTION undolog_replace_effect_push_undo(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT,
    BIGINT, BIGINT, BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, TEXT, TEXT,
    TEXT, BIGINT) TO undolog_app;
