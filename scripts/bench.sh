#!/usr/bin/env bash
# The throughput benchmark of issue 6: `migrate run` against the raw tools of
# each engine, in the same run, on the same data.
#
#   make bench                                   (or scripts/bench.sh)
#   BENCH_ROWS=100000 BENCH_RUNS=1 make bench    a quick one
#   BENCH_ONLY=pg-pg,verify make bench           some of it (see "Sections")
#   BENCH_SCALE_ROWS=10000000 make bench         also the peak RSS of PG->PG at 10M rows
#   BENCH_ONLY=fleet make bench                  only the fleet table (shards x instances; BENCH_FLEET=1: also)
#
# It starts the local services (scripts/services.sh), builds bin/migrate, seeds
# one table of BENCH_ROWS rows (default 1,000,000, ~250 bytes each: bigint key,
# uuid, two texts, numeric(12,2), short text, two timestamps, a nullable
# 60-char text, boolean) into the database mbench_src of PostgreSQL and of
# MariaDB (the same values in both; kept between runs of the script when it is
# already there with the right row count), then BENCH_RUNS times (default 3),
# in alternation:
#
#   pg-pg   raw COPY pipe, binary and text (psql COPY TO STDOUT | psql COPY FROM STDIN);
#           migrate run
#   my-my   SELECT … INTO OUTFILE + LOAD DATA INFILE (when secure_file_priv
#           allows; otherwise the client's export to a file + LOAD DATA LOCAL INFILE);
#           migrate run
#   pg-my   raw read of the source (COPY TO STDOUT > /dev/null) and raw bulk load
#           of the target (LOAD DATA of a file made beforehand); migrate run
#   my-pg   raw read of the source (mariadb --quick > /dev/null) and raw bulk load
#           of the target (COPY FROM a file made beforehand); migrate run
#
# and for each direction, on the copy just made:
#
#   replay    a second `migrate run` under a new plan name whose token counter
#             starts above the first's: every row is already there with a lower
#             token and is rewritten
#   verify    (pg-pg, my-my) `migrate verify` against hashing both tables in their
#             own databases at once (sum(hashtextextended(t::text, 0)) / CHECKSUM TABLE)
#   pgloader  (pg-pg, my-pg) pgloader into a fresh PostgreSQL database
#
# and, when asked for (BENCH_ONLY=fleet or BENCH_FLEET=1), in the same runs:
#
#   fleet     PG->PG only: for each shard count S of BENCH_FLEET_SHARDS (default
#             "1 2 4") and instance count N of BENCH_FLEET_INSTANCES (default
#             "1 2 3"), a fresh target database and plan name, a plan file with
#             `shards: S` (lease_ttl BENCH_FLEET_TTL, default 30s; batch_size
#             1000; DSNs as ${MBENCH_SOURCE} etc., from the environment), and N
#             `migrate run -p PLAN --instance fleet-I --parallel ceil(S/N)` started
#             at once (so the shards divide among the instances). Copy time runs
#             from the start of the first to the last shard's done commit (the
#             checkpoints' updated_at); wall time to the exit of the last instance
#             (standbys notice the end within their poll period, TTL/10), every
#             one must exit 0 and the target hold every row. rows/s is of the
#             copy time. The
#             Redis commands of the cell are the difference of INFO commandstats
#             before and after it, INFO itself left out (server-wide: another
#             client of the same Redis meanwhile counts too). A Markdown table
#             gives, per cell, the median wall time over the runs, rows/s, the
#             rows_written of each instance in each run, Redis commands/s and
#             per instance; then the commands one by one for the largest cell.
#
# Each `migrate run` is the plan-less form with --no-progress --json --no-verify
# (DSNs through MIGRATE_SOURCE/TARGET/REDIS, not argv), a plan name of its own, a
# fresh target database and its peak RSS from /usr/bin/time. It runs a copy of
# bin/migrate taken right after the build, so a rebuild meanwhile changes nothing.
#
# Every target is a fresh database, and PostgreSQL is CHECKPOINTed before each
# measurement. The table on stdout has the medians over the runs, rows/s, MB/s
# (of the source table's size: pg_table_size, data_length), the peak RSS of
# migrate, and each goal of the issue with its ratio, target and MET / NOT MET.
# Progress goes to stderr. Exit 1 when a measurement failed (pgloader aside).
#
# Sections: BENCH_ONLY is a comma-separated list of directions (pg-pg, my-my,
# pg-my, my-pg) and extras (replay, verify, pgloader, scale, fleet). Listed
# directions run with the listed extras; no direction listed means all of them,
# no extra listed means all of them (scale only with BENCH_SCALE_ROWS, fleet
# only with BENCH_FLEET=1). fleet runs whenever it is listed, whatever the
# directions, and alone (BENCH_ONLY=fleet) it is all that runs: no direction,
# no MariaDB seed.
#
# By default (BENCH_DURABLE=1) the bench turns on PostgreSQL fsync,
# synchronous_commit and full_page_writes and MariaDB
# innodb_flush_log_at_trx_commit=1 (the issue's reference machine: every
# batch's commit durable) for its duration, on the whole server, and puts
# them back at the end. BENCH_DURABLE=0 keeps the settings of
# scripts/services.sh (fsync off, for fast tests), which the header shows.
#
# The servers are those of scripts/services.sh: MIGRATE_SVC_DIR,
# MIGRATE_PG_PORT, MIGRATE_MYSQL_PORT and MIGRATE_REDIS_PORT choose another set.
# Run as root (like services.sh: it may install packages with apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${BENCH_ROWS:-1000000}
RUNS=${BENCH_RUNS:-3}
SCALE_ROWS=${BENCH_SCALE_ROWS:-}
FLEET=${BENCH_FLEET:-}
[ "$FLEET" = 0 ] && FLEET=
FLEET_SHARDS=${BENCH_FLEET_SHARDS:-1 2 4}
FLEET_INSTANCES=${BENCH_FLEET_INSTANCES:-1 2 3}
FLEET_TTL=${BENCH_FLEET_TTL:-30s}
ONLY=${BENCH_ONLY:-}
DURABLE=${BENCH_DURABLE-1}
[ "$DURABLE" = 0 ] && DURABLE=
SEED_VERSION=1          # bump when the seeded table changes: sources are seeded again
TABLE=orders
TAG=$$                  # names this invocation's plans and files

DIRECTIONS=(pg-pg my-my pg-my my-pg)
EXTRAS=(replay verify pgloader scale fleet)

# ---------------------------------------------------------------- helpers

