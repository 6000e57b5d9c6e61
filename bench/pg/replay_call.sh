#!/usr/bin/env bash
# The statements of one engine call, replayed by pgbench (a C client) on the store's real schema,
# next to pgbench's one-row INSERT in the same run: what PostgreSQL itself allows for those
# statements, whatever the client; and the same statements sent one per round trip as prepared
# statements (call_statements_prepared.sql). Compare with engine_vs_pgbench.sh.
#
#   bench/pg/replay_call.sh               # 10 s per client count, clients 1 8 32
#   DURATION=5 CLIENTS=32 bench/pg/replay_call.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
duration=${DURATION:-10}
clients=${CLIENTS:-1 8 32}
db="undolog_replay_$$_$RANDOM"
cleanup() { psql -q -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null || true; }
trap cleanup EXIT

pg_isready -q || { echo "PostgreSQL does not answer at $PGHOST:$PGPORT" >&2; exit 1; }
psql -q -d postgres -c "CREATE DATABASE \"$db\""
# The store's migrations, as `undolog migrate` applies them.
cat crates/undolog-store/src/postgres/0*.sql | psql -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null
psql -q -d "$db" -c "CREATE TABLE one_row (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  org TEXT NOT NULL, signature TEXT NOT NULL, state TEXT NOT NULL, created_at BIGINT NOT NULL)"
insert=$(mktemp)
trap 'rm -f "$insert"; cleanup' EXIT
echo "INSERT INTO one_row (org, signature, state, created_at) VALUES ('acme', md5(random()::text), 'pending', 1);" >"$insert"

run() { pgbench -n "$@" -T "$duration" "$db" 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p'; }
echo "pgbench, ${duration} s each, $(nproc) cores"
printf '%8s %14s %16s %14s %18s\n' clients "INSERT tx/s" "calls/s batched" "÷ (tx÷2)" "calls/s prepared"
for c in $clients; do
  threads=$(( c < $(nproc) ? c : $(nproc) ))
  tps=$(run -M prepared -f "$insert" -c "$c" -j "$threads")
  calls=$(run -M simple -f bench/pg/call_statements.sql -c "$c" -j "$threads")
  prepared=$(run -M prepared -f bench/pg/call_statements_prepared.sql -c "$c" -j "$threads")
  [ -n "$tps" ] && [ -n "$calls" ] && [ -n "$prepared" ] || { echo "pgbench failed" >&2; exit 1; }
  printf '%8s %14.0f %16.0f %14.2f %18.0f\n' "$c" "$tps" "$calls" \
    "$(echo "$calls / ($tps / 2)" | bc -l)" "$prepared"
done
