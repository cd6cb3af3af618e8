#!/usr/bin/env bash
# Rows per second of one uninterrupted `migrate run` in each direction, on
# the local services: seeds the same N-row table (default 1,000,000) in
# PostgreSQL and MariaDB, copies it PG->PG, PG->MySQL, MySQL->PG and
# MySQL->MySQL into fresh databases, and prints the rows/s of each. Then it
# times `migrate verify` of each copy against two baselines run in the same
# loop: both tables hashed whole in their own databases at once (PostgreSQL
# sum(hashtextextended(t::text, 0)), MariaDB CHECKSUM TABLE), and both read
# whole by the command-line clients at once.
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

# seconds runs a command and prints how long it took.
seconds() {
  local t0; t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'
}
# hash and scan are the baselines on one table, by engine and URL.
hash() {
  if [ "$1" = pg ]; then "$PSQL" -X -q "$2" -c "SELECT sum(hashtextextended(t::text, 0)) FROM orders t"
  else "${MY[@]}" "${2##*/}" -e "CHECKSUM TABLE orders"; fi
}
scan() {
  if [ "$1" = pg ]; then "$PSQL" -X -q "$2" -c "COPY orders TO STDOUT"
  else "${MY[@]}" --quick "${2##*/}" -e "SELECT * FROM orders"; fi
}
# both runs two baselines at once: both KIND1 ENGINE1 URL1 KIND2 ENGINE2 URL2.
both() {
  "$1" "$2" "$3" >/dev/null & local p=$!
  "$4" "$5" "$6" >/dev/null
  wait "$p"
}

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
  plan=(--name "$name" --source "$src" --target "$dst" --redis "$MIGRATE_TEST_REDIS" --table orders --key id)
  v=$(seconds bin/migrate verify --no-progress --json "${plan[@]}")
  method=$(bin/migrate verify --no-progress --json "${plan[@]}" | grep -o '"method": "[a-z]*"' | grep -o '[a-z]*"$' | tr -d '"')
  h=$(seconds both hash "$s" "$src" hash "$d" "$dst")
  r=$(seconds both scan "$s" "$src" scan "$d" "$dst")
  awk -v v="$v" -v h="$h" -v r="$r" -v m="$method" \
    'BEGIN { printf "               verify %.2f s (%s)  hash both %.2f s (%.2fx)  scan both %.2f s (%.2fx)\n", v, m, h, v / h, r, v / r }'
done
