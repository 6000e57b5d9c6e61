-- One statement per kind for a batch: the shape batch_statements.sh measures against the store's
-- one function call per operation (migrations 11 and 12). Not part of the store: a batch's new
-- effects, each with its check, as one INSERT from a JSON array, and its outcomes with their undo
-- entries as one UPDATE, raising UL001 when any row is not as the engine remembers it. The
-- UPDATE numbers the undo entries in the order it meets the rows, not the array's: the store
-- could not take it as it is.
-- The checks join the array to the lookup indexes: a NOT EXISTS per row would be planned as one
-- hashed subplan over every effect of the org.
CREATE FUNCTION undolog_insert_new_effects(p_org TEXT, p_rows TEXT) RETURNS void
LANGUAGE plpgsql SET enable_hashjoin = off SET enable_mergejoin = off AS $$
DECLARE
    v_rows JSONB := p_rows::jsonb;
BEGIN
    IF EXISTS (SELECT FROM jsonb_to_recordset(v_rows) AS r(check_by TEXT, check_value TEXT)
                 JOIN effects e ON e.org = p_org AND e.signature = r.check_value
                WHERE r.check_by = 'signature')
       OR EXISTS (SELECT FROM jsonb_to_recordset(v_rows) AS r(check_by TEXT, check_value TEXT)
                    JOIN effects e ON e.org = p_org AND e.idempotency_key = r.check_value
                   WHERE r.check_by = 'key') THEN
        RAISE EXCEPTION 'an earlier call of the batch exists' USING ERRCODE = 'UL001';
    END IF;
    INSERT INTO effects (org, id, session, seq, tool, args, step, signature, idempotency_key,
                         tier, compensation, state, result, error, approval, lease_holder,
                         lease_expires_at, created_at, updated_at, completed_at, resolved_by,
                         verdicts)
    SELECT p_org, r.id, r.session, r.seq, r.tool, r.args, r.step, r.signature, r.idempotency_key,
           r.tier, r.compensation, r.state, r.result, r.error, r.approval, r.lease_holder,
           r.lease_expires_at, r.created_at, r.updated_at, r.completed_at, r.resolved_by,
           r.verdicts
      FROM jsonb_to_recordset(v_rows) AS r(id TEXT, session TEXT, seq BIGINT, tool TEXT,
           args TEXT, step BIGINT, signature TEXT, idempotency_key TEXT, tier TEXT,
           compensation TEXT, state TEXT, result TEXT, error TEXT, approval TEXT,
           lease_holder TEXT, lease_expires_at BIGINT, created_at BIGINT, updated_at BIGINT,
           completed_at BIGINT, resolved_by TEXT, verdicts TEXT);
END
$$;

-- Each row of the array finds its effect by (id, org), the ids given to the index as one array: a
-- join on them alone would read every effect of the org, which the planner takes for cheap on a
-- table it has no statistics of.
CREATE FUNCTION undolog_replace_effects_push_undo(p_org TEXT, p_rows TEXT) RETURNS void
LANGUAGE plpgsql SET enable_hashjoin = off SET enable_mergejoin = off AS $$
DECLARE
    v_rows JSONB := p_rows::jsonb;
    v_ids TEXT[] := ARRAY(SELECT r->>'id' FROM jsonb_array_elements(v_rows) AS r);
    v_changed BIGINT;
BEGIN
    UPDATE effects e SET state = r.new_state, result = r.new_result, error = r.new_error,
           approval = r.new_approval, lease_holder = r.new_lease_holder,
           lease_expires_at = r.new_lease_expires_at, updated_at = r.new_updated_at,
           completed_at = r.new_completed_at, resolved_by = r.new_resolved_by,
           verdicts = r.new_verdicts,
           undo_position = nextval('effects_undo_position_seq'), undo_pushed_at = r.pushed_at
      FROM jsonb_to_recordset(v_rows) AS r(id TEXT, was_state TEXT, was_error TEXT,
           was_approval TEXT, was_lease_holder TEXT, was_lease_expires_at BIGINT,
           was_updated_at BIGINT, was_completed_at BIGINT, was_resolved_by TEXT, new_state TEXT,
           new_result TEXT, new_error TEXT, new_approval TEXT, new_lease_holder TEXT,
           new_lease_expires_at BIGINT, new_updated_at BIGINT, new_completed_at BIGINT,
           new_resolved_by TEXT, new_verdicts TEXT, session TEXT, pushed_at BIGINT)
     WHERE e.org = p_org AND e.id = ANY (v_ids) AND e.id = r.id AND e.session = r.session AND e.state = r.was_state
       AND e.error IS NOT DISTINCT FROM r.was_error
       AND e.approval IS NOT DISTINCT FROM r.was_approval
       AND e.lease_holder IS NOT DISTINCT FROM r.was_lease_holder
       AND e.lease_expires_at IS NOT DISTINCT FROM r.was_lease_expires_at
       AND e.updated_at = r.was_updated_at
       AND e.completed_at IS NOT DISTINCT FROM r.was_completed_at
       AND e.resolved_by IS NOT DISTINCT FROM r.was_resolved_by;
    GET DIAGNOSTICS v_changed = ROW_COUNT;
    IF v_changed <> jsonb_array_length(v_rows) THEN
        RAISE EXCEPTION 'an effect of the batch changed since it was read' USING ERRCODE = 'UL001';
    END IF;
END
$$;
