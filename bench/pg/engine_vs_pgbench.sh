#!/usr/bin/env bash
# The engine's intercept + commit on PostgreSQL at 1, 8 and 32 concurrent sessions, next to what
# this PostgreSQL commits at all (pgbench, one-row INSERT transactions, same client counts), in one
# run. A call is two transactions, so the bar is half of pgbench's rate.
#
#   bench/pg/engine_vs_pgbench.sh          # DURATION (pgbench seconds per client count) = 10
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "== PostgreSQL alone (pgbench)"
bench/pg/pgbench_insert.sh
echo
echo "== undolog engine: intercept + commit (criterion; thrpt = calls/s over all sessions)"
cargo bench --quiet -p undolog-engine --bench postgres_sessions -- --warm-up-time 2 --measurement-time 10 2>&1 \
  | grep -E "^postgres_intercept_commit|thrpt|time:"
