#!/usr/bin/env bash
# The fault suite, longer than CI runs it: every fault of crates/undolog-cli/tests/it/faults/, with
# KILLS faults per run (default 100: 100 gateway SIGKILLs on SQLite and 100 on PostgreSQL, 100
# upstream kills per transport, 100 PostgreSQL stops, 100 kills of two gateways in turn).
#
#   bench/faults.sh [KILLS]
#
# Prints one table row per run (the table of docs/RELIABILITY.md); fails if any invariant breaks.
# Needs what `./verify` needs: PostgreSQL at 127.0.0.1:5432, the test fixtures, and root (for the
# PostgreSQL cluster of its own and the small tmpfs).
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-100}
crates/undolog-gateway/tests/fixtures/setup.sh target/fixtures >/dev/null
UNDOLOG_FAULT_KILLS=$kills cargo test --locked -p undolog-cli --test it faults:: -- \
  --nocapture --test-threads 1 2>&1 | tee target/faults.log | grep -E '^\| |^test |test result'
echo
echo "rows (for docs/RELIABILITY.md):"
grep -E '^\| [a-zA-Z]' target/faults.log | grep -v '^| fault |' 
