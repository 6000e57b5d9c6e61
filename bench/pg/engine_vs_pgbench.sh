#!/usr/bin/env bash
# The engine's intercept + commit on PostgreSQL at 1, 8 and 32 concurrent sessions, next to what
# this PostgreSQL commits at all (pgbench, one-row INSERT transactions, same client counts), in one
# run. A call is two transactions, so the bar is half of pgbench's rate.
#
# Then ROUNDS rounds (default 3) of the two at 32 side by side: pgbench for DURATION seconds, the
# engine right after it, and the ratio of the engine's calls/s to half pgbench's rate in that
# round; the last line is the median ratio. This machine's speed drifts from one minute to the
# next (pgbench alone has moved by a factor of two between runs), so a ratio of two figures taken
# minutes apart says less than one taken back to back, and one round less than several.
#
#   bench/pg/engine_vs_pgbench.sh          # DURATION (seconds per measurement) = 10, ROUNDS = 3
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${DURATION:-10}
rounds=${ROUNDS:-3}

# The engine's benchmark, built once; its path from cargo's own report.
bench=$(cargo bench --quiet -p undolog-engine --bench postgres_sessions --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("executable") and m["target"]["name"] == "postgres_sessions":
        print(m["executable"])')
[ -x "$bench" ] || { echo "the engine's benchmark did not build: cargo bench -p undolog-engine --bench postgres_sessions --no-run" >&2; exit 1; }

# engine FILTER: criterion's lines for the benchmarks FILTER matches.
engine() {
  "$bench" --bench --warm-up-time 2 --measurement-time "$duration" "$1" 2>&1 |
    grep -E "^postgres_intercept_commit|thrpt|time:"
}
# calls_per_sec: the middle of criterion's throughput estimate, in calls/s.
calls_per_sec() {
  python3 -c '
import re, sys
m = re.search(r"thrpt:\s*\[\S+\s+\S+\s+(\S+)\s+(\S*)elem/s", sys.stdin.read())
scale = {"": 1, "K": 1e3, "M": 1e6}[m.group(2)]
print(round(float(m.group(1)) * scale))'
}

echo "== PostgreSQL alone (pgbench)"
DURATION=$duration bench/pg/pgbench_insert.sh
echo
echo "== undolog engine: intercept + commit (criterion; thrpt = calls/s over all sessions)"
engine '^postgres_intercept_commit'

echo
echo "== $rounds rounds at 32: pgbench, then the engine, back to back"
printf '%6s %14s %14s %8s\n' round "pgbench tx/s" "engine calls/s" ratio
ratios=()
for round in $(seq 1 "$rounds"); do
  tps=$(DURATION=$duration CLIENTS=32 bench/pg/pgbench_insert.sh | awk '$1 == 32 {print $2}')
  calls=$(engine '^postgres_intercept_commit/32$' | calls_per_sec)
  ratio=$(python3 -c "print(f'{$calls / ($tps / 2):.2f}')")
  ratios+=("$ratio")
  printf '%6s %14s %14s %8s\n' "$round" "$tps" "$calls" "$ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
echo "median ratio at 32 sessions over $rounds rounds: $median (engine calls/s ÷ half of pgbench's one-row INSERT tx/s)"
