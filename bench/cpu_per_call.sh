#!/usr/bin/env bash
# One build of the gateway under load, with where the CPU went: calls/s, p50, and CPU per call of
# the gateway, the demo bank, `undolog engine` (split only) and PostgreSQL's processes
# (/proc/PID/stat), the machine's idle share and, on PostgreSQL, the COMMITs per call
# (pg_stat_database).
#
#   bench/cpu_per_call.sh BIN [TOOL] [SECONDS] [CONNECTIONS] [sqlite|postgres|split]
#                                         (defaults: transfer, 6 s, 32 connections, postgres)
#
# split is bench/gateway.sh's split row: a gateway with no store in front of `undolog engine` on
# SQLite over gRPC. PERF=DIR records the gateway (and the engine) with `perf record` into DIR,
# with PERF_CALLGRAPH's options (default -g; e.g. "--call-graph dwarf -F 499" for Rust's stacks).
#
# Each run starts from nothing: a fresh database, the bank, the gateway, and WARMUP seconds (2) of
# warm-up. Runs of two builds one after the other, several times over, compare them in the same
# hour:
#   for i in 1 2 3 4 5; do for b in /tmp/base /tmp/new; do bench/cpu_per_call.sh "$b"; done; done
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
[ $# -ge 1 ] || { sed -n 2,12p "$0" >&2; exit 2; }
bin=$(realpath "$1"); tool=${2:-transfer}; secs=${3:-6}; conns=${4:-32}; store=${5:-postgres}
pg_url=${UNDOLOG_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
work=$(mktemp -d)
db="undolog_cpu_$$"
pids=()
made_db=""  # the database to drop at the end: none on SQLite
trap 'end_run "$made_db"' EXIT
command -v wrk >/dev/null || { echo "installing wrk" >&2; apt-get install -y -qq wrk >/dev/null; }

case $store in
  postgres) made_db=$db; psql "$pg_url/postgres" -qc "CREATE DATABASE $db" >/dev/null; url="$pg_url/$db" ;;
  sqlite | split) url="sqlite://$work/log.db" ;;
  *) echo "store is sqlite, postgres or split, not $store" >&2; exit 2 ;;
esac
engine=""
[ "$store" = split ] && url="split:$url"
start_bank_and_gateway "$bin" "$url" "$work"

ticks() { if [ -n "$1" ]; then awk '{print $14 + $15}' "/proc/$1/stat"; else echo 0; fi; }
postgres_ticks() {
  local sum=0 p
  for p in $(pgrep -x postgres); do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo "$sum"
}
idle() { awk '/^cpu / {print $5 + $6}' /proc/stat; }
commits() {
  [ "$store" = postgres ] || { echo 0; return; }
  psql "$pg_url/postgres" -Atc "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'"
}

wrk -t2 -c"$conns" -d"${WARMUP:-2}s" -s bench/gateway/call.lua "$target" -- "$tool" new >/dev/null
recorders=()
if [ -n "${PERF:-}" ]; then
  mkdir -p "$PERF"
  for name in gateway engine; do
    [ -n "${!name}" ] || continue
    perf record ${PERF_CALLGRAPH:--g} -p "${!name}" -o "$PERF/$name.data" -- sleep "$secs" >/dev/null 2>&1 & recorders+=($!)
  done
fi
before="$(ticks "$gateway") $(ticks "$bank") $(ticks "$engine") $(postgres_ticks) $(idle) $(commits)"
line=$(wrk -t2 -c"$conns" -d"${secs}s" -s bench/gateway/call.lua "$target" -- "$tool" new | tail -1)
after="$(ticks "$gateway") $(ticks "$bank") $(ticks "$engine") $(postgres_ticks) $(idle) $(commits)"
for r in "${recorders[@]}"; do wait "$r"; done
python3 - "$line" "$before" "$after" "$tool" "$store" "$conns" "$secs" "$(nproc)" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
before, after = ([int(x) for x in a.split()] for a in sys.argv[2:4])
gw, bank, engine, pg, idle, commits = (b - a for a, b in zip(before, after))
n, secs, cores = max(r["requests"], 1), int(sys.argv[7]), int(sys.argv[8])
us = lambda ticks: ticks * 1e4 / n  # clock ticks are 10 ms
print(f"{sys.argv[4]} {sys.argv[5]} {sys.argv[6]} conn: {r['calls_per_sec']:,.0f} calls/s, "
      f"p50 {r['p50_ms']:.2f} ms | CPU per call: gateway {us(gw):.0f} µs, bank {us(bank):.0f} µs, "
      f"engine {us(engine):.0f} µs, postgres {us(pg):.0f} µs | idle {idle / (cores * secs):.0f}% | COMMITs per call "
      f"{commits / n:.2f} | errors {r['errors']}")
PY
