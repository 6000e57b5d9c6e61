#!/usr/bin/env bash
# A flame graph of the gateway on the read-only path at 32 connections (perf, 499 Hz, DWARF
# stacks), rendered by inferno into docs/perf/read_only_32.svg.
#
#   bench/flamegraph.sh [SECONDS] [TOOL]     (default 8 s, get_balance; TOOL=transfer for the
#                                             compensable path, written to docs/perf/compensable_32.svg)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
secs=${1:-8}
tool=${2:-get_balance}
out=docs/perf/read_only_32.svg
[ "$tool" = transfer ] && out=docs/perf/compensable_32.svg
command -v perf >/dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null
command -v inferno-flamegraph >/dev/null || cargo install --quiet inferno
cargo build --release --quiet -p undolog-cli
undolog=$PWD/target/release/undolog
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
bank_port=$(port); gw_port=$(port)
"$undolog" demo-bank --listen "127.0.0.1:$bank_port" >/dev/null 2>&1 & pids+=($!)
bank_config "$work/gateway.toml" "$bank_port"
wait_port "$bank_port"
"$undolog" serve --config "$work/gateway.toml" --listen "127.0.0.1:$gw_port" --store "sqlite://$work/log.db" \
  >/dev/null 2>&1 & pids+=($!); gw=$!
wait_port "$gw_port"
wrk -t2 -c32 -d1s -s bench/gateway/call.lua "http://127.0.0.1:$gw_port/mcp" -- "$tool" new >/dev/null
perf record -q -F 499 -g --call-graph dwarf,16384 -p "$gw" -o "$work/perf.data" -- sleep "$secs" &
perf_pid=$!
wrk -t2 -c32 -d"${secs}s" -s bench/gateway/call.lua "http://127.0.0.1:$gw_port/mcp" -- "$tool" new | tail -1
wait "$perf_pid"
mkdir -p docs/perf
perf script -i "$work/perf.data" 2>/dev/null | inferno-collapse-perf \
  | inferno-flamegraph --minwidth 1 --title "undolog $tool, 32 connections, SQLite (perf $secs s)" > "$out"
echo "wrote $out ($(du -k "$out" | cut -f1) KiB)"
