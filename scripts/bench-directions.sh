#!/usr/bin/env bash
# Rows per second of one uninterrupted `migrate run` in each direction, on
# the local services: seeds the same N-row table (default 1,000,000) in
# PostgreSQL and MariaDB, copies it PG->PG, PG->MySQL, MySQL->PG and
# MySQL->MySQL into fresh databases, and prints the rows/s of each.
#
#   scripts/bench-directions.sh            (BENCH_ROWS=1000000 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${BENCH_ROWS:-1000000}
eval "$(scripts/services.sh start)"
go build -o bin/migrate ./cmd/migrate

PSQL=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql | tail -n1)
pgbase=${MIGRATE_TEST_PG%%\?*}; pgbase=${pgbase%/*}
mybase=${MIGRATE_TEST_MYSQL%/*}
myuser=${mybase#mysql://}; myuser=${myuser%%@*}
myhostport=${mybase##*@}
MY=(mariadb --no-defaults -h "${myhostport%:*}" -P "${myhostport#*:}" -u "${myuser%%:*}" "-p${myuser#*:}")

"$PSQL" -X -q "$MIGRATE_TEST_PG" -c "DROP DATABASE IF EXISTS bench_src WITH (FORCE)" -c "CREATE DATABASE bench_src"
"$PSQL" -X -q "$pgbase/bench_src?sslmode=disable" <<SQL
CREATE TABLE orders (id bigint PRIMARY KEY, customer varchar(40) NOT NULL, amount numeric(12,2) NOT NULL,
  paid boolean NOT NULL, created_at timestamp(6) NOT NULL, note text);
INSERT INTO orders SELECT g, 'customer-' || (g % 5000), (g % 100000) / 7.0, g % 3 = 0,
  timestamp '2024-01-01' + g * interval '1 second', CASE WHEN g % 10 = 0 THEN NULL ELSE 'note ' || g END
FROM generate_series(1, $N) g;
ANALYZE orders;
SQL
"${MY[@]}" -e "DROP DATABASE IF EXISTS bench_src; CREATE DATABASE bench_src CHARACTER SET utf8mb4"
"${MY[@]}" bench_src <<SQL
CREATE TABLE orders (id bigint PRIMARY KEY, customer varchar(40) NOT NULL, amount decimal(12,2) NOT NULL,
  paid tinyint(1) NOT NULL, created_at datetime(6) NOT NULL, note longtext);
INSERT INTO orders SELECT seq, CONCAT('customer-', seq % 5000), (seq % 100000) / 7.0, seq % 3 = 0,
  TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND, IF(seq % 10 = 0, NULL, CONCAT('note ', seq))
FROM seq_1_to_$N;
ANALYZE TABLE orders;
SQL

dir=$(mktemp -d)
for dirn in pg:pg pg:mysql mysql:pg mysql:mysql; do
  s=${dirn%%:*}; d=${dirn##*:}
  name="bench-$s-$d"
  if [ "$s" = pg ]; then src="$pgbase/bench_src?sslmode=disable"; else src="$mybase/bench_src"; fi
  if [ "$d" = pg ]; then
    "$PSQL" -X -q "$MIGRATE_TEST_PG" -c "DROP DATABASE IF EXISTS bench_dst WITH (FORCE)" -c "CREATE DATABASE bench_dst"
    dst="$pgbase/bench_dst?sslmode=disable"
  else
    "${MY[@]}" -e "DROP DATABASE IF EXISTS bench_dst; CREATE DATABASE bench_dst CHARACTER SET utf8mb4"
    dst="$mybase/bench_dst"
  fi
  redis-cli -u "$MIGRATE_TEST_REDIS" --scan --pattern "migrate:{$name:*" | xargs -r redis-cli -u "$MIGRATE_TEST_REDIS" del >/dev/null
  out=$(bin/migrate run --no-progress --json --name "$name" --source "$src" --target "$dst" --redis "$MIGRATE_TEST_REDIS" \
    --table orders --key id 2>"$dir/$name.log")
  rows=$(grep -o '"rows_written": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
  ms=$(grep -o '"elapsed_ms": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
  equal=$(grep -o '"equal": [a-z]*' <<<"$out" | head -n1 | grep -o '[a-z]*$')
  awk -v s="$s" -v d="$d" -v n="$rows" -v ms="$ms" -v eq="$equal" \
    'BEGIN { printf "%5s -> %-5s  %9d rows  %7.1f s  %9.0f rows/s  verify equal: %s\n", s, d, n, ms / 1000, n / (ms / 1000), eq }'
done
