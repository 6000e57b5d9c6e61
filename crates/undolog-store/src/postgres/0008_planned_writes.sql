-- Writes planned once per connection, and writes on remembered rows, version 8.
--
-- The statements of a call's intercept and outcome are sent as text (see tx.rs), so the server
-- parses, analyses and plans each one every time; for these that was most of their cost. The
-- writes every call makes are functions instead: their plans are made once per connection, and
-- calling one is a statement the server prepares in a fraction of the time. They run as the
-- caller (`undolog_app`), so row-level security confines them to the transaction's org like any
-- other statement.
--
-- A gateway that remembers a session or an effect as it last wrote it may decide the next change
-- without reading the row again; the write then carries its condition, checked here where it is
-- made: the row is still as remembered, or no earlier effect of the call exists. When it does not
-- hold, the function raises SQLSTATE UL001, which aborts the transaction (and the COMMIT sent
-- with it); the store reads it as "changed since it was read", and the gateway reads the rows and
-- decides again.

CREATE FUNCTION undolog_insert_effect(
    p_org TEXT, p_id TEXT, p_session TEXT, p_seq BIGINT, p_tool TEXT, p_args TEXT, p_step BIGINT,
    p_signature TEXT, p_idempotency_key TEXT, p_tier TEXT, p_compensation TEXT, p_state TEXT,
    p_result TEXT, p_error TEXT, p_approval TEXT, p_lease_holder TEXT, p_lease_expires_at BIGINT,
    p_created_at BIGINT, p_updated_at BIGINT, p_completed_at BIGINT, p_resolved_by TEXT,
    p_verdicts TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO effects (org, id, session, seq, tool, args, step, signature, idempotency_key,
                         tier, compensation, state, result, error, approval, lease_holder,
                         lease_expires_at, created_at, updated_at, completed_at, resolved_by,
                         verdicts)
    VALUES (p_org, p_id, p_session, p_seq, p_tool, p_args, p_step, p_signature,
            p_idempotency_key, p_tier, p_compensation, p_state, p_result, p_error, p_approval,
            p_lease_holder, p_lease_expires_at, p_created_at, p_updated_at, p_completed_at,
            p_resolved_by, p_verdicts);
END
$$;

CREATE FUNCTION undolog_push_undo(p_org TEXT, p_session TEXT, p_effect TEXT, p_at BIGINT)
RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO undo_stack (org, session, effect_id, pushed_at)
    VALUES (p_org, p_session, p_effect, p_at);
END
$$;

CREATE FUNCTION undolog_expect_no_effect(p_org TEXT, p_by TEXT, p_value TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    IF p_by = 'key' THEN
        PERFORM 1 FROM effects WHERE org = p_org AND idempotency_key = p_value LIMIT 1;
    ELSE
        PERFORM 1 FROM effects WHERE org = p_org AND signature = p_value LIMIT 1;
    END IF;
    IF FOUND THEN
        RAISE EXCEPTION 'an earlier call with % % exists', p_by, p_value USING ERRCODE = 'UL001';
    END IF;
END
$$;

-- Every column a transaction may change is compared: `run_of` and `created_at` never change.
CREATE FUNCTION undolog_replace_session(
    p_org TEXT, p_id TEXT,
    was_state TEXT, was_next_seq BIGINT, was_failed_effect TEXT, was_undo_holder TEXT,
    was_undo_expires_at BIGINT, was_updated_at BIGINT,
    new_state TEXT, new_next_seq BIGINT, new_failed_effect TEXT, new_undo_holder TEXT,
    new_undo_expires_at BIGINT, new_updated_at BIGINT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sessions SET state = new_state, next_seq = new_next_seq,
           failed_effect = new_failed_effect, undo_holder = new_undo_holder,
           undo_expires_at = new_undo_expires_at, updated_at = new_updated_at
     WHERE org = p_org AND id = p_id AND state = was_state AND next_seq = was_next_seq
       AND failed_effect IS NOT DISTINCT FROM was_failed_effect
       AND undo_holder IS NOT DISTINCT FROM was_undo_holder
       AND undo_expires_at IS NOT DISTINCT FROM was_undo_expires_at
       AND updated_at = was_updated_at;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'session % changed since it was read', p_id USING ERRCODE = 'UL001';
    END IF;
END
$$;

-- The columns compared are those every change of an effect touches: its state, its lease, its
-- times, its approval, who resolved it and its error. A change of its result or verdicts comes
-- with a change of state (the engine writes them only when a call ends), so the large texts are
-- not sent twice.
CREATE FUNCTION undolog_replace_effect(
    p_org TEXT, p_id TEXT,
    was_state TEXT, was_error TEXT, was_approval TEXT, was_lease_holder TEXT,
    was_lease_expires_at BIGINT, was_updated_at BIGINT, was_completed_at BIGINT,
    was_resolved_by TEXT,
    new_state TEXT, new_result TEXT, new_error TEXT, new_approval TEXT, new_lease_holder TEXT,
    new_lease_expires_at BIGINT, new_updated_at BIGINT, new_completed_at BIGINT,
    new_resolved_by TEXT, new_verdicts TEXT) RETURNS VOID
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
END
$$;

GRANT EXECUTE ON FUNCTION undolog_insert_effect(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, BIGINT,
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, BIGINT, TEXT, TEXT)
    TO undolog_app;
GRANT EXECUTE ON FUNCTION undolog_push_undo(TEXT, TEXT, TEXT, BIGINT) TO undolog_app;
GRANT EXECUTE ON FUNCTION undolog_expect_no_effect(TEXT, TEXT, TEXT) TO undolog_app;
GRANT EXECUTE ON FUNCTION undolog_replace_session(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, BIGINT,
    BIGINT, TEXT, BIGINT, TEXT, TEXT, BIGINT, BIGINT) TO undolog_app;
GRANT EXECUTE ON FUNCTION undolog_replace_effect(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT,
    BIGINT, BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, TEXT, TEXT)
    TO undolog_app;
