#!/usr/bin/env bash
# The server's CPU per new effect's statement, by shape, on the store's schema, alternating ROUNDS
# times, with each shape's median (statement_cost.py says how it measures and what each shape is).
# Besides the store's shapes, inserts into copies of `effects` (no row-level security) with all of
# its indexes, without the signature's, with only the (id, org) key, and with none: what each
# index and the policy cost an insert.
#
#   bench/pg/statement_cost.sh                # 400 batches of 10 a run, 3 rounds
#   BATCHES=1000 K=5 ROUNDS=5 bench/pg/statement_cost.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
batches=${BATCHES:-400}
k=${K:-10}
rounds=${ROUNDS:-3}
db="undolog_statements_$$_$RANDOM"
trap 'psql -q -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true' EXIT

pg_isready -q || { echo "PostgreSQL does not answer at $PGHOST:$PGPORT" >&2; exit 1; }
psql -q -d postgres -c "CREATE DATABASE \"$db\""
cat crates/undolog-store/src/postgres/0*.sql | psql -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null
psql -q -v ON_ERROR_STOP=1 -d "$db" <<'SQL'
CREATE TABLE copy_all_indexes (LIKE effects INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE TABLE copy_no_signature_index (LIKE effects INCLUDING DEFAULTS INCLUDING INDEXES);
DROP INDEX copy_no_signature_index_signature_org_seq_idx;
CREATE TABLE copy_id_key_only (LIKE effects INCLUDING DEFAULTS);
ALTER TABLE copy_id_key_only ADD UNIQUE (id, org);
CREATE TABLE copy_no_index (LIKE effects INCLUDING DEFAULTS);
GRANT ALL ON copy_all_indexes, copy_no_signature_index, copy_id_key_only, copy_no_index
  TO undolog_app;
SQL

shapes="function execute statement values values:copy_all_indexes values:copy_no_signature_index
  values:copy_id_key_only values:copy_no_index"
echo "$(nproc) cores; $batches batches of $k statements a run, $rounds rounds; µs of the server's CPU a statement"
results=$(mktemp)
for round in $(seq "$rounds"); do
  for shape in $shapes; do
    python3 bench/pg/statement_cost.py "$db" "$shape" "$batches" "$k" | tee -a "$results" \
      | sed "s/^/round $round: /"
  done
done
echo "medians:"
python3 - "$results" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    shape, us = re.match(r"(\S+): ([0-9.]+) µs", line).groups()
    runs.setdefault(shape, []).append(float(us))
for shape, values in runs.items():
    print(f"  {shape:32} {statistics.median(values):6.1f}   ({' / '.join(f'{v:.1f}' for v in values)})")
PY
rm -f "$results"
