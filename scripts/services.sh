#!/usr/bin/env bash
# Private PostgreSQL, MariaDB, Redis, etcd and ZooKeeper servers for development, tests
# and the demo.
#
#   scripts/services.sh start [all|pg|mysql|redis|etcd|zk|chromium]
#                                install what is missing (apt-get), start the servers, print their URLs
#                                (chromium: only installed, for the status page's browser test)
#   scripts/services.sh stop     stop the servers started here (by PID)
#   scripts/services.sh status   say which are running
#   scripts/services.sh env      print the URLs as shell exports (servers must be running)
#
# Every server listens on 127.0.0.1 only, on a non-default port, with its data
# under $MIGRATE_SVC_DIR (default /tmp/migrate-services). Starting is idempotent
# and safe to run from several processes at once (flock).
set -euo pipefail

DIR=${MIGRATE_SVC_DIR:-/tmp/migrate-services}
PG_PORT=${MIGRATE_PG_PORT:-25432}
MY_PORT=${MIGRATE_MYSQL_PORT:-23306}
REDIS_PORT=${MIGRATE_REDIS_PORT:-26379}
ETCD_PORT=${MIGRATE_ETCD_PORT:-22379}     # and the next port for its peers
ZK_PORT=${MIGRATE_ZK_PORT:-22181}
# Local throwaway credentials for private test servers; not secrets of any real system.
PG_USER=migrate PG_PASS=pg-local-pw
MY_USER=migrate MY_PASS=my-local-pw

log() { echo "services: $*" >&2; }

pg_url()    { echo "postgres://$PG_USER:$PG_PASS@127.0.0.1:$PG_PORT/migrate?sslmode=disable"; }
my_url()    { echo "mysql://$MY_USER:$MY_PASS@127.0.0.1:$MY_PORT/migrate"; }
redis_url() { echo "redis://127.0.0.1:$REDIS_PORT/0"; }
etcd_url()  { echo "etcd://127.0.0.1:$ETCD_PORT/migrate"; }
zk_url()    { echo "zk://127.0.0.1:$ZK_PORT/migrate"; }

print_env() {
  echo "export MIGRATE_TEST_PG='$(pg_url)'"
  echo "export MIGRATE_TEST_MYSQL='$(my_url)'"
  echo "export MIGRATE_TEST_REDIS='$(redis_url)'"
  echo "export MIGRATE_TEST_ETCD='$(etcd_url)'"
  echo "export MIGRATE_TEST_ZK='$(zk_url)'"
}

# alive PIDFILE: the process runs. A zombie does not: a server SIGKILLed a
# moment ago stays one until init reaps it, and its pid file is stale.
alive() {
  [ -f "$1" ] || return 1
  local p; p=$(head -n1 "$1")
  kill -0 "$p" 2>/dev/null || return 1
  case "$(ps -o stat= -p "$p" 2>/dev/null)" in Z*|"") return 1 ;; esac
}