log() { printf '%s bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

apt_updated=
# need_pkg PATH PACKAGE: install PACKAGE with apt-get when PATH is not there.
need_pkg() {
  [ -x "$1" ] && return 0
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2 with apt-get"
  if [ -z "$apt_updated" ]; then apt-get update -qq >&2; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >&2
}

# in_list WORD LIST...: WORD is one of LIST.
in_list() { local w=$1 x; shift; for x in "$@"; do [ "$x" = "$w" ] && return 0; done; return 1; }

# The sections BENCH_ONLY asks for.
only_dirs=() only_extras=()
parse_only() {
  local w words=()
  IFS=", " read -r -a words <<<"$ONLY"
  for w in "${words[@]}"; do
    if in_list "$w" "${DIRECTIONS[@]}"; then only_dirs+=("$w")
    elif in_list "$w" "${EXTRAS[@]}"; then only_extras+=("$w")
    else die "BENCH_ONLY: unknown section '$w' (directions: ${DIRECTIONS[*]}; extras: ${EXTRAS[*]})"
    fi
  done
  # fleet alone: no direction
  if [ ${#only_dirs[@]} -eq 0 ] && [ ${#only_extras[@]} -gt 0 ]; then
    FLEET_ALONE=1
    for w in "${only_extras[@]}"; do [ "$w" = fleet ] || FLEET_ALONE=; done
  fi
}
FLEET_ALONE=   # BENCH_ONLY names fleet and nothing else
want_dir() { [ -z "$FLEET_ALONE" ] && { [ ${#only_dirs[@]} -eq 0 ] || in_list "$1" "${only_dirs[@]}"; }; }
want_extra() { [ ${#only_extras[@]} -eq 0 ] || in_list "$1" "${only_extras[@]}"; }
# want_fleet: fleet listed, or BENCH_FLEET=1 and no extra listed.
want_fleet() { in_list fleet "${only_extras[@]}" || { [ -n "$FLEET" ] && want_extra fleet; }; }

# ---------------------------------------------------------------- results
#
# results.tsv: KEY <tab> RUN <tab> SECONDS <tab> RSS_KB (or "-")
# failed.tsv:  KEY <tab> REASON (a measurement that could not be made)

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$run" "$2" "${3:--}" >>"$work/results.tsv"; }
fail() { log "$1 failed: $2"; printf '%s\t%s\n' "$1" "$2" >>"$work/failed.tsv"; }
failed() { [ -f "$work/failed.tsv" ] && grep -q "^$1	" "$work/failed.tsv"; }

# timed KEY CMD...: run CMD, record its wall time under KEY.
timed() {
  local key=$1 t0 t1; shift
  t0=$(now)
  "$@"
  t1=$(now)
  record "$key" "$(elapsed "$t0" "$t1")"
  log "  $key: $(elapsed "$t0" "$t1") s"
}

# ---------------------------------------------------------------- connections

PSQL=
MY=()
# connect: start the services and derive the clients' settings from their URLs.
# Passwords go through PGPASSWORD / MYSQL_PWD / MIGRATE_* variables, never argv.
connect() {
  eval "$(scripts/services.sh start)"
  local found=(/usr/lib/postgresql/*/bin/psql)
  PSQL=$(command -v psql || echo "${found[-1]}")
  local u=${MIGRATE_TEST_PG#postgres://}; u=${u%%\?*}
  PG_USER=${u%%:*}; u=${u#*:}; PGPASSWORD=${u%%@*}; u=${u#*@}
  PG_HOSTPORT=${u%%/*}; PG_ADMIN_DB=${u#*/}
  export PGPASSWORD PGOPTIONS="-c client_min_messages=warning"   # no NOTICEs from DROP … IF EXISTS
  u=${MIGRATE_TEST_MYSQL#mysql://}
  MY_USER=${u%%:*}; u=${u#*:}; MYSQL_PWD=${u%%@*}; u=${u#*@}
  MY_HOSTPORT=${u%%/*}
  export MYSQL_PWD
  MY=(mariadb --no-defaults -h "${MY_HOSTPORT%:*}" -P "${MY_HOSTPORT#*:}" -u "$MY_USER")
  REDIS_URL=$MIGRATE_TEST_REDIS
}
# DSNs with the password, for migrate (through its environment) and pgloader.
pg_dsn() { echo "postgres://$PG_USER:$PGPASSWORD@$PG_HOSTPORT/$1?sslmode=disable"; }
my_dsn() { echo "mysql://$MY_USER:$MYSQL_PWD@$MY_HOSTPORT/$1"; }

# pg DB ARGS...: psql on DB, unaligned, stop on the first error.
pg() { local db=$1; shift; "$PSQL" -X -q -t -A -v ON_ERROR_STOP=1 "postgres://$PG_USER@$PG_HOSTPORT/$db?sslmode=disable" "$@"; }
# my ARGS...: the mariadb client, tab-separated, no column names.
my() { "${MY[@]}" -N -B "$@"; }

# fresh_pg DB / fresh_my DB: an empty database of that name; then a CHECKPOINT
# so that no measurement pays for the writes of the one before.
fresh_pg() {
  pg "$PG_ADMIN_DB" -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" -c "CHECKPOINT"
}
fresh_my() {
  my -e "DROP DATABASE IF EXISTS $1; CREATE DATABASE $1 CHARACTER SET utf8mb4"
  pg "$PG_ADMIN_DB" -c "CHECKPOINT"
}

# ---------------------------------------------------------------- the table

# The same columns in both engines. MariaDB's types are those migrate creates
# from PostgreSQL's (and maps back to them), so every direction copies into
# the same shape as the baselines load.
pg_ddl() {
  cat <<SQL
CREATE TABLE $TABLE (
  id bigint PRIMARY KEY,
  ext_id uuid NOT NULL,
  title text NOT NULL,
  body text NOT NULL,
  amount numeric(12,2) NOT NULL,
  status varchar(16) NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamp NOT NULL,
  note varchar(60),
  active boolean NOT NULL
);
SQL
}
my_ddl() {
  cat <<SQL
CREATE TABLE $TABLE (
  id bigint NOT NULL PRIMARY KEY,
  ext_id char(36) NOT NULL,
  title longtext NOT NULL,
  body longtext NOT NULL,
  amount decimal(12,2) NOT NULL,
  status varchar(16) NOT NULL,
  created_at datetime(6) NOT NULL,
  updated_at datetime(6) NOT NULL,
  note varchar(60),
  active tinyint(1) NOT NULL
);
SQL
}

# Deterministic values of row g, written twice, once per engine's SQL; the
# check in seed() compares them. note is NULL for 10% of rows.
pg_seed_sql() { # pg_seed_sql N
  cat <<SQL
INSERT INTO $TABLE
SELECT g,
  md5('u' || g)::uuid,
  'Order ' || g || ' for customer ' || (g * 7 % 50000),
  md5('b' || g) || ' ' || md5('c' || g) || ' item ' || (g % 997),
  (g * 7919 % 10000000) / 100.0,
  (ARRAY['new', 'paid', 'shipped', 'delivered', 'cancelled'])[g % 5 + 1],
  timestamptz '2024-01-01 00:00:00+00' + g * interval '17 seconds' + (g % 999983) * interval '1 microsecond',
  timestamp '2024-01-01 00:00:00' + g * interval '17 seconds' + (g % 86400) * interval '1 second',
  CASE WHEN g % 10 = 3 THEN NULL ELSE rpad('note ' || g || ' ', 60, md5('n' || g)) END,
  g % 3 <> 0
FROM generate_series(1::bigint, $1) g;
SQL
}
my_seed_sql() { # my_seed_sql N
  cat <<SQL
INSERT INTO $TABLE
SELECT seq,
  CONCAT_WS('-', SUBSTR(h, 1, 8), SUBSTR(h, 9, 4), SUBSTR(h, 13, 4), SUBSTR(h, 17, 4), SUBSTR(h, 21, 12)),
  CONCAT('Order ', seq, ' for customer ', seq * 7 % 50000),
  CONCAT(MD5(CONCAT('b', seq)), ' ', MD5(CONCAT('c', seq)), ' item ', seq % 997),
  (seq * 7919 % 10000000) / 100,
  ELT(seq % 5 + 1, 'new', 'paid', 'shipped', 'delivered', 'cancelled'),
  TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * 17 SECOND + INTERVAL seq % 999983 MICROSECOND,
  TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * 17 SECOND + INTERVAL seq % 86400 SECOND,
  IF(seq % 10 = 3, NULL, RPAD(CONCAT('note ', seq, ' '), 60, MD5(CONCAT('n', seq)))),
  seq % 3 <> 0
FROM (SELECT seq, MD5(CONCAT('u', seq)) AS h FROM seq_1_to_$1) s;
SQL
}

# The marker a finished seed leaves as the table's comment.
seed_mark() { echo "migrate bench seed v$SEED_VERSION, $1 rows"; }

# seed_pg DB N / seed_my DB N: the table with N rows in DB, unless it is there already.
seed_pg() {
  local db=$1 n=$2
  if [ "$(pg "$PG_ADMIN_DB" -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" = 1 ] &&
    [ "$(pg "$db" -c "SELECT obj_description('$TABLE'::regclass)" 2>/dev/null)" = "$(seed_mark "$n")" ] &&
    [ "$(pg "$db" -c "SELECT count(*) FROM $TABLE")" = "$n" ]; then
    log "PostgreSQL $db.$TABLE already has its $n rows"
    return 0
  fi
  log "seeding $n rows into PostgreSQL $db.$TABLE"
  fresh_pg "$db"
  { pg_ddl; pg_seed_sql "$n"; echo "ANALYZE $TABLE; COMMENT ON TABLE $TABLE IS '$(seed_mark "$n")';"; } | pg "$db"
}
seed_my() {
  local db=$1 n=$2
  if [ "$(my -e "SELECT table_comment FROM information_schema.tables WHERE table_schema = '$db' AND table_name = '$TABLE'")" = "$(seed_mark "$n")" ] &&
    [ "$(my "$db" -e "SELECT count(*) FROM $TABLE")" = "$n" ]; then
    log "MariaDB $db.$TABLE already has its $n rows"
    return 0
  fi
  log "seeding $n rows into MariaDB $db.$TABLE"
  fresh_my "$db"
  { my_ddl; my_seed_sql "$n"; echo "ALTER TABLE $TABLE COMMENT = '$(seed_mark "$n")'; ANALYZE TABLE $TABLE;"; } | my "$db" >/dev/null
}

# same_data: the first 1000 rows, rendered alike by both engines, hash the same.
same_data() {
  local a b
  a=$(pg mbench_src -c "SELECT md5(string_agg(concat_ws('|', id, ext_id, title, body, amount, status,
      to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), to_char(updated_at, 'YYYY-MM-DD HH24:MI:SS.US'),
      coalesce(note, 'NULL'), active::int), E'\n' ORDER BY id)) FROM $TABLE WHERE id <= 1000")
  b=$(my mbench_src -e "SET SESSION group_concat_max_len = 16777216;
      SELECT MD5(GROUP_CONCAT(CONCAT_WS('|', id, ext_id, title, body, amount, status,
      DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f'), DATE_FORMAT(updated_at, '%Y-%m-%d %H:%i:%s.%f'),
      IFNULL(note, 'NULL'), active) ORDER BY id SEPARATOR '\n')) FROM $TABLE WHERE id <= 1000")
  [ "$a" = "$b" ] || die "the seeded tables differ between PostgreSQL ($a) and MariaDB ($b) on rows 1..1000"
}

# ---------------------------------------------------------------- bulk files

# MariaDB's file baselines use SELECT … INTO OUTFILE and LOAD DATA INFILE in
# the server's secure_file_priv folder; when the server forbids them (NULL),
# the client exports to a file and loads it with LOAD DATA LOCAL INFILE.
MY_FILES=       # folder the server reads and writes; empty: client-side fallback
MY_BULK="INTO OUTFILE + LOAD DATA"   # the MY->MY baseline, as the table names it
MY_FILE_MODE=
my_file_setup() {
  local priv
  priv=$(my -e "SELECT IFNULL(@@secure_file_priv, 'NULL')")
  case "$priv" in
    NULL)
      MY_FILE_MODE="client export + LOAD DATA LOCAL INFILE (the server's secure_file_priv is NULL: restart it with scripts/services.sh for INTO OUTFILE)"
      log "MariaDB forbids INTO OUTFILE (secure_file_priv is NULL; scripts/services.sh sets it on the next start): falling back to the client's export + LOAD DATA LOCAL INFILE"
      MY_BULK="client export + LOAD LOCAL"
      MY_FILES= ;;
    "")
      # any folder will do: one the server (user mysql) can reach and write
      MY_FILES=$work/myfiles; mkdir -p "$MY_FILES"; chmod 711 "$work"; chmod 777 "$MY_FILES"
      MY_FILE_MODE="SELECT INTO OUTFILE + LOAD DATA INFILE" ;;
    *)
      MY_FILES=${priv%/}
      MY_FILE_MODE="SELECT INTO OUTFILE + LOAD DATA INFILE (in $MY_FILES)" ;;
  esac
}
# my_file NAME: the path of a bulk file of this invocation.
my_file() { if [ -n "$MY_FILES" ]; then echo "$MY_FILES/mbench-$TAG-$1.tsv"; else echo "$work/$1.tsv"; fi; }

# my_export DB FILE: the table to FILE, in LOAD DATA's default format.
my_export() {
  rm -f "$2"
  if [ -n "$MY_FILES" ]; then
    my "$1" -e "SELECT * FROM $TABLE INTO OUTFILE '$2'"
  else
    # --raw: no escaping by the client; the seeded values have no tab, newline or backslash.
    my "$1" --quick --raw -e "SELECT id, ext_id, title, body, amount, status, created_at, updated_at,
      IFNULL(note, '\\\\N'), active FROM $TABLE" >"$2"
  fi
}
# my_load DB FILE: FILE into the (empty) table of DB.
my_load() {
  if [ -n "$MY_FILES" ]; then
    my "$1" -e "LOAD DATA INFILE '$2' INTO TABLE $TABLE"
  else
    my "$1" --local-infile=1 -e "LOAD DATA LOCAL INFILE '$2' INTO TABLE $TABLE"
  fi
}

# ---------------------------------------------------------------- baselines

# check_loaded ENGINE: after a baseline load (untimed), mbench_dst has the
# source's rows and NULLs.
check_loaded() {
  local q="SELECT count(*), count(note) FROM $TABLE" a b
  if [ "$1" = pg ]; then a=$(pg mbench_src -F " " -c "$q"); b=$(pg mbench_dst -F " " -c "$q")
  else a=$(my mbench_src -e "$q"); b=$(my mbench_dst -e "$q"); fi
  a=${a//$'\t'/ }; b=${b//$'\t'/ }
  [ "$a" = "$b" ] || die "the $1 baseline loaded ($b) rows, non-NULL notes; the source has ($a)"
}

# base_pg_pipe FORMAT: PostgreSQL to PostgreSQL through psql's COPY, in FORMAT.
base_pg_pipe() {
  fresh_pg mbench_dst
  pg_ddl | pg mbench_dst
  copy_pipe() {
    pg mbench_src -c "COPY $TABLE TO STDOUT (FORMAT $1)" | pg mbench_dst -c "COPY $TABLE FROM STDIN (FORMAT $1)"
  }
  timed "pg-pg.copy-$1" copy_pipe "$1"
  check_loaded pg
}

# base_my_my: INTO OUTFILE then LOAD DATA INFILE, timed apart and together.
base_my_my() {
  local f; f=$(my_file export)
  fresh_my mbench_dst
  my_ddl | my mbench_dst
  local t0 t1 t2
  t0=$(now); my_export mbench_src "$f"
  t1=$(now); my_load mbench_dst "$f"
  t2=$(now)
  rm -f "$f"
  check_loaded my
  record my-my.export "$(elapsed "$t0" "$t1")"
  record my-my.load "$(elapsed "$t1" "$t2")"
  record my-my.outfile-load "$(elapsed "$t0" "$t2")"
  log "  my-my.outfile-load: $(elapsed "$t0" "$t2") s (export $(elapsed "$t0" "$t1") + load $(elapsed "$t1" "$t2"))"
}

# base_read ENGINE: the whole source table read by the client, to /dev/null.
base_read() {
  read_pg() { pg mbench_src -c "COPY $TABLE TO STDOUT" >/dev/null; }
  read_my() { my mbench_src --quick -e "SELECT * FROM $TABLE" >/dev/null; }
  if [ "$1" = pg ]; then timed pg.read read_pg; else timed my.read read_my; fi
}

# base_load ENGINE: the bulk load of a file made beforehand into a fresh table.
base_load() {
  if [ "$1" = pg ]; then
    fresh_pg mbench_dst; pg_ddl | pg mbench_dst
    load_pg() { pg mbench_dst -c "COPY $TABLE FROM STDIN" <"$work/pg.copy"; }
    timed pg.load load_pg
    check_loaded pg
  else
    fresh_my mbench_dst; my_ddl | my mbench_dst
    timed my.load my_load mbench_dst "$(my_file load)"
    check_loaded my
  fi
}

# hash_both ENGINE: both tables hashed whole in their own databases at once.
hash_both() {
  hash_table() {
    if [ "$1" = pg ]; then pg "$2" -c "SELECT sum(hashtextextended(t::text, 0)) FROM $TABLE t" >/dev/null
    else my "$2" -e "CHECKSUM TABLE $TABLE" >/dev/null; fi
  }
  both() { hash_table "$1" mbench_src & local p=$!; hash_table "$1" mbench_dst; wait "$p"; }
  timed "$1-$1.hash-both" both "$1"
}

# ---------------------------------------------------------------- migrate

src_dsn() { if [ "$1" = pg ]; then pg_dsn "${2:-mbench_src}"; else my_dsn mbench_src; fi; }
dst_dsn() { if [ "$1" = pg ]; then pg_dsn mbench_dst; else my_dsn mbench_dst; fi; }

# json_int FIELD FILE: the first integer FIELD of a JSON document.
json_int() { grep -o "\"$1\": *[0-9]*" "$2" | head -n1 | grep -o '[0-9]*$' || true; }

del_plan_keys() {
  redis-cli -u "$REDIS_URL" --scan --pattern "migrate:{$1:*" | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null
}

# migrate_run KEY NAME S D [SRC_DB [ROWS]]: one `migrate run` of plan NAME from engine S
# to engine D (source database SRC_DB, default mbench_src, of ROWS rows), timed,
# with its peak RSS; the result is in $work/NAME.json.
migrate_run() {
  local key=$1 name=$2 s=$3 d=$4 out=$work/$2.json rss=$work/$2.rss rc=0 t0 t1 rows
  t0=$(now)
  MIGRATE_SOURCE=$(src_dsn "$s" "${5:-}") MIGRATE_TARGET=$(dst_dsn "$d") MIGRATE_REDIS=$REDIS_URL \
    /usr/bin/time -f %M -o "$rss" "$work/migrate" run --no-progress --json --no-verify \
    --name "$name" --table "$TABLE" --key id >"$out" 2>"$work/$name.log" || rc=$?
  t1=$(now)
  if [ "$rc" -ne 0 ]; then
    fail "$key" "migrate run exit $rc: $(grep -o '"error": *"[^"]*"' "$out" || tail -n1 "$work/$name.log")"
    return 1
  fi
  rows=$(json_int rows_written "$out")
  if [ "$rows" != "${6:-$ROWS}" ]; then fail "$key" "wrote $rows rows, not ${6:-$ROWS}"; return 1; fi
  record "$key" "$(elapsed "$t0" "$t1")" "$(tail -n1 "$rss")"
  log "  $key: $(elapsed "$t0" "$t1") s, peak RSS $(( $(tail -n1 "$rss") / 1024 )) MB, token $(json_int token "$out"), replayed $(json_int replayed_rows "$out")"
}

# tool S D: copy S->D into a fresh database, then replay it and verify it.
tool() {
  local s=$1 d=$2 dir="$1-$2" name="mbench-$TAG-$1$2-$run"
  if [ "$d" = pg ]; then fresh_pg mbench_dst; else fresh_my mbench_dst; fi
  del_plan_keys "$name"
  migrate_run "$dir.run" "$name" "$s" "$d" || return 0

  if want_extra replay; then
    # A new plan whose token counter starts at the first plan's: its token is
    # higher, so it rewrites every row the first one wrote.
    local key replay=$name-replay
    del_plan_keys "$replay"
    for key in $(redis-cli -u "$REDIS_URL" --scan --pattern "migrate:{$name:*:token"); do
      redis-cli -u "$REDIS_URL" set "migrate:{$replay:${key#"migrate:{$name:"}" \
        "$(redis-cli -u "$REDIS_URL" get "$key")" >/dev/null
    done
    pg "$PG_ADMIN_DB" -c "CHECKPOINT"
    migrate_run "$dir.replay" "$replay" "$s" "$d" || true
    del_plan_keys "$replay"
  fi

  if [ "$s" = "$d" ] && want_extra verify; then
    hash_both "$s"
    verify_copy() {
      MIGRATE_SOURCE=$(src_dsn "$s") MIGRATE_TARGET=$(dst_dsn "$d") MIGRATE_REDIS=$REDIS_URL \
        "$work/migrate" verify --no-progress --json --name "$name" --table "$TABLE" --key id >"$work/$name.verify.json" 2>&1
    }
    local t0 t1 rc=0
    t0=$(now); verify_copy || rc=$?; t1=$(now)
    if [ "$rc" -eq 0 ]; then
      record "$dir.verify" "$(elapsed "$t0" "$t1")"
      log "  $dir.verify: $(elapsed "$t0" "$t1") s"
    else
      fail "$dir.verify" "migrate verify exit $rc (3: differences): $(tail -c 300 "$work/$name.verify.json")"
    fi
  fi
  del_plan_keys "$name"
}

# ---------------------------------------------------------------- pgloader

PGLOADER_OK=1
# pgloader_load S: pgloader from engine S into a fresh PostgreSQL database.
# Its own defaults (4 workers, batches of 25,000 rows), but a 4 GiB Lisp heap:
# with the default 1 GiB it dies of "Heap exhausted" on this table in about
# half the runs (pgloader issue #962).
pgloader_load() {
  local s=$1 key="$1-pg.pgloader" cmd=$work/pgloader-$1.load rc=0 t0 t1 n
  if [ -z "$PGLOADER_OK" ] || failed "$key"; then return 0; fi   # it failed before: once is enough
  if ! command -v pgloader >/dev/null 2>&1; then
    need_pkg pgloader pgloader || { fail "$key" "pgloader could not be installed"; PGLOADER_OK=; return 0; }
  fi
  fresh_pg mbench_dst
  (
    umask 077
    if [ "$s" = pg ]; then
      printf "LOAD DATABASE\n  FROM pgsql://%s:%s@%s/mbench_src\n  INTO pgsql://%s:%s@%s/mbench_dst\n  INCLUDING ONLY TABLE NAMES MATCHING '%s' IN SCHEMA 'public';\n" \
        "$PG_USER" "$PGPASSWORD" "$PG_HOSTPORT" "$PG_USER" "$PGPASSWORD" "$PG_HOSTPORT" "$TABLE"
    else
      printf "LOAD DATABASE\n  FROM mysql://%s:%s@%s/mbench_src\n  INTO pgsql://%s:%s@%s/mbench_dst\n  INCLUDING ONLY TABLE NAMES MATCHING '%s'\n  ALTER SCHEMA 'mbench_src' RENAME TO 'public';\n" \
        "$MY_USER" "$MYSQL_PWD" "$MY_HOSTPORT" "$PG_USER" "$PGPASSWORD" "$PG_HOSTPORT" "$TABLE"
    fi >"$cmd"
  )
  t0=$(now)
  (cd "$work" && /usr/bin/time -f %M -o "$work/pgloader.rss" pgloader --dynamic-space-size 4096 --root-dir "$work/pgloader" "$cmd") \
    >"$work/pgloader-$s.log" 2>&1 || rc=$?
  t1=$(now)
  n=$(pg mbench_dst -c "SELECT count(*) FROM public.$TABLE" 2>/dev/null || echo 0)
  if [ "$rc" -ne 0 ] || [ "$n" != "$ROWS" ]; then
    fail "$key" "pgloader exit $rc, $n rows in the target: $(grep -m1 -E 'ERROR|FATAL' "$work/pgloader-$s.log" | cut -c1-200)"
    return 0
  fi
  record "$key" "$(elapsed "$t0" "$t1")" "$(tail -n1 "$work/pgloader.rss")"
  log "  $key: $(elapsed "$t0" "$t1") s"
}

# ---------------------------------------------------------------- fleet

# redis_calls FILE: "command calls" for every command the Redis server has
# run since it started (INFO commandstats), into FILE.
redis_calls() {
  redis-cli -u "$REDIS_URL" info commandstats | tr -d '\r' |
    awk -F: '/^cmdstat_/ { n = $2; sub(/^calls=/, "", n); sub(/,.*/, "", n); print substr($1, 9), n }' >"$1"
}
# redis_delta BEFORE AFTER: "command calls" made between the two, INFO left
# out, most called first.
redis_delta() {
  awk 'NR == FNR { b[$1] = $2; next } $1 != "info" && $2 - b[$1] > 0 { print $1, $2 - b[$1] }' "$1" "$2" |
    sort -k2,2nr -k1,1
}

# fleet_cell S N: N instances of `migrate run` of one plan with S shards,
# started at once; the wall time until the last exits, each one's
# rows_written and the Redis commands meanwhile, in $work/fleet.tsv:
# S <tab> N <tab> RUN <tab> SECONDS <tab> REDIS_COMMANDS <tab> ROWS+ROWS+… <tab> COPY_SECONDS
fleet_cell() {
  local s=$1 n=$2 key="fleet.s$1.i$2" name="mbench-$TAG-fleet-s$1-i$2-$run"
  local plan=$work/$name.yaml src dst i rc t0 t1 wall cnt ops bad='' pids=() rcs=() rows=()
  fresh_pg mbench_dst
  del_plan_keys "$name"
  # The DSNs come from the environment (${…} expansion), not the file or argv.
  cat >"$plan" <<YAML
name: $name
source: \${MBENCH_SOURCE}
target: \${MBENCH_TARGET}
redis: \${MBENCH_REDIS}
lease_ttl: $FLEET_TTL
batch_size: 1000
tables:
  - name: $TABLE
    key: [id]
    shards: $s
YAML
  src=$(pg_dsn mbench_src) dst=$(pg_dsn mbench_dst)
  redis_calls "$work/$name.redis-before"
  t0=$(now)
  for i in $(seq "$n"); do
    MBENCH_SOURCE=$src MBENCH_TARGET=$dst MBENCH_REDIS=$REDIS_URL \
      "$work/migrate" run -p "$plan" --instance "fleet-$i" --parallel $(((s + n - 1) / n)) --no-progress --json --no-verify \
      >"$work/$name.$i.json" 2>"$work/$name.$i.log" &
    pids+=("$!")
  done
  for i in "${!pids[@]}"; do rc=0; wait "${pids[$i]}" || rc=$?; rcs+=("$rc"); done
  t1=$(now)
  redis_calls "$work/$name.redis-after"
  wall=$(elapsed "$t0" "$t1")
  for i in $(seq "$n"); do
    rc=${rcs[i - 1]}
    if [ "$rc" -ne 0 ] && [ -z "$bad" ]; then
      bad="instance fleet-$i exit $rc: $(grep -o '"error": *"[^"]*"' "$work/$name.$i.json" || tail -n1 "$work/$name.$i.log")"
    fi
    rc=$(json_int rows_written "$work/$name.$i.json")
    rows+=("${rc:-?}")
  done
  del_plan_keys "$name"
  if [ -n "$bad" ]; then fail "$key" "$bad"; return 0; fi
  cnt=$(pg mbench_dst -c "SELECT count(*) FROM $TABLE")
  if [ "$cnt" != "$ROWS" ]; then fail "$key" "the target has $cnt rows, not $ROWS"; return 0; fi
  local copy
  copy=$(elapsed "$t0" "$(pg mbench_dst -c "SELECT extract(epoch FROM max(updated_at)) FROM _migrate_checkpoint WHERE plan = '$name'")")
  redis_delta "$work/$name.redis-before" "$work/$name.redis-after" >"$work/$key.$run.redis"
  ops=$(awk '{ s += $2 } END { print s + 0 }' "$work/$key.$run.redis")
  record "$key" "$wall"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$n" "$run" "$wall" "$ops" "$(IFS=+; echo "${rows[*]}")" "$copy" >>"$work/fleet.tsv"
  log "  $key: copy $copy s, wall $wall s, rows per instance ${rows[*]}, $ops Redis commands ($(awk -v o="$ops" -v w="$wall" 'BEGIN { printf "%.1f", o / w }')/s)"
}

# fleet_cells: every cell of BENCH_FLEET_SHARDS x BENCH_FLEET_INSTANCES, once.
fleet_cells() {
  local s n
  for s in $FLEET_SHARDS; do
    for n in $FLEET_INSTANCES; do
      log "fleet: $s shard(s), $n instance(s)"
      fleet_cell "$s" "$n"
    done
  done
}

# fleet_report: the fleet's Markdown table, then the Redis commands of the
# largest cell (most shards x instances) one by one.
fleet_report() {
  local s n big='' best=0 reason
  echo
  echo "### fleet: PG->PG, N instances of \`migrate run -p PLAN --parallel ceil(S/N)\` started at once"
  echo
  echo "$ROWS rows; plan: shards S, lease_ttl $FLEET_TTL, batch_size 1000; each instance --no-progress --json --no-verify."
  if [ "$RUNS" -eq 1 ]; then
    echo "One run per cell (BENCH_RUNS=1): wall s and redis ops/s are that run's."
  else
    echo "Medians over $RUNS runs of copy s, wall s and redis ops/s; rows/s = rows / median copy s; rows per instance: each run's, runs separated by \" / \"."
  fi
  echo "Redis ops: INFO commandstats after minus before the cell, INFO left out, server-wide (other clients of this Redis meanwhile count too)."
  echo
  echo "Copy s: from the first start to the last shard done; wall s: to the last exit."
  echo
  echo "| shards | instances | copy s | wall s | rows/s | rows per instance | redis ops/s | redis ops/s per instance |"
  echo "|---:|---:|---:|---:|---:|---|---:|---:|"
  for s in $FLEET_SHARDS; do
    for n in $FLEET_INSTANCES; do
      if ! { [ -f "$work/fleet.tsv" ] && awk -F'\t' -v s="$s" -v n="$n" '$1 == s && $2 == n { f = 1 } END { exit !f }' "$work/fleet.tsv"; }; then
        reason=$( (grep "^fleet\.s$s\.i$n	" "$work/failed.tsv" 2>/dev/null || true) | head -n1 | cut -f2 | cut -c1-100)
        reason=${reason:-not run}
        printf '| %s | %s | n/a | n/a | n/a | %s | n/a | n/a |\n' "$s" "$n" "${reason//|//}"
        continue
      fi
      if [ $((s * n)) -ge "$best" ]; then best=$((s * n)) big="$s $n"; fi
      awk -F'\t' -v s="$s" -v n="$n" -v rows="$ROWS" '
        function median(a, k,   i, j, t) {
          for (i = 1; i < k; i++) for (j = i; j > 0 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
          return (k % 2) ? a[int(k/2)] : (a[k/2-1] + a[k/2]) / 2
        }
        BEGIN { k = 0 }
        $1 == s && $2 == n { w[k] = $4 + 0; c[k] = $7 + 0; o[k] = ($4 > 0 ? $5 / $4 : 0); split_rows = split_rows (k ? " / " : "") $6; k++ }
        END {
          mw = median(w, k); mc = median(c, k); mo = median(o, k)
          printf "| %s | %s | %.2f | %.2f | %.0f | %s | %.1f | %.1f |\n", s, n, mc, mw, (mc > 0 ? rows / mc : 0), split_rows, mo, mo / n
        }' "$work/fleet.tsv"
    done
  done
  [ -n "$big" ] || return 0
  s=${big% *} n=${big#* }
  local wall k
  read -r wall k < <(awk -F'\t' -v s="$s" -v n="$n" '$1 == s && $2 == n { w += $4; k++ } END { print w + 0, k + 0 }' "$work/fleet.tsv")
  echo
  echo "Redis commands of the largest cell ($s shards, $n instances), summed over its $k run(s) ($wall s of wall time):"
  echo
  echo "| command | calls | calls/s | calls/s per instance |"
  echo "|---|---:|---:|---:|"
  cat "$work/fleet.s$s.i$n".*.redis | awk -v w="$wall" -v n="$n" '
    { c[$1] += $2; t += $2 }
    END {
      for (k in c) printf "| %s | %d | %.1f | %.2f |\n", k, c[k], c[k] / w, c[k] / w / n | "sort -t\"|\" -k3,3nr"
      close("sort -t\"|\" -k3,3nr")
      printf "| total | %d | %.1f | %.2f |\n", t, t / w, t / w / n
    }'
}

# ---------------------------------------------------------------- the report

# stats KEY: "median max_rss_kb values…" of KEY over the runs (empty when none).
stats() {
  awk -F'\t' -v k="$1" '
    $1 == k { v[n++] = $3; if ($4 != "-" && $4 + 0 > rss) rss = $4 + 0; all = all " " $3 }
    END {
      if (n == 0) exit
      for (i = 1; i < n; i++) for (j = i; j > 0 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
      m = (n % 2) ? v[int(n/2)] : (v[n/2-1] + v[n/2]) / 2
      printf "%.3f %d%s\n", m, rss, all
    }' "$work/results.tsv" 2>/dev/null
}
median() { local s; s=$(stats "$1"); echo "${s%% *}"; }

# row KEY LABEL BYTES: one line of the table.
row() {
  local key=$1 label=$2 bytes=$3 s reason
  s=$(stats "$key")
  if [ -z "$s" ]; then
    reason=$( (grep "^$key	" "$work/failed.tsv" 2>/dev/null || true) | head -n1 | cut -f2 | cut -c1-70)
    printf '%-44s %9s  %s\n' "$label" "n/a" "${reason:-not run}"
    return
  fi
  awk -v s="$s" -v n="$ROWS" -v b="$bytes" -v l="$label" 'BEGIN {
    split(s, f, " "); m = f[1]; rss = f[2]; runs = ""
    for (i = 3; i in f; i++) runs = runs sprintf(" %.1f", f[i])
    printf "%-44s %9.2f %10.0f %8.1f %9s  %s\n", l, m, (m > 0 ? n / m : 0), (m > 0 ? b / m / 1e6 : 0),
      (rss > 0 ? sprintf("%.1f MB", rss / 1024) : ""), runs
  }'
}

# goal LABEL VALUE OP TARGET: one goal line (VALUE empty: n/a).
goal() {
  local label=$1 v=$2 op=$3 target=$4
  if [ -z "$v" ]; then printf '%-52s %9s %8s  n/a\n' "$label" "n/a" "$op $target"; return; fi
  awk -v l="$label" -v v="$v" -v op="$op" -v t="$target" 'BEGIN {
    ok = (op == "<=") ? (v <= t) : (v >= t)
    printf "%-52s %9.2f %8s  %s\n", l, v, op " " t, (ok ? "MET" : "NOT MET")
  }'
}
ratio() { # ratio A B: A / B, empty when either is missing
  if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f", a / b }'; fi
}
maxof() { # maxof A B: the larger, empty when either is missing
  if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; fi
}
# max_rss_mb KEY...: the highest peak RSS of these measurements, in MB.
max_rss_mb() {
  local k s best=
  for k in "$@"; do
    s=$(stats "$k"); [ -n "$s" ] || continue
    s=${s#* }; s=${s%% *}
    best=$(awk -v a="${best:-0}" -v b="$s" 'BEGIN { printf "%.1f", (b / 1024 > a ? b / 1024 : a) }')
  done
  echo "$best"
}

report() {
  local pgb myb
  pgb=$(pg mbench_src -c "SELECT pg_table_size('$TABLE')")
  echo
  echo "migrate bench: $ROWS rows, $RUNS run(s), medians; $(date -u +%Y-%m-%dT%H:%MZ); bin/migrate built from $BUILD_REV"
  if [ -n "$FLEET_ALONE" ]; then   # no MariaDB seed
    awk -v p="$pgb" -v n="$ROWS" 'BEGIN { printf "source table: PostgreSQL %.1f MB (%.0f B/row)\n", p / 1e6, p / n }'
    echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo);" \
      "PostgreSQL $(pg mbench_src -c "SHOW server_version" | cut -d' ' -f1) fsync=$(pg mbench_src -c "SHOW fsync")" \
      "synchronous_commit=$(pg mbench_src -c "SHOW synchronous_commit"); Redis $(redis-cli -u "$REDIS_URL" info server | tr -d '\r' | sed -n 's/^redis_version://p')"
    fleet_report
    report_failed
    return
  fi
  myb=$(my -e "SELECT data_length FROM information_schema.tables WHERE table_schema = 'mbench_src' AND table_name = '$TABLE'")
  awk -v p="$pgb" -v m="$myb" -v n="$ROWS" 'BEGIN {
    printf "source tables: PostgreSQL %.1f MB (%.0f B/row), MariaDB %.1f MB (%.0f B/row)\n", p / 1e6, p / n, m / 1e6, m / n }'
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo);" \
    "PostgreSQL $(pg mbench_src -c "SHOW server_version" | cut -d' ' -f1) fsync=$(pg mbench_src -c "SHOW fsync")" \
    "synchronous_commit=$(pg mbench_src -c "SHOW synchronous_commit");" \
    "MariaDB $(my -e "SELECT VERSION()" | cut -d- -f1) innodb_flush_log_at_trx_commit=$(my -e "SELECT @@innodb_flush_log_at_trx_commit")"
  echo "MariaDB bulk files: $MY_FILE_MODE"
  echo
  printf '%-44s %9s %10s %8s %9s  %s\n' what "median s" "rows/s" "MB/s" "peak RSS" "runs (s)"
  local d s
  for d in "${DIRECTIONS[@]}"; do
    want_dir "$d" || continue
    s=${d%-*}
    local b=$pgb
    if [ "$s" = my ]; then b=$myb; fi
    case $d in
      pg-pg)
        row pg-pg.copy-binary "PG->PG  raw COPY pipe, binary" "$b"
        row pg-pg.copy-text "PG->PG  raw COPY pipe, text" "$b" ;;
      my-my)
        row my-my.outfile-load "MY->MY  $MY_BULK" "$b"
        row my-my.export "MY->MY    of which the export" "$b"
        row my-my.load "MY->MY    of which LOAD DATA" "$b" ;;
      pg-my)
        row pg.read "PG->MY  raw read of the source" "$b"
        row my.load "PG->MY  raw bulk load of the target" "$b" ;;
      my-pg)
        row my.read "MY->PG  raw read of the source" "$b"
        row pg.load "MY->PG  raw bulk load of the target" "$b" ;;
    esac
    local L=${d^^}; L=${L/-/->}   # pg-my: PG->MY
    row "$d.run" "$L  migrate run" "$b"
    if want_extra replay; then row "$d.replay" "$L  migrate run, full replay" "$b"; fi
    if [ "$d" = pg-pg ] || [ "$d" = my-my ]; then
      if want_extra verify; then
        row "$d.hash-both" "$L  hash both tables at once" "$b"
        row "$d.verify" "$L  migrate verify" "$b"
      fi
    fi
    if [ "$d" = pg-pg ] || [ "$d" = my-pg ]; then
      if want_extra pgloader; then row "$d.pgloader" "$L  pgloader" "$b"; fi
    fi
  done
  if [ -n "$SCALE_ROWS" ] && want_dir pg-pg && want_extra scale; then
    local scale_b; scale_b=$(pg mbench_scale -c "SELECT pg_table_size('$TABLE')" 2>/dev/null || echo 0)
    ROWS=$SCALE_ROWS row pg-pg.scale.run "PG->PG  migrate run, $SCALE_ROWS rows (once)" "$scale_b"
  fi

  echo
  printf '%-52s %9s %8s  %s\n' "goal (issue 6)" ratio target verdict
  local pipe
  if want_dir pg-pg; then
    goal "PG->PG run / binary COPY pipe" "$(ratio "$(median pg-pg.run)" "$(median pg-pg.copy-binary)")" "<=" 1.5
  fi
  if want_dir my-my; then
    goal "MY->MY run / $MY_BULK" "$(ratio "$(median my-my.run)" "$(median my-my.outfile-load)")" "<=" 1.2
  fi
  if want_dir pg-my; then
    pipe=$(maxof "$(median pg.read)" "$(median my.load)")
    goal "PG->MY run / slower of raw read, raw load" "$(ratio "$(median pg-my.run)" "$pipe")" "<=" 1.3
  fi
  if want_dir my-pg; then
    pipe=$(maxof "$(median my.read)" "$(median pg.load)")
    goal "MY->PG run / slower of raw read, raw load" "$(ratio "$(median my-pg.run)" "$pipe")" "<=" 1.3
  fi
  if want_extra replay; then
    for d in "${DIRECTIONS[@]}"; do
      want_dir "$d" || continue
      goal "${d} full replay / first copy" "$(ratio "$(median "$d.replay")" "$(median "$d.run")")" "<=" 2
    done
  fi
  local keys=() k
  for d in "${DIRECTIONS[@]}"; do if want_dir "$d"; then keys+=("$d.run" "$d.replay"); fi; done
  goal "peak RSS of migrate run, $ROWS rows (MB)" "$(max_rss_mb "${keys[@]}")" "<=" 100
  if [ -n "$SCALE_ROWS" ] && want_dir pg-pg && want_extra scale; then
    goal "peak RSS of PG->PG run, $SCALE_ROWS rows (MB)" "$(max_rss_mb pg-pg.scale.run)" "<=" 100
  fi
  if want_extra pgloader; then
    for d in pg-pg my-pg; do
      want_dir "$d" || continue
      goal "$d pgloader / migrate run" "$(ratio "$(median "$d.pgloader")" "$(median "$d.run")")" ">=" 2
    done
  fi
  if want_extra verify; then
    for d in pg-pg my-my; do
      want_dir "$d" || continue
      goal "$d verify / hash both tables at once" "$(ratio "$(median "$d.verify")" "$(median "$d.hash-both")")" "<=" 1.5
    done
  fi
  if want_fleet; then fleet_report; fi
  report_failed
}
report_failed() {
  if [ -s "$work/failed.tsv" ]; then
    echo
    echo "failed or not measured:"
    sort -u "$work/failed.tsv" | awk -F'\t' '{ printf "  %s: %s\n", $1, substr($2, 1, 160) }'
  fi
}

# ---------------------------------------------------------------- setup and cleanup

durable_on() {
  MY_FLUSH_BEFORE=$(my -e "SELECT @@innodb_flush_log_at_trx_commit")
  log "BENCH_DURABLE: fsync, synchronous_commit, full_page_writes on; innodb_flush_log_at_trx_commit=1 (until the end)"
  pg "$PG_ADMIN_DB" -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = on" \
    -c "ALTER SYSTEM SET full_page_writes = on" -c "SELECT pg_reload_conf()" >/dev/null
  my -e "SET GLOBAL innodb_flush_log_at_trx_commit = 1"
  sleep 1 # the reload reaches every backend
}
durable_off() {
  pg "$PG_ADMIN_DB" -c "ALTER SYSTEM RESET fsync" -c "ALTER SYSTEM RESET synchronous_commit" \
    -c "ALTER SYSTEM RESET full_page_writes" -c "SELECT pg_reload_conf()" >/dev/null || true
  my -e "SET GLOBAL innodb_flush_log_at_trx_commit = ${MY_FLUSH_BEFORE:-2}" || true
}

cleanup() {
  local rc=$?
  set +e
  if [ -n "${PSQL:-}" ]; then
    log "cleaning up: target databases, plans' Redis keys, bulk files (sources kept)"
    pg "$PG_ADMIN_DB" -c "DROP DATABASE IF EXISTS mbench_dst WITH (FORCE)" >/dev/null 2>&1
    my -e "DROP DATABASE IF EXISTS mbench_dst" >/dev/null 2>&1
    redis-cli -u "$REDIS_URL" --scan --pattern "migrate:{mbench-$TAG-*" | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null 2>&1
    if [ -n "$MY_FILES" ]; then rm -f "$MY_FILES"/mbench-"$TAG"-*; fi
    if [ -n "$DURABLE" ]; then durable_off; fi
  fi
  rm -rf "$work"
  exit "$rc"
}

main() {
  parse_only
  [ "$ROWS" -ge 1000 ] 2>/dev/null || die "BENCH_ROWS must be a number >= 1000"
  [ "$RUNS" -ge 1 ] 2>/dev/null || die "BENCH_RUNS must be a number >= 1"
  if want_fleet; then
    local x
    FLEET_SHARDS=${FLEET_SHARDS//,/ } FLEET_INSTANCES=${FLEET_INSTANCES//,/ }
    for x in $FLEET_SHARDS; do [ "$x" -ge 1 ] 2>/dev/null || die "BENCH_FLEET_SHARDS: '$x' is not a number >= 1"; done
    for x in $FLEET_INSTANCES; do [ "$x" -ge 1 ] 2>/dev/null || die "BENCH_FLEET_INSTANCES: '$x' is not a number >= 1"; done
    if [ -z "${FLEET_SHARDS// /}" ] || [ -z "${FLEET_INSTANCES// /}" ]; then
      die "BENCH_FLEET_SHARDS and BENCH_FLEET_INSTANCES must not be empty"
    fi
  fi
  work=$(mktemp -d /tmp/mbench.XXXXXX)
  trap cleanup EXIT
  : >"$work/results.tsv"
  local t_start; t_start=$(now)

  need_pkg /usr/bin/time time
  log "starting the services"
  connect
  log "building bin/migrate"
  mkdir -p bin
  go build -o bin/migrate ./cmd/migrate
  # The bench runs its own copy: a rebuild of bin/migrate meanwhile (demo.sh, drills.sh)
  # does not swap binaries in the middle of it.
  cp bin/migrate "$work/migrate"
  BUILD_REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  if git status --porcelain -- '*.go' go.mod go.sum 2>/dev/null | grep -q .; then BUILD_REV="$BUILD_REV + uncommitted Go changes"; fi
  if [ -n "$DURABLE" ]; then durable_on; fi

  seed_pg mbench_src "$ROWS"
  if [ -z "$FLEET_ALONE" ]; then
    seed_my mbench_src "$ROWS"
    same_data
    my_file_setup
    # Files made beforehand for the raw bulk loads.
    log "writing the bulk-load files"
    pg mbench_src -c "COPY $TABLE TO STDOUT" >"$work/pg.copy"
    my_export mbench_src "$(my_file load)"
  fi

  for run in $(seq "$RUNS"); do
    log "run $run of $RUNS"
    if want_dir pg-pg; then
      base_pg_pipe binary
      base_pg_pipe text
      tool pg pg
      if want_extra pgloader; then pgloader_load pg; fi
    fi
    if want_dir my-my; then
      base_my_my
      tool my my
    fi
    if want_dir pg-my; then
      base_read pg
      base_load my
      tool pg my
    fi
    if want_dir my-pg; then
      base_read my
      base_load pg
      tool my pg
      if want_extra pgloader; then pgloader_load my; fi
    fi
    if want_fleet; then fleet_cells; fi
  done

  if [ -n "$SCALE_ROWS" ] && want_dir pg-pg && want_extra scale; then
    run=1
    seed_pg mbench_scale "$SCALE_ROWS"
    log "PG->PG at $SCALE_ROWS rows, once, for its peak RSS"
    fresh_pg mbench_dst
    local name="mbench-$TAG-scale"
    del_plan_keys "$name"
    migrate_run pg-pg.scale.run "$name" pg pg mbench_scale "$SCALE_ROWS" || true
    del_plan_keys "$name"
  fi

  report
  log "done in $(awk -v s="$(elapsed "$t_start" "$(now)")" 'BEGIN { printf "%d min %02d s", s / 60, s % 60 }')"
  [ ! -s "$work/failed.tsv" ] || ! grep -qv '\.pgloader	' "$work/failed.tsv"
}

main "$@"
