#!/usr/bin/env bash
# Where a gateway call's time goes inside PostgreSQL, by the store's functions: the gateway on a
# fresh database with `track_functions = 'pl'`, under wrk, then each function's calls and mean time
# (pg_stat_user_functions, lock waits included), beside the calls/s. What the functions do not
# account for is the outer statements, BEGIN and COMMIT.
#
#   bench/pg/function_times.sh BIN [TOOL] [SECONDS] [CONNECTIONS]   (transfer, 6 s, 32)
#
# BIN is an `undolog` binary (a release build: target/release/undolog). The database, the
# gateway and the bank are gone at the end, however the script ends.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
[ $# -ge 1 ] || { sed -n 2,10p "$0" >&2; exit 2; }
bin=$(realpath "$1"); tool=${2:-transfer}; secs=${3:-6}; conns=${4:-32}
pg_url=${UNDOLOG_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
work=$(mktemp -d)
db="undolog_functions_$$"
pids=()
trap 'end_run "$db"' EXIT
command -v wrk >/dev/null || { echo "installing wrk" >&2; apt-get install -y -qq wrk >/dev/null; }

psql "$pg_url/postgres" -qc "CREATE DATABASE $db" \
  -c "ALTER DATABASE $db SET track_functions = 'pl'" >/dev/null
start_bank_and_gateway "$bin" "$pg_url/$db" "$work"

wrk -t2 -c"$conns" -d2s -s bench/gateway/call.lua "$target" -- "$tool" new >/dev/null
psql "$pg_url/$db" -qAtc "SELECT pg_stat_reset()" >/dev/null
line=$(wrk -t2 -c"$conns" -d"${secs}s" -s bench/gateway/call.lua "$target" -- "$tool" new | tail -1)
# Each backend reports its counts once it is idle; give them a moment.
sleep 1
python3 - "$line" "$tool" "$conns" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
print(f"{sys.argv[2]}, {sys.argv[3]} connections: {r['calls_per_sec']:,.0f} calls/s, "
      f"{r['requests']:,} calls, {r['errors']} errors")
PY
psql "$pg_url/$db" -c "SELECT funcname AS function, calls,
    round((1000 * total_time / calls)::numeric, 1) AS \"µs per call\",
    round(total_time::numeric, 1) AS \"total ms\"
  FROM pg_stat_user_functions WHERE calls > 0 ORDER BY total_time DESC"
