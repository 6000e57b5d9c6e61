#!/usr/bin/env bash
# The floor under the PostgreSQL store: how many one-row INSERT transactions per second this
# PostgreSQL commits at 1, 8 and 32 concurrent clients, measured with pgbench on a scratch
# database that is dropped afterwards. Compare the store's intercept+commit rate with these.
#
#   bench/pg/pgbench_insert.sh            # 10 s per client count
#   DURATION=3 CLIENTS="1 32" bench/pg/pgbench_insert.sh
#
# Connection: PGHOST (127.0.0.1), PGPORT (5432), PGUSER (postgres); the user must create databases.
set -euo pipefail

export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
duration=${DURATION:-10}
clients=${CLIENTS:-1 8 32}
db="undolog_bench_$$_$RANDOM"
script=$(mktemp)

cleanup() {
  rm -f "$script"
  psql -q -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null || true
}
trap cleanup EXIT

pg_isready -q || { echo "PostgreSQL does not answer at $PGHOST:$PGPORT" >&2; exit 1; }
psql -q -d postgres -c "CREATE DATABASE \"$db\""
# A row about the size of an effect row's fixed part; each INSERT is its own transaction.
psql -q -d "$db" -c "CREATE TABLE effects (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  org TEXT NOT NULL, signature TEXT NOT NULL, state TEXT NOT NULL, created_at BIGINT NOT NULL)"
cat >"$script" <<'SQL'
INSERT INTO effects (org, signature, state, created_at)
VALUES ('acme', md5(random()::text), 'pending', (extract(epoch FROM now()) * 1000)::bigint);
SQL

fsync=$(psql -Atq -d "$db" -c "SHOW fsync")
commit=$(psql -Atq -d "$db" -c "SHOW synchronous_commit")
echo "pgbench one-row INSERT transactions, ${duration} s each, fsync=$fsync synchronous_commit=$commit, $(nproc) cores"
printf '%8s %12s %14s\n' clients tps "latency ms"
for c in $clients; do
  threads=$(( c < $(nproc) ? c : $(nproc) ))
  out=$(pgbench -n -M prepared -f "$script" -c "$c" -j "$threads" -T "$duration" "$db" 2>&1)
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
  latency=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
  [ -n "$tps" ] || { echo "$out" >&2; exit 1; }
  printf '%8s %12.0f %14s\n' "$c" "$tps" "$latency"
done
