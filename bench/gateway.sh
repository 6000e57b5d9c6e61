#!/usr/bin/env bash
# tools/call side by side, in one run with interleaved rounds: straight to an upstream, through
# undolog (read only; compensable on the embedded store and on PostgreSQL, every call new and
# every call a replay; and split, a gateway with no store in front of `undolog engine` over
# gRPC) and through the PyPI `mcp-proxy` as a peer that records nothing.
#
#   bench/gateway.sh [SECONDS] [ROUNDS]     (default 10 s per run, 3 rounds)
#
# Load: wrk (2 threads at 32 connections, 1 at 1), one stateless 2026-07-28 `tools/call` per
# request (bench/gateway/call.lua); the upstream is undolog's demo bank served alone by rmcp.
# Each round runs every row once, in a rotated order, after a 1 s warm-up; the tables give each
# row's median over the rounds, its peak RSS, and ratios against direct and against mcp-proxy.
# Before any load, the gateway's RSS idle and with 1,000 live MCP sessions (bench/gateway/sessions.py).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
secs=${1:-10}
rounds=${2:-3}
work=$(mktemp -d)
pids=()
pg_url=${UNDOLOG_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
pg_db="undolog_bench_$$"
trap 'end_run "$pg_db"' EXIT

command -v wrk >/dev/null || { echo "installing wrk" >&2; apt-get install -y -qq wrk >/dev/null; }
cargo build --release --quiet -p undolog-cli
undolog=${CARGO_TARGET_DIR:-$PWD/target}/release/undolog
venv=target/fixtures/mcpproxy
if [ ! -x "$venv/bin/mcp-proxy" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp-proxy==0.13.0"
fi
psql "$pg_url/postgres" -qc "CREATE DATABASE $pg_db" >/dev/null

bank_port=$(port); sqlite_port=$(port); pg_port=$(port); proxy_port=$(port)
engine_port=$(port); split_port=$(port)

"$undolog" demo-bank --listen "127.0.0.1:$bank_port" >/dev/null 2>&1 & pids+=($!); bank_pid=$!
bank_config "$work/gateway.toml" "$bank_port"
wait_port "$bank_port"
"$undolog" serve --config "$work/gateway.toml" --listen "127.0.0.1:$sqlite_port" \
  --store "sqlite://$work/log.db" >"$work/sqlite.log" 2>&1 & pids+=($!); sqlite_pid=$!
"$undolog" serve --config "$work/gateway.toml" --listen "127.0.0.1:$pg_port" \
  --store "$pg_url/$pg_db" >"$work/pg.log" 2>&1 & pids+=($!); pg_pid=$!
"$undolog" engine --config "$work/gateway.toml" --listen "127.0.0.1:$engine_port" \
  --store "sqlite://$work/engine.db" >"$work/engine.log" 2>&1 & pids+=($!)
wait_port "$engine_port"
"$undolog" serve --config "$work/gateway.toml" --listen "127.0.0.1:$split_port" \
  --engine "grpc://127.0.0.1:$engine_port" >"$work/split.log" 2>&1 & pids+=($!); split_pid=$!
"$venv/bin/mcp-proxy" --stateless --port "$proxy_port" --host 127.0.0.1 -- "$undolog" demo-bank --stdio \
  >/dev/null 2>&1 & pids+=($!); proxy_pid=$!
wait_port "$sqlite_port"; wait_port "$pg_port"; wait_port "$proxy_port"; wait_port "$split_port"
sleep 1

rss() { awk '/^VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
peak() { awk '/^VmHWM/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
memory="$work/memory.json"
python3 - "$(rss "$sqlite_pid")" "$(rss "$pg_pid")" > "$memory" <<'PY'
import json, sys
print(json.dumps({"idle_sqlite_mib": float(sys.argv[1]), "idle_postgres_mib": float(sys.argv[2])}))
PY
python3 bench/gateway/sessions.py "http://127.0.0.1:$sqlite_port/mcp" "$sqlite_pid" 1000 >> "$memory"

# label | pid | url | tool | mode | protocol version
rows="direct|$bank_pid|http://127.0.0.1:$bank_port/mcp|get_balance|new|2026-07-28
direct|$bank_pid|http://127.0.0.1:$bank_port/mcp|transfer|new|2026-07-28
undolog read_only, SQLite|$sqlite_pid|http://127.0.0.1:$sqlite_port/mcp|get_balance|new|2026-07-28
undolog compensable, SQLite, every call new|$sqlite_pid|http://127.0.0.1:$sqlite_port/mcp|transfer|new|2026-07-28
undolog compensable, SQLite, every call a replay|$sqlite_pid|http://127.0.0.1:$sqlite_port/mcp|transfer|same|2026-07-28
undolog read_only, PostgreSQL|$pg_pid|http://127.0.0.1:$pg_port/mcp|get_balance|new|2026-07-28
undolog compensable, PostgreSQL, every call new|$pg_pid|http://127.0.0.1:$pg_port/mcp|transfer|new|2026-07-28
undolog compensable, PostgreSQL, every call a replay|$pg_pid|http://127.0.0.1:$pg_port/mcp|transfer|same|2026-07-28
undolog read_only, split (engine over gRPC, SQLite)|$split_pid|http://127.0.0.1:$split_port/mcp|get_balance|new|2026-07-28
undolog compensable, split, every call new|$split_pid|http://127.0.0.1:$split_port/mcp|transfer|new|2026-07-28
undolog compensable, split, every call a replay|$split_pid|http://127.0.0.1:$split_port/mcp|transfer|same|2026-07-28
mcp-proxy 0.13 (records nothing)|$proxy_pid|http://127.0.0.1:$proxy_port/mcp|get_balance|new|2025-11-25"
mapfile -t all <<<"$rows"
results="$work/results.jsonl"
for round in $(seq "$rounds"); do
  for conns in 1 32; do
    threads=2; [ "$conns" = 1 ] && threads=1
    n=${#all[@]}
    for i in $(seq 0 $((n - 1))); do
      IFS='|' read -r label pid url tool mode version <<<"${all[$(( (i + round) % n ))]}"
      wrk -t"$threads" -c"$conns" -d1s -s bench/gateway/call.lua "$url" -- "$tool" "$mode" "$version" >/dev/null 2>&1
      echo 5 > "/proc/$pid/clear_refs" 2>/dev/null || true
      line=$(wrk -t"$threads" -c"$conns" -d"${secs}s" -s bench/gateway/call.lua "$url" -- "$tool" "$mode" "$version" 2>"$work/wrk.err" | tail -1)
      python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(label=sys.argv[2], tool=sys.argv[3], connections=int(sys.argv[4]), round=int(sys.argv[5]), peak_rss_mib=float(sys.argv[6])); print(json.dumps(r))' \
        "$line" "$label" "$tool" "$conns" "$round" "$(peak "$pid")" >> "$results"
      echo "round $round/$rounds, $conns conn: $label ($tool): $(tail -1 "$results" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.0f calls/s, %d errors" % (r["calls_per_sec"], r["errors"]))')" >&2
    done
  done
done
grep -h "first failure" "$work/wrk.err" >&2 || true

python3 - "$results" "$memory" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
memory = {}
for line in open(sys.argv[2]):
    memory.update(json.loads(line))
key = lambda r: (r["label"], r["tool"], r["connections"])
groups = {}
for r in rows:
    groups.setdefault(key(r), []).append(r)
med = {k: {f: statistics.median(x[f] for x in v) for f in ("calls_per_sec", "p50_ms", "p99_ms")}
       | {"peak_rss_mib": max(x["peak_rss_mib"] for x in v), "errors": sum(x["errors"] for x in v),
          "rounds": len(v)} for k, v in groups.items()}
proxy = {c: m["calls_per_sec"] for (l, t, c), m in med.items() if l.startswith("mcp-proxy")}
for conns in (1, 32):
    print(f"\n{conns} connection{'s' if conns > 1 else ''} (median of {max(m['rounds'] for m in med.values())} rounds):\n")
    print("| path | tool | calls/s | × direct | × mcp-proxy | p50 ms | p99 ms | peak RSS MiB | errors |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (label, tool, c), m in med.items():
        if c != conns:
            continue
        direct = med.get(("direct", tool, c), {}).get("calls_per_sec")
        ratio = f"{m['calls_per_sec'] / direct:.2f}" if direct else ""
        versus = f"{m['calls_per_sec'] / proxy[c]:.1f}" if c in proxy else ""
        print(f"| {label} | {tool} | {m['calls_per_sec']:,.0f} | {ratio} | {versus} | {m['p50_ms']:.2f} | "
              f"{m['p99_ms']:.2f} | {m['peak_rss_mib']:.0f} | {m['errors']} |")
print(f"\nGateway RSS: idle {memory['idle_sqlite_mib']} MiB on SQLite, {memory['idle_postgres_mib']} MiB on "
      f"PostgreSQL; with {memory['sessions']} live MCP sessions (SQLite) {memory['rss_after_mib']} MiB.")
PY
