#!/usr/bin/env bash
# What the server would save on a batch of K new calls and their outcomes, replayed by pgbench on
# the store's real schema, alternating, ROUNDS times, with the median ratio:
#   arrays (default): sent as the store sends them today (one function call per operation)
#     against one statement per kind, the rows in a JSON array (batch_statements.sql, a prototype
#     not part of the store);
#   hot: today's statements on the schema as it is, against the same schema without the partial
#     index `effects_pending` and with room in each page (fillfactor 70): the bound of what an
#     outcome updated in place (HOT) would save, were pending leases kept elsewhere.
#
#   bench/pg/batch_statements.sh [arrays|hot]  # 10 s per run, K in 1 5 16, 8 clients, 3 rounds
#   DURATION=5 CALLS="5" CLIENTS=32 ROUNDS=5 bench/pg/batch_statements.sh hot
set -euo pipefail
cd "$(dirname "$0")/../.."
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
duration=${DURATION:-10}
calls=${CALLS:-1 5 16}
clients=${CLIENTS:-8}
rounds=${ROUNDS:-3}
mode=${1:-arrays}
case $mode in arrays|hot) ;; *) echo "the mode is arrays or hot, not $mode" >&2; exit 2 ;; esac
db="undolog_batch_$$_$RANDOM"
db2="${db}_b"  # the second schema, in hot mode
work=$(mktemp -d)
cleanup() {
  for d in "$db" "$db2"; do
    psql -q -d postgres -c "DROP DATABASE IF EXISTS \"$d\" WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

pg_isready -q || { echo "PostgreSQL does not answer at $PGHOST:$PGPORT" >&2; exit 1; }
# The store's migrations, as `undolog migrate` applies them.
schema() {
  psql -q -d postgres -c "CREATE DATABASE \"$1\""
  cat crates/undolog-store/src/postgres/0*.sql | psql -q -v ON_ERROR_STOP=1 -d "$1" >/dev/null
}
schema "$db"
if [ "$mode" = arrays ]; then
  psql -q -v ON_ERROR_STOP=1 -d "$db" -f bench/pg/batch_statements.sql
else
  schema "$db2"
  psql -q -v ON_ERROR_STOP=1 -d "$db2" \
    -c "DROP INDEX effects_pending" -c "ALTER TABLE effects SET (fillfactor = 70)"
fi

threads=$(( clients < $(nproc) ? clients : $(nproc) ))
# Calls per second of one script on one database: K calls per run of it.
run() {
  local tps
  tps=$(pgbench -n -M simple -f "$1" -c "$clients" -j "$threads" -T "$duration" "$3" 2>&1 \
    | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  [ -n "$tps" ] || { echo "pgbench failed on $1" >&2; exit 1; }
  echo "$tps * $2" | bc -l
}
echo "pgbench, $clients clients, ${duration} s a run, $(nproc) cores; calls/s (each call: its"
echo "new effect, then its outcome, in a transaction of K of each)"
if [ "$mode" = arrays ]; then
  printf '%4s %6s %12s %12s %8s\n' K round "today" "one per kind" ratio
else
  printf '%4s %6s %12s %12s %8s\n' K round "as it is" "HOT-able" ratio
fi
for k in $calls; do
  python3 bench/pg/batch_statements.py --shape today --calls "$k" >"$work/today.sql"
  [ "$mode" = hot ] || python3 bench/pg/batch_statements.py --shape arrays --calls "$k" >"$work/arrays.sql"
  ratios=()
  for round in $(seq "$rounds"); do
    today=$(run "$work/today.sql" "$k" "$db")
    if [ "$mode" = arrays ]; then
      other=$(run "$work/arrays.sql" "$k" "$db")
    else
      other=$(run "$work/today.sql" "$k" "$db2")
    fi
    ratio=$(echo "$other / $today" | bc -l)
    ratios+=("$ratio")
    printf '%4s %6s %12.0f %12.0f %8.2f\n' "$k" "$round" "$today" "$other" "$ratio"
  done
  printf '%4s %6s %25s %8.2f\n' "$k" median "" \
    "$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
done
