#!/usr/bin/env bash
# What one statement per kind and batch would save the server: a batch of K new calls and their
# outcomes, sent as the store sends them today (one function call per operation) and as one
# statement per kind with the rows in a JSON array (batch_statements.sql, not part of the store),
# replayed by pgbench on the store's real schema; alternating, ROUNDS times, and the median.
#
#   bench/pg/batch_statements.sh            # 10 s per run, K in 1 5 16, 8 clients, 3 rounds
#   DURATION=5 CALLS="5" CLIENTS=32 ROUNDS=5 bench/pg/batch_statements.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
duration=${DURATION:-10}
calls=${CALLS:-1 5 16}
clients=${CLIENTS:-8}
rounds=${ROUNDS:-3}
db="undolog_batch_$$_$RANDOM"
work=$(mktemp -d)
cleanup() {
  psql -q -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

pg_isready -q || { echo "PostgreSQL does not answer at $PGHOST:$PGPORT" >&2; exit 1; }
psql -q -d postgres -c "CREATE DATABASE \"$db\""
# The store's migrations, as `undolog migrate` applies them, then the shape measured against them.
cat crates/undolog-store/src/postgres/0*.sql | psql -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null
psql -q -v ON_ERROR_STOP=1 -d "$db" -f bench/pg/batch_statements.sql

threads=$(( clients < $(nproc) ? clients : $(nproc) ))
# Calls per second of one script: K calls per run of it.
run() {
  local tps
  tps=$(pgbench -n -M simple -f "$1" -c "$clients" -j "$threads" -T "$duration" "$db" 2>&1 \
    | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  [ -n "$tps" ] || { echo "pgbench failed on $1" >&2; exit 1; }
  echo "$tps * $2" | bc -l
}
echo "pgbench, $clients clients, ${duration} s a run, $(nproc) cores; calls/s (each call: its"
echo "new effect, then its outcome, in a transaction of K of each)"
printf '%4s %6s %12s %12s %8s\n' K round "today" "one per kind" ratio
for k in $calls; do
  python3 bench/pg/batch_statements.py --shape today --calls "$k" >"$work/today.sql"
  python3 bench/pg/batch_statements.py --shape arrays --calls "$k" >"$work/arrays.sql"
  ratios=()
  for round in $(seq "$rounds"); do
    today=$(run "$work/today.sql" "$k")
    arrays=$(run "$work/arrays.sql" "$k")
    ratio=$(echo "$arrays / $today" | bc -l)
    ratios+=("$ratio")
    printf '%4s %6s %12.0f %12.0f %8.2f\n' "$k" "$round" "$today" "$arrays" "$ratio"
  done
  printf '%4s %6s %25s %8.2f\n' "$k" median "" \
    "$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
done
