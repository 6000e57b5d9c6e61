-- The statements of call_statements.sql, one per round trip, for pgbench -M prepared (variables
-- stay outside quotes so pgbench binds them): prepared statements without a pipeline.
\set eid random(1, 1000000000000000)
\set n random(1, 1000000000)
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT set_config('role', 'undolog_app', true), set_config('app.org_id', 'bench', true);
SELECT pg_advisory_xact_lock(:eid);
SELECT org, id, state, next_seq, failed_effect, created_at, updated_at FROM sessions WHERE org = 'bench' AND id = 's' || :client_id FOR UPDATE;
SELECT * FROM effects WHERE org = 'bench' AND signature = 'sig' || :eid ORDER BY seq DESC LIMIT 1;
INSERT INTO sessions (org, id, state, next_seq, failed_effect, created_at, updated_at) VALUES ('bench', 's' || :client_id, 'active', :n, NULL, 1, 2) ON CONFLICT (org, id) DO UPDATE SET state = excluded.state, next_seq = excluded.next_seq, failed_effect = excluded.failed_effect, updated_at = excluded.updated_at;
INSERT INTO effects (id, org, session, seq, tool, args, step, signature, idempotency_key, tier, compensation, state, result, error, approval, lease_holder, lease_expires_at, created_at, updated_at, completed_at) VALUES ('e' || :eid, 'bench', 's' || :client_id, :n, 'transfer', '{"amount":1,"from":"alice","to":"bob"}', NULL, 'sig' || :eid, NULL, 'compensable', '{"tool":"refund","args":{"id":"{{result.id}}"}}', 'pending', NULL, NULL, NULL, 'exec-1', 123456789, 1, 1, NULL);
COMMIT;
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT set_config('role', 'undolog_app', true), set_config('app.org_id', 'bench', true);
SELECT * FROM effects WHERE org = 'bench' AND id = 'e' || :eid;
UPDATE effects SET state = 'committed', result = '{"id":1}', error = NULL, approval = NULL, lease_holder = NULL, lease_expires_at = NULL, updated_at = 5, completed_at = 5 WHERE org = 'bench' AND id = 'e' || :eid;
SELECT undolog_push_undo('bench', 's' || :client_id, 'e' || :eid, 5);
COMMIT;