apt_updated=
need_pkg() { # need_pkg COMMAND PACKAGE...
  command -v "$1" >/dev/null 2>&1 && return 0
  [ -x "/usr/sbin/$1" ] && return 0
  case "$1" in /*) [ -e "$1" ] && return 0 ;; esac
  log "installing ${*:2} with apt-get"
  if [ -z "$apt_updated" ]; then apt-get update -qq >&2; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${@:2}" >&2
  # Debian's packages start their default service; we run our own instances only.
  command -v systemctl >/dev/null 2>&1 || true
}

pg_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    local v=${d#/usr/lib/postgresql/}; v=${v%%/*}
    if [ "${v%%.*}" -ge 15 ]; then echo "$d"; return 0; fi
  done
  return 1
}

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local n=$(( $1 * 10 )) what=$2; shift 2
  while ! "$@" >/dev/null 2>&1; do
    n=$((n - 1))
    if [ "$n" -le 0 ]; then log "$what did not become ready; see the logs in $DIR"; return 1; fi
    sleep 0.1
  done
}

start_pg() {
  local bin; bin=$(pg_bin) || { need_pkg psql postgresql; bin=$(pg_bin); }
  local data=$DIR/pg
  if alive "$data/postmaster.pid"; then return 0; fi
  if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data"; chown postgres:postgres "$data"; chmod 700 "$data"
    local pw; pw=$(mktemp); echo "$PG_PASS" >"$pw"; chown postgres "$pw"
    runuser -u postgres -- "$bin/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
      --encoding=UTF8 --locale=C.UTF-8 >"$DIR/pg-init.log" 2>&1 || { rm -f "$pw"; cat "$DIR/pg-init.log" >&2; return 1; }
    rm -f "$pw"
    cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$DIR/pgsock'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 256MB
CONF
  fi
  # Logical replication, for the change stream (migrate run --follow): a data
  # directory made before it gets it at its next start.
  if ! grep -q '^wal_level = logical' "$data/postgresql.conf"; then
    cat >>"$data/postgresql.conf" <<CONF
wal_level = logical
max_replication_slots = 64
max_wal_senders = 64
CONF
  fi
  mkdir -p "$DIR/pgsock"; touch "$DIR/pg.log"; chown postgres "$DIR/pg.log" "$DIR/pgsock"
  if ! runuser -u postgres -- "$bin/pg_ctl" -D "$data" -o "-p $PG_PORT" -l "$DIR/pg.log" -w -t 60 start >&2 9>&-; then
    log "PostgreSQL did not start on 127.0.0.1:$PG_PORT; the end of $DIR/pg.log:"
    tail -n 5 "$DIR/pg.log" >&2
    return 1
  fi
  runuser -u postgres -- "$bin/psql" -h "$DIR/pgsock" -p "$PG_PORT" -U postgres -d postgres -qtA -v ON_ERROR_STOP=1 >&2 <<SQL
SELECT 'CREATE ROLE $PG_USER LOGIN SUPERUSER PASSWORD ''$PG_PASS''' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_USER')\gexec
SELECT 'CREATE DATABASE migrate OWNER $PG_USER' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'migrate')\gexec
SQL
}

start_mysql() {
  need_pkg mariadbd mariadb-server mariadb-client
  local data=$DIR/mysql run=$DIR/mysqlrun
  local pid=$run/mysql.pid sock=$run/mysql.sock
  if alive "$pid"; then return 0; fi
  if [ ! -d "$data/mysql" ]; then
    mkdir -p "$data"; chown mysql:mysql "$data"
    mariadb-install-db --user=mysql --datadir="$data" --auth-root-authentication-method=normal \
      --skip-test-db >"$DIR/mysql-init.log" 2>&1 || { cat "$DIR/mysql-init.log" >&2; return 1; }
  fi
  # files: the one folder SELECT … INTO OUTFILE and LOAD DATA INFILE may use
  # (secure_file_priv; scripts/bench.sh's MySQL baselines).
  local files=$DIR/mysql-files
  mkdir -p "$run" "$files"; chown mysql "$run" "$files"; chmod 750 "$files"
  local mysqld; mysqld=$(command -v mariadbd || echo /usr/sbin/mariadbd)
  # The binlog (the change stream's tests read it) in files of 64 MB, each
  # purged two hours after its last write (validate --follow asks for an
  # hour's retention at least): a suite run writes most of a gigabyte of row
  # images, and a machine that keeps this folder must not hold every run's.
  # setsid: a session of its own, like the daemons PostgreSQL and Redis
  # become; in the caller's process group, a kill of that group (a CI step
  # or a shell job ended) would take the shared server down mid-suite.
  setsid "$mysqld" --no-defaults --user=mysql --datadir="$data" --port="$MY_PORT" --bind-address=127.0.0.1 \
    --socket="$sock" --pid-file="$pid" --log-error="$run/mysql.log" \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci --max-connections=300 \
    --innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-size=256M --max-allowed-packet=256M \
    --secure-file-priv="$files" --skip-name-resolve \
    --server-id=1 --log-bin=mysql-bin --binlog-format=ROW --binlog-row-image=FULL \
    --binlog-expire-logs-seconds=7200 --max-binlog-size=64M \
    >/dev/null 2>&1 9>&- &
  wait_for 60 MariaDB mariadb --no-defaults --socket="$sock" -uroot -e 'SELECT 1'
  mariadb --no-defaults --socket="$sock" -uroot >&2 <<SQL
CREATE USER IF NOT EXISTS '$MY_USER'@'127.0.0.1' IDENTIFIED BY '$MY_PASS';
GRANT ALL ON *.* TO '$MY_USER'@'127.0.0.1' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS migrate CHARACTER SET utf8mb4;
SQL
}

start_redis() {
  need_pkg redis-server redis-server
  local pid=$DIR/redis.pid
  if alive "$pid"; then return 0; fi
  mkdir -p "$DIR/redis"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --pidfile "$pid" \
    --dir "$DIR/redis" --logfile "$DIR/redis.log" --save "" --appendonly no >&2 9>&-
  wait_for 30 Redis redis-cli -p "$REDIS_PORT" ping
}

# zk_serving PORT: the ZooKeeper there serves requests (its srvr command
# names its mode). An open port is not enough: a session opened in the
# server's first moments may wait seconds for its handshake.
zk_serving() {
  # bounded: a server that takes the connection in its first moments may
  # never answer on it
  timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && printf srvr >&3 && grep -q "^Mode:" <&3' "$1" 2>/dev/null
}

# etcd_healthy PORT: the etcd there has a leader and answers.
etcd_healthy() {
  timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && printf "GET /health HTTP/1.0\r\n\r\n" >&3 && grep -q "\"health\":\"true\"" <&3' "$1" 2>/dev/null
}

start_etcd() {
  need_pkg etcd etcd-server
  local pid=$DIR/etcd.pid peer=$((ETCD_PORT + 1))
  if alive "$pid"; then return 0; fi
  mkdir -p "$DIR/etcd"
  # A short heartbeat and election timeout: a one-member cluster elects
  # itself at once, and leases may be as short as one second.
  setsid etcd --name migrate --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "migrate=http://127.0.0.1:$peer" --heartbeat-interval 50 --election-timeout 500 \
    >"$DIR/etcd.log" 2>&1 9>&- &
  echo $! >"$pid"
  wait_for 30 etcd etcd_healthy "$ETCD_PORT"
}

# zk_java: the java that runs Debian's ZooKeeper, with its classpath.
zk_java() { echo "java -cp /usr/share/java/zookeeper.jar:/etc/zookeeper/conf_example"; }

start_zk() {
  need_pkg /usr/share/java/zookeeper.jar zookeeper
  local pid=$DIR/zk.pid
  if alive "$pid"; then return 0; fi
  mkdir -p "$DIR/zk"
  # tickTime 100ms: sessions expire within a tenth of a second of their
  # timeout, which may be as short as 200ms and as long as two minutes.
  cat >"$DIR/zk.cfg" <<CONF
tickTime=100
dataDir=$DIR/zk
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxSessionTimeout=120000
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
CONF
  setsid $(zk_java) -Dzookeeper.log.dir="$DIR" org.apache.zookeeper.server.quorum.QuorumPeerMain "$DIR/zk.cfg" \
    >"$DIR/zk.log" 2>&1 9>&- &
  echo $! >"$pid"
  wait_for 60 ZooKeeper zk_serving "$ZK_PORT"
}

stop_all() {
  local bin
  if [ -f "$DIR/pg/postmaster.pid" ] && bin=$(pg_bin); then
    runuser -u postgres -- "$bin/pg_ctl" -D "$DIR/pg" -m fast -w stop >&2 || true
  fi
  local f
  for f in "$DIR/mysqlrun/mysql.pid" "$DIR/redis.pid" "$DIR/etcd.pid" "$DIR/zk.pid"; do
    if alive "$f"; then
      local p; p=$(head -n1 "$f"); kill "$p"
      for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    fi
  done
  log "stopped"
}

status() {
  local rc=0
  if alive "$DIR/pg/postmaster.pid"; then echo "postgres  running  $(pg_url | sed 's/:[^:@]*@/:xxxxx@/')"; else echo "postgres  stopped"; rc=1; fi
  if alive "$DIR/mysqlrun/mysql.pid"; then echo "mariadb   running  $(my_url | sed 's/:[^:@]*@/:xxxxx@/')"; else echo "mariadb   stopped"; rc=1; fi
  if alive "$DIR/redis.pid"; then echo "redis     running  $(redis_url)"; else echo "redis     stopped"; rc=1; fi
  if alive "$DIR/etcd.pid"; then echo "etcd      running  $(etcd_url)"; else echo "etcd      stopped"; rc=1; fi
  if alive "$DIR/zk.pid"; then echo "zookeeper running  $(zk_url)"; else echo "zookeeper stopped"; rc=1; fi
  return $rc
}

case "${1:-}" in
  start)
    mkdir -p "$DIR"; chmod 755 "$DIR"
    exec 9>"$DIR/.lock"; flock 9
    only=${2:-all}
    case "$only" in all|pg) start_pg ;; esac
    case "$only" in all|mysql) start_mysql ;; esac
    case "$only" in all|redis) start_redis ;; esac
    case "$only" in all|etcd) start_etcd ;; esac
    case "$only" in all|zk) start_zk ;; esac
    # A headless browser for the status page's test (cmd/migrate/e2e_statuspage_test.go).
    case "$only" in all|chromium) need_pkg chromium chromium ;; esac
    print_env
    ;;
  stop) mkdir -p "$DIR"; exec 9>"$DIR/.lock"; flock 9; stop_all ;;
  status) status ;;
  env) print_env ;;
  *) echo "usage: $0 start [all|pg|mysql|redis|etcd|zk|chromium] | stop | status | env" >&2; exit 2 ;;
esac
