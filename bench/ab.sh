#!/usr/bin/env bash
# Two builds of the gateway side by side: the same load on each, in interleaved rounds, so a
# change is judged against the build before it in one run (this machine's speed drifts from hour
# to hour, so figures from two runs do not compare).
#
#   bench/ab.sh BASE NEW [SECONDS] [ROUNDS]     (binaries of `undolog`; default 5 s, 3 rounds)
#
# e.g. the commit before a change, built in a worktree:
#   git worktree add /tmp/base HEAD~1 && (cd /tmp/base && cargo build --release -p undolog-cli)
#   cargo build --release -p undolog-cli
#   bench/ab.sh /tmp/base/target/release/undolog target/release/undolog
#
# Each build serves as `undolog serve` on SQLite, on PostgreSQL (a fresh database each) and split
# (a gateway with no store in front of `undolog engine` on SQLite), in front of one demo bank
# (BASE's); wrk sends bench/gateway/call.lua (every call new). Rows: read_only and compensable on
# SQLite, compensable on PostgreSQL and split at 32 connections, and read_only at 1; AB_ROWS picks
# some. Per row and build: the median calls/s and p50 over the rounds, the gateway's CPU
# per call (/proc/PID/stat) and the writes per group-commit batch (its /metrics).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
[ $# -ge 2 ] || { sed -n 2,18p "$0" >&2; exit 2; }
base=$(realpath "$1"); new=$(realpath "$2")
secs=${3:-5}
rounds=${4:-3}
pg_url=${UNDOLOG_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
work=$(mktemp -d)
pids=()
dbs=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for db in "${dbs[@]}"; do psql "$pg_url/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
command -v wrk >/dev/null || { echo "installing wrk" >&2; apt-get install -y -qq wrk >/dev/null; }

bank_port=$(port)
"$base" demo-bank --listen "127.0.0.1:$bank_port" >/dev/null 2>&1 & pids+=($!)
wait_port "$bank_port"

# gateway NAME BIN STORE [FLAG]: starts one on STORE (or with FLAG=--engine, in front of the
# engine at STORE) and waits for it; sets `started` to "pid url metrics_url".
gateway() {
  local name=$1 bin=$2 store=$3 flag=${4:---store} port metrics
  port=$(port); metrics=$(port)
  bank_config "$work/$name.toml" "$bank_port"
  printf '\n[metrics]\nlisten = "127.0.0.1:%s"\n' "$metrics" >> "$work/$name.toml"
  "$bin" serve --config "$work/$name.toml" --listen "127.0.0.1:$port" "$flag" "$store" \
    >"$work/$name.log" 2>&1 &
  pids+=($!)
  wait_port "$port"
  started="$! http://127.0.0.1:$port/mcp http://127.0.0.1:$metrics/metrics"
}
# split_gateway NAME BIN: `undolog engine` on SQLite and a gateway with no store in front of it over gRPC
# (`serve --engine`); sets `started` for the gateway.
split_gateway() {
  local name=$1 bin=$2 engine_port
  engine_port=$(port)
  bank_config "$work/$name-engine.toml" "$bank_port"
  "$bin" engine --config "$work/$name-engine.toml" --listen "127.0.0.1:$engine_port" \
    --store "sqlite://$work/$name-engine.db" >"$work/$name-engine.log" 2>&1 &
  pids+=($!)
  wait_port "$engine_port"
  gateway "$name" "$bin" "grpc://127.0.0.1:$engine_port" --engine
}
declare -A served
for build in base new; do
  bin=$base; [ "$build" = new ] && bin=$new
  db="undolog_ab_${build}_$$"
  psql "$pg_url/postgres" -qc "CREATE DATABASE $db" >/dev/null
  dbs+=("$db")
  gateway "$build-sqlite" "$bin" "sqlite://$work/$build.db"; served[$build,sqlite]=$started
  gateway "$build-postgres" "$bin" "$pg_url/$db"; served[$build,postgres]=$started
  split_gateway "$build-split" "$bin"; served[$build,split]=$started
done

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
batches() { curl -s "$1" | awk '/^undolog_commit_batch_size_(sum|count)/ {printf "%s ", $2}'; }

# store | tool | connections; AB_ROWS picks some (e.g. AB_ROWS="split|transfer|32")
rows=${AB_ROWS:-"sqlite|get_balance|32
sqlite|transfer|32
postgres|transfer|32
split|transfer|32
sqlite|get_balance|1"}
results="$work/results.jsonl"
for round in $(seq "$rounds"); do
  while IFS='|' read -r store tool conns; do
    threads=2; [ "$conns" = 1 ] && threads=1
    order="base new"; [ $((round % 2)) = 0 ] && order="new base"
    for build in $order; do
      read -r pid url metrics <<<"${served[$build,$store]}"
      wrk -t"$threads" -c"$conns" -d1s -s bench/gateway/call.lua "$url" -- "$tool" new >/dev/null 2>&1
      read -r sum0 count0 <<<"$(batches "$metrics")"
      cpu0=$(cpu "$pid")
      line=$(wrk -t"$threads" -c"$conns" -d"${secs}s" -s bench/gateway/call.lua "$url" -- "$tool" new | tail -1)
      cpu1=$(cpu "$pid")
      read -r sum1 count1 <<<"$(batches "$metrics")"
      python3 -c '
import json, sys
r = json.loads(sys.argv[1])
ticks = int(sys.argv[2])
ops, batches = (float(b) - float(a) for a, b in (sys.argv[3].split(), sys.argv[4].split()))
r.update(build=sys.argv[5], store=sys.argv[6], tool=sys.argv[7], connections=int(sys.argv[8]),
         cpu_us=ticks * 1e4 / max(r["requests"], 1), per_batch=ops / batches if batches else 0)
print(json.dumps(r))' "$line" $((cpu1 - cpu0)) "$sum0 $sum1" "$count0 $count1" \
        "$build" "$store" "$tool" "$conns" >> "$results"
      echo "round $round/$rounds: $build $store $tool $conns conn: $(tail -1 "$results" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.0f calls/s, %d errors" % (r["calls_per_sec"], r["errors"]))')" >&2
    done
  done <<<"$rows"
done

python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
groups = {}
for r in rows:
    groups.setdefault((r["store"], r["tool"], r["connections"], r["build"]), []).append(r)
med = {k: {f: statistics.median(x[f] for x in v) for f in ("calls_per_sec", "p50_ms", "cpu_us", "per_batch")}
       | {"errors": sum(x["errors"] for x in v), "runs": len(v)} for k, v in groups.items()}
print(f"\nmedians of {max(m['runs'] for m in med.values())} rounds\n")
print("| store | tool | conn | base calls/s | new calls/s | new ÷ base | base p50 ms | new p50 ms "
      "| base CPU µs/call | new CPU µs/call | base writes/batch | new writes/batch | errors |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for (store, tool, conns) in dict.fromkeys(k[:3] for k in med):
    b, n = med[(store, tool, conns, "base")], med[(store, tool, conns, "new")]
    print(f"| {store} | {tool} | {conns} | {b['calls_per_sec']:,.0f} | {n['calls_per_sec']:,.0f} | "
          f"{n['calls_per_sec'] / b['calls_per_sec']:.2f} | {b['p50_ms']:.2f} | {n['p50_ms']:.2f} | "
          f"{b['cpu_us']:.0f} | {n['cpu_us']:.0f} | {b['per_batch']:.1f} | {n['per_batch']:.1f} | "
          f"{b['errors'] + n['errors']} |")
PY
