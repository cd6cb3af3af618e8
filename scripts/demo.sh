#!/usr/bin/env bash
# The demo: start local services, seed a 1M-row PostgreSQL table, migrate it
# to another PostgreSQL database with two instances of the same plan,
# SIGKILL the holder midway and watch the standby take over (its RTO
# breakdown in the log and in its report), then show status, verify, and
# compare both tables by SQL.
#
#   scripts/demo.sh            (DEMO_ROWS=1000000 by default)
#   DEMO_LOCK=db scripts/demo.sh
#
# DEMO_LOCK chooses the lock service that grants the leases: redis (the
# default), db (no lock service at all: the leases live in a table of the
# target database, what a plan that names none gets), etcd or zk.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${DEMO_ROWS:-1000000}
LOCK=${DEMO_LOCK:-redis}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "starting private PostgreSQL, MariaDB, Redis, etcd and ZooKeeper on 127.0.0.1"
eval "$(scripts/services.sh start)"

# The plan's lock: line. etcd and ZooKeeper get a key prefix of this run's
# own, so that an earlier demo's lease records are not this one's.
case "$LOCK" in
  redis) lock_url=$MIGRATE_TEST_REDIS ;;
  db)    lock_url=db ;;
  etcd)  lock_url="$MIGRATE_TEST_ETCD-demo-$$" ;;
  zk)    lock_url="$MIGRATE_TEST_ZK-demo-$$" ;;
  *) echo "DEMO_LOCK must be redis, db, etcd or zk" >&2; exit 2 ;;
esac

say "building migrate"
mkdir -p bin
go build -o bin/migrate ./cmd/migrate

PSQL=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql | tail -n1)
base=${MIGRATE_TEST_PG%%\?*}; base=${base%/*}   # postgres://user:pass@host:port
src="$base/demo_src?sslmode=disable"
dst="$base/demo_dst?sslmode=disable"
q() { "$PSQL" -X -q -t -A -v ON_ERROR_STOP=1 "$@"; }

say "seeding $ROWS rows into demo_src.public.orders"
q "$MIGRATE_TEST_PG" -c "DROP DATABASE IF EXISTS demo_src WITH (FORCE)" -c "DROP DATABASE IF EXISTS demo_dst WITH (FORCE)" \
  -c "CREATE DATABASE demo_src" -c "CREATE DATABASE demo_dst"
q "$src" <<SQL
CREATE TABLE orders (
  id bigint PRIMARY KEY,
  ext_id uuid NOT NULL DEFAULT gen_random_uuid(),
  customer text,
  amount numeric(12,2) NOT NULL,
  created_at timestamptz NOT NULL
);
INSERT INTO orders (id, customer, amount, created_at)
SELECT g, 'customer-' || (g % 5000), round((g % 100000) / 7.0, 2),
       timestamptz '2024-01-01' + g * interval '1 second' + (g % 997) * interval '1 microsecond'
FROM generate_series(1, $ROWS) g;
ANALYZE orders;
SQL

dir=$(mktemp -d)
cat >"$dir/plan.yaml" <<YAML
name: demo-orders
source: \${DEMO_SOURCE}
target: \${DEMO_TARGET}
lock: \${DEMO_LOCK_URL}   # redis://…, db (the target database), etcd://…, zk://…
lease_ttl: 5s
batch_size: 1000
tables:
  - name: public.orders
    key: [id]
YAML
export DEMO_SOURCE=$src DEMO_TARGET=$dst DEMO_LOCK_URL=$lock_url
if [ "$LOCK" = redis ]; then
  redis-cli -u "$MIGRATE_TEST_REDIS" --scan --pattern 'migrate:{demo-orders:*' | xargs -r redis-cli -u "$MIGRATE_TEST_REDIS" del >/dev/null
fi
echo "plan: $dir/plan.yaml"; sed 's/^/  /' "$dir/plan.yaml"
bin/migrate validate -p "$dir/plan.yaml"

say "two instances of the same plan: demo-a takes the lease, demo-b stands by"
bin/migrate run -p "$dir/plan.yaml" --instance demo-a --no-progress 2>"$dir/demo-a.log" >/dev/null &
a=$!
progress() { q "$dst" -c "SELECT coalesce(sum(rows_done),0) FROM _migrate_checkpoint WHERE plan = 'demo-orders'" 2>/dev/null || echo 0; }
until [ "$(progress)" -gt 0 ]; do kill -0 "$a" 2>/dev/null || { cat "$dir/demo-a.log"; exit 1; }; sleep 0.1; done
echo "demo-a (pid $a) holds the lease and copies; its log: $dir/demo-a.log"
bin/migrate run -p "$dir/plan.yaml" --instance demo-b --no-progress &
b=$!
target=$((ROWS * 4 / 10))
while kill -0 "$a" 2>/dev/null && [ "$(progress)" -lt "$target" ]; do sleep 0.2; done
kill -9 "$a" 2>/dev/null || true
wait "$a" 2>/dev/null || true
say "SIGKILLed the holder demo-a at $(progress) rows: demo-b waits out its lease (TTL 5s, lock: $LOCK), takes over with a higher token and resumes"
bin/migrate status -p "$dir/plan.yaml"
wait "$b"

say "status: the takeover and its RTO are kept for operators"
bin/migrate status -p "$dir/plan.yaml"

say "migrate verify (chunk checksums in each database, rows compared where they differ)"
bin/migrate verify -p "$dir/plan.yaml" --no-progress

say "comparing source and target by SQL"
digest="SELECT count(*) || ' rows, md5 ' || md5(string_agg(concat_ws(',', id, ext_id, customer, amount, created_at), '|' ORDER BY id)) FROM orders"
s=$(q "$src" -c "$digest"); t=$(q "$dst" -c "$digest")
echo "source: $s"; echo "target: $t"
if [ "$s" = "$t" ]; then echo "EQUAL"; else echo "DIFFERENT"; exit 1; fi

say "rows the crash cost, from the target's own statistics"
sleep 1 # backends report their counters when they end
q "$dst" -c "SELECT 'row writes ' || (n_tup_ins + n_tup_upd) || ' for $ROWS rows: ' || (n_tup_ins + n_tup_upd - $ROWS) || ' written by the killed uncommitted batch or rewritten after the takeover (at most one batch)' FROM pg_stat_user_tables WHERE relname = 'orders'"
