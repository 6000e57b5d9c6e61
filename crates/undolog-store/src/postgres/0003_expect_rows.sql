-- A transaction's writes travel with its COMMIT in one message (see tx.rs). An UPDATE that must
-- change one row therefore cannot be checked by the client before the COMMIT runs: it calls this
-- function instead, which aborts the transaction — and so the COMMIT after it — when nothing
-- changed. The store reads SQLSTATE no_data_found (P0002) as "no such record".
CREATE FUNCTION undolog_expect_rows(changed BIGINT, what TEXT, id TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
    IF changed = 0 THEN
        RAISE EXCEPTION 'no % % in this org', what, id USING ERRCODE = 'no_data_found';
    END IF;
END
$$;

GRANT EXECUTE ON FUNCTION undolog_expect_rows(BIGINT, TEXT, TEXT) TO undolog_app;
