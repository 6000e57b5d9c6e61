#!/usr/bin/env bash
# tools/call throughput and latency, in one run: straight to an upstream, through undolog (HTTP and
# stdio upstream, embedded SQLite store), and through the PyPI `mcp-proxy` as a peer.
#
#   bench/gateway.sh [SECONDS]     (default 10 s per run, after 2 s of warm-up)
#
# The upstream is undolog's demo bank served alone (`undolog demo-bank`), a fast rmcp server.
# Load comes from bench/loadgen (the official Rust SDK as client, one call in flight per session).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

cargo build --release --quiet -p undolog-cli -p mcp-loadgen
undolog=$PWD/target/release/undolog
loadgen=$PWD/target/release/mcp-loadgen

venv=target/fixtures/mcpproxy
if [ ! -x "$venv/bin/mcp-proxy" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp-proxy==0.13.0"
fi

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "nothing listens on $1" >&2; exit 1; }

bank_port=$(port); gw_http_port=$(port); gw_stdio_port=$(port); proxy_port=$(port)

"$undolog" demo-bank --listen "127.0.0.1:$bank_port" >/dev/null 2>&1 & pids+=($!)

tiers='
[tools.get_balance]
tier = "read_only"
[tools.transfer]
tier = "compensable"
compensation = { tool = "transfer", args = { from_account = "{{args.to_account}}", to_account = "{{args.from_account}}", amount = "{{args.amount}}" } }
'
cat > "$work/http.toml" <<TOML
[[upstreams]]
name = "bank"
url = "http://127.0.0.1:$bank_port/mcp"
$tiers
TOML
cat > "$work/stdio.toml" <<TOML
[[upstreams]]
name = "bank"
command = "$undolog"
args = ["demo-bank", "--stdio"]
$tiers
TOML
wait_port "$bank_port"
"$undolog" serve --config "$work/http.toml" --listen "127.0.0.1:$gw_http_port" --store "sqlite://$work/http.db" >/dev/null 2>&1 & pids+=($!)
"$undolog" serve --config "$work/stdio.toml" --listen "127.0.0.1:$gw_stdio_port" --store "sqlite://$work/stdio.db" >/dev/null 2>&1 & pids+=($!)
"$venv/bin/mcp-proxy" --port "$proxy_port" --host 127.0.0.1 -- "$undolog" demo-bank --stdio >/dev/null 2>&1 & pids+=($!)
wait_port "$gw_http_port"; wait_port "$gw_stdio_port"; wait_port "$proxy_port"

run() { # label url tool args connections
  "$loadgen" --label "$1" --url "$2" --tool "$3" --args "$4" --connections "$5" --seconds "$secs" --warmup 2
}
balance='{"account": "alice"}'
transfer='{"from_account": "alice", "to_account": "bob", "amount": "{n}"}'
results="$work/results.jsonl"
for conns in 1 16; do
  for tool in get_balance transfer; do
    args=$balance; [ "$tool" = transfer ] && args=$transfer
    run "direct (rmcp upstream)" "http://127.0.0.1:$bank_port/mcp" "$tool" "$args" "$conns" >> "$results"
    run "undolog, HTTP upstream" "http://127.0.0.1:$gw_http_port/mcp" "$tool" "$args" "$conns" >> "$results"
    run "undolog, stdio upstream" "http://127.0.0.1:$gw_stdio_port/mcp" "$tool" "$args" "$conns" >> "$results"
    run "mcp-proxy 0.13, stdio upstream" "http://127.0.0.1:$proxy_port/mcp" "$tool" "$args" "$conns" >> "$results"
  done
done

python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| path | tool | sessions | calls/s | p50 ms | p99 ms | errors |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    print(f"| {r['label']} | {r['tool']} | {r['connections']} | {r['calls_per_sec']:.0f} | "
          f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['errors']} |")
PY
