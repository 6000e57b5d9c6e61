-- Lease tokens, version 17: the digest of the secret an effect's executor was given, which
-- whoever settles the call must present. Effects from before have none, so nobody can settle one
-- that was still running at the upgrade: it ends in doubt, for an operator.
--
-- The writes every call makes take the token as their last argument. The conditional writes
-- compare no token: a new token always comes with a new lease, whose expiry they compare.

ALTER TABLE effects ADD COLUMN lease_token TEXT;

DROP FUNCTION undolog_insert_effect(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, BIGINT, TEXT, TEXT,
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, BIGINT, TEXT, TEXT);
CREATE FUNCTION undolog_insert_effect(
    p_org TEXT, p_id TEXT, p_session TEXT, p_seq BIGINT, p_tool TEXT, p_args TEXT, p_step BIGINT,
    p_signature TEXT, p_idempotency_key TEXT, p_tier TEXT, p_compensation TEXT, p_state TEXT,
    p_result TEXT, p_error TEXT, p_approval TEXT, p_lease_holder TEXT, p_lease_expires_at BIGINT,
    p_created_at BIGINT, p_updated_at BIGINT, p_completed_at BIGINT, p_resolved_by TEXT,
    p_verdicts TEXT, p_lease_token TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO effects (org, id, session, seq, tool, args, step, signature, idempotency_key,
                         tier, compensation, state, result, error, approval, lease_holder,
                         lease_expires_at, created_at, updated_at, completed_at, resolved_by,
                         verdicts, lease_token)
    VALUES (p_org, p_id, p_session, p_seq, p_tool, p_args, p_step, p_signature,
            p_idempotency_key, p_tier, p_compensation, p_state, p_result, p_error, p_approval,
            p_lease_holder, p_lease_expires_at, p_created_at, p_updated_at, p_completed_at,
            p_resolved_by, p_verdicts, p_lease_token);
END
$$;

DROP FUNCTION undolog_insert_new_effect(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, BIGINT, TEXT, TEXT,
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, BIGINT, TEXT, TEXT, TEXT,
    TEXT);
CREATE FUNCTION undolog_insert_new_effect(
    p_org TEXT, p_id TEXT, p_session TEXT, p_seq BIGINT, p_tool TEXT, p_args TEXT, p_step BIGINT,
    p_signature TEXT, p_idempotency_key TEXT, p_tier TEXT, p_compensation TEXT, p_state TEXT,
    p_result TEXT, p_error TEXT, p_approval TEXT, p_lease_holder TEXT, p_lease_expires_at BIGINT,
    p_created_at BIGINT, p_updated_at BIGINT, p_completed_at BIGINT, p_resolved_by TEXT,
    p_verdicts TEXT, p_by TEXT, p_value TEXT, p_lease_token TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    IF p_by = 'key' THEN
        INSERT INTO effects (org, id, session, seq, tool, args, step, signature, idempotency_key,
                             tier, compensation, state, result, error, approval, lease_holder,
                             lease_expires_at, created_at, updated_at, completed_at, resolved_by,
                             verdicts, lease_token)
        SELECT p_org, p_id, p_session, p_seq, p_tool, p_args, p_step, p_signature,
               p_idempotency_key, p_tier, p_compensation, p_state, p_result, p_error, p_approval,
               p_lease_holder, p_lease_expires_at, p_created_at, p_updated_at, p_completed_at,
               p_resolved_by, p_verdicts, p_lease_token
        WHERE NOT EXISTS (SELECT FROM effects WHERE org = p_org AND idempotency_key = p_value);
    ELSE
        INSERT INTO effects (org, id, session, seq, tool, args, step, signature, idempotency_key,
                             tier, compensation, state, result, error, approval, lease_holder,
                             lease_expires_at, created_at, updated_at, completed_at, resolved_by,
                             verdicts, lease_token)
        SELECT p_org, p_id, p_session, p_seq, p_tool, p_args, p_step, p_signature,
               p_idempotency_key, p_tier, p_compensation, p_state, p_result, p_error, p_approval,
               p_lease_holder, p_lease_expires_at, p_created_at, p_updated_at, p_completed_at,
               p_resolved_by, p_verdicts, p_lease_token
        WHERE NOT EXISTS (SELECT FROM effects WHERE org = p_org AND signature = p_value);
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'an earlier call with % % exists', p_by, p_value USING ERRCODE = 'UL001';
    END IF;
END
$$;

DROP FUNCTION undolog_replace_effect(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT,
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, TEXT, TEXT);
CREATE FUNCTION undolog_replace_effect(
    p_org TEXT, p_id TEXT,
    was_state TEXT, was_error TEXT, was_approval TEXT, was_lease_holder TEXT,
    was_lease_expires_at BIGINT, was_updated_at BIGINT, was_completed_at BIGINT,
    was_resolved_by TEXT,
    new_state TEXT, new_result TEXT, new_error TEXT, new_approval TEXT, new_lease_holder TEXT,
    new_lease_expires_at BIGINT, new_updated_at BIGINT, new_completed_at BIGINT,
    new_resolved_by TEXT, new_verdicts TEXT, new_lease_token TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE effects SET state = new_state, result = new_result, error = new_error,
           approval = new_approval, lease_holder = new_lease_holder,
           lease_expires_at = new_lease_expires_at, updated_at = new_updated_at,
           completed_at = new_completed_at, resolved_by = new_resolved_by, verdicts = new_verdicts,
           lease_token = new_lease_token
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

DROP FUNCTION undolog_replace_effect_push_undo(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT,
    BIGINT, BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, TEXT, TEXT, TEXT,
    BIGINT);
CREATE FUNCTION undolog_replace_effect_push_undo(
    p_org TEXT, p_id TEXT,
    was_state TEXT, was_error TEXT, was_approval TEXT, was_lease_holder TEXT,
    was_lease_expires_at BIGINT, was_updated_at BIGINT, was_completed_at BIGINT,
    was_resolved_by TEXT,
    new_state TEXT, new_result TEXT, new_error TEXT, new_approval TEXT, new_lease_holder TEXT,
    new_lease_expires_at BIGINT, new_updated_at BIGINT, new_completed_at BIGINT,
    new_resolved_by TEXT, new_verdicts TEXT, new_lease_token TEXT,
    p_session TEXT, p_pushed_at BIGINT) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    v_session TEXT;
BEGIN
    UPDATE effects SET state = new_state, result = new_result, error = new_error,
           approval = new_approval, lease_holder = new_lease_holder,
           lease_expires_at = new_lease_expires_at, updated_at = new_updated_at,
           completed_at = new_completed_at, resolved_by = new_resolved_by, verdicts = new_verdicts,
           lease_token = new_lease_token,
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

GRANT EXECUTE ON FUNCTION undolog_insert_effect(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, BIGINT,
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, BIGINT, TEXT, TEXT,
    TEXT) TO undolog_app;
GRANT EXECUTE ON FUNCTION undolog_insert_new_effect(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, BIGINT,
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, BIGINT, TEXT, TEXT,
    TEXT, TEXT, TEXT) TO undolog_app;
GRANT EXECUTE ON FUNCTION undolog_replace_effect(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT,
    BIGINT, BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, TEXT, TEXT, TEXT)
    TO undolog_app;
GRANT EXECUTE ON FUNCTION undolog_replace_effect_push_undo(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT,
    BIGINT, BIGINT, BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, TEXT, TEXT,
    TEXT, TEXT, BIGINT) TO undolog_app;
