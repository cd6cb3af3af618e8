#!/usr/bin/env bash
# Every fault drill (SPEC §8) on the local services, on every lock service:
# seeds an N-row PostgreSQL table (default 50,000), then, for each lock
# service asked, runs `migrate drill` of each kind with the lease TTL given
# (default 3s), starting over each time (--reset), and prints each drill's
# verdict, its takeovers and its summary line (RTO measured vs predicted,
# rows replayed, stale writes rejected and accepted; for the stream drills,
# the stream's takeover, the changes applied twice and the cutover's write
# freeze); at the end, the RTO of the kill drill (SIGKILL of the holder) of
# each lock service side by side. The full reports stay in a temporary
# folder. The source must log logically for the stream drills (the local
# services do: wal_level = logical).
#
#   scripts/drills.sh                 (DRILL_ROWS=50000 DRILL_TTL=3s DRILL_LOCK=all)
#   DRILL_LOCK=etcd DRILL_KINDS="kill pause" scripts/drills.sh
#
# DRILL_LOCK: redis, db (the leases in the target database), etcd, zk, or
# all of them. lock-restart restarts a private lock service of the kind;
# a database keeping the leases is no such service, so db runs without it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${DRILL_ROWS:-50000}
TTL=${DRILL_TTL:-3s}
LOCKS=${DRILL_LOCK:-all}
[ "$LOCKS" = all ] && LOCKS="redis db etcd zk"
KINDS=${DRILL_KINDS:-kill pause short-pause partition late-write lock-restart stream-kill stream-pause}
eval "$(scripts/services.sh start)"
go build -o bin/migrate ./cmd/migrate

PSQL=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql | tail -n1)
base=${MIGRATE_TEST_PG%%\?*}; base=${base%/*}
# A stream drill killed with the script may have left its slot, which DROP DATABASE refuses.
"$PSQL" -X -q "$MIGRATE_TEST_PG" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = 'drill_src'" >/dev/null
"$PSQL" -X -q "$MIGRATE_TEST_PG" -c "DROP DATABASE IF EXISTS drill_src WITH (FORCE)" -c "DROP DATABASE IF EXISTS drill_dst WITH (FORCE)" \
  -c "CREATE DATABASE drill_src" -c "CREATE DATABASE drill_dst"
"$PSQL" -X -q "$base/drill_src?sslmode=disable" <<SQL
CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL);
INSERT INTO orders SELECT g, 'customer-' || (g % 5000), (g % 100000) / 7.0, timestamptz '2024-01-01' + g * interval '1 second'
FROM generate_series(1, $ROWS) g;
SQL
dir=$(mktemp -d)
# DSNs through the environment, not argv (readable in ps; migrate warns about it).
export MIGRATE_SOURCE="$base/drill_src?sslmode=disable" MIGRATE_TARGET="$base/drill_dst?sslmode=disable"
unset MIGRATE_REDIS
plan=(--name drill-orders --table orders --key id --lease-ttl "$TTL")
failed=0
rto=()
for lock in $LOCKS; do
  case "$lock" in
    redis) export MIGRATE_LOCK=$MIGRATE_TEST_REDIS ;;
    db)    export MIGRATE_LOCK=db ;;
    etcd)  export MIGRATE_LOCK=$MIGRATE_TEST_ETCD ;;
    zk)    export MIGRATE_LOCK=$MIGRATE_TEST_ZK ;;
    *) echo "DRILL_LOCK: $lock is not redis, db, etcd or zk" >&2; exit 2 ;;
  esac
  echo "== lock: $lock"
  for kind in $KINDS; do
    [ "$lock" = db ] && [ "$kind" = lock-restart ] && continue
    out="$dir/$lock-$kind.txt"
    bin/migrate drill "${plan[@]}" --reset --holder-latency 20ms "$kind" 2>/dev/null >"$out" || failed=1
    grep -E '^drill |^  rto |^  (no takeover|takeover |stream|cutover)' "$out" || cat "$out"
    if [ "$kind" = kill ]; then
      rto+=("$(printf '%-6s %s' "$lock" "$(grep -E '^  rto ' "$out" | head -n1 | sed 's/^  //')")")
    fi
  done
done
if [ ${#rto[@]} -gt 0 ]; then
  echo "== RTO after SIGKILL of the holder, lease TTL $TTL"
  printf '%s\n' "${rto[@]}"
fi
echo "full reports: $dir"
exit $failed
