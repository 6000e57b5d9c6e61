-- A new call's effect and the check that the call is new, in one function, version 11.
--
-- A call in a session the gateway remembers is taken for new without reading first: the
-- transaction checks that no earlier effect of the call exists (`undolog_expect_no_effect`) and
-- inserts the call's pending effect (`undolog_insert_effect`). Both run under the call's advisory
-- lock, so nothing can come between them; as one function they are one statement and one function
-- call on the server instead of two, and the plans of the lookup and of the INSERT are made once
-- per connection. When an earlier effect exists, it raises SQLSTATE UL001 as
-- `undolog_expect_no_effect` does, and nothing is inserted.

CREATE FUNCTION undolog_insert_new_effect(
    p_org TEXT, p_id TEXT, p_session TEXT, p_seq BIGINT, p_tool TEXT, p_args TEXT, p_step BIGINT,
    p_signature TEXT, p_idempotency_key TEXT, p_tier TEXT, p_compensation TEXT, p_state TEXT,
    p_result TEXT, p_error TEXT, p_approval TEXT, p_lease_holder TEXT, p_lease_expires_at BIGINT,
    p_created_at BIGINT, p_updated_at BIGINT, p_completed_at BIGINT, p_resolved_by TEXT,
    p_verdicts TEXT, p_by TEXT, p_value TEXT) RETURNS VOID
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

GRANT EXECUTE ON FUNCTION undolog_insert_new_effect(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT, BIGINT,
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT, BIGINT, BIGINT, TEXT, TEXT,
    TEXT, TEXT) TO undolog_app;
