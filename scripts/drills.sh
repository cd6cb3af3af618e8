#!/usr/bin/env bash
# Every fault drill (SPEC §8) on the local services: seeds an N-row
# PostgreSQL table (default 50,000), then runs `migrate drill` of each kind
# with the lease TTL given (default 3s), starting over each time (--reset),
# and prints each drill's verdict, its takeovers and its summary line (RTO
# measured vs predicted, rows replayed, stale writes rejected and accepted);
# the full reports stay in a temporary folder.
#
#   scripts/drills.sh                 (DRILL_ROWS=50000 DRILL_TTL=3s)
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${DRILL_ROWS:-50000}
TTL=${DRILL_TTL:-3s}
eval "$(scripts/services.sh start)"
go build -o bin/migrate ./cmd/migrate

PSQL=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql | tail -n1)
base=${MIGRATE_TEST_PG%%\?*}; base=${base%/*}
"$PSQL" -X -q "$MIGRATE_TEST_PG" -c "DROP DATABASE IF EXISTS drill_src WITH (FORCE)" -c "DROP DATABASE IF EXISTS drill_dst WITH (FORCE)" \
  -c "CREATE DATABASE drill_src" -c "CREATE DATABASE drill_dst"
"$PSQL" -X -q "$base/drill_src?sslmode=disable" <<SQL
CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL);
INSERT INTO orders SELECT g, 'customer-' || (g % 5000), (g % 100000) / 7.0, timestamptz '2024-01-01' + g * interval '1 second'
FROM generate_series(1, $ROWS) g;
SQL
dir=$(mktemp -d)
# DSNs through the environment, not argv (readable in ps; migrate warns about it).
export MIGRATE_SOURCE="$base/drill_src?sslmode=disable" MIGRATE_TARGET="$base/drill_dst?sslmode=disable" MIGRATE_REDIS="$MIGRATE_TEST_REDIS"
plan=(--name drill-orders --table orders --key id --lease-ttl "$TTL")
failed=0
for kind in kill pause short-pause partition late-write redis-restart; do
  bin/migrate drill "${plan[@]}" --reset --holder-latency 20ms "$kind" 2>/dev/null >"$dir/$kind.txt" || failed=1
  grep -E '^drill |^  rto |^  (no takeover|takeover )' "$dir/$kind.txt" || cat "$dir/$kind.txt"
done
echo "full reports: $dir"
exit $failed
