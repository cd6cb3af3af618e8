#!/usr/bin/env bash
# The throughput benchmark of issue 6: `migrate run` against the raw tools of
# each engine, in the same run, on the same data. The measuring and the
# report are Go (cmd/bench, internal/bench); this script starts the local
# services (scripts/services.sh) and runs it.
#
#   make bench                                   (or scripts/bench.sh)
#   BENCH_ROWS=100000 BENCH_RUNS=1 make bench    a quick one
#   BENCH_ONLY=pg-pg,verify make bench           some of it
#   BENCH_SCALE_ROWS=10000000 make bench         also the peak RSS of PG->PG at 10M rows
#   BENCH_ONLY=fleet make bench                  only the fleet table (BENCH_FLEET=1: also)
#   BENCH_ONLY=stream make bench                 only the change stream: migrate's applier against
#                                                PostgreSQL's CREATE SUBSCRIPTION on the same backlog
#   scripts/bench.sh -h                          every knob (BENCH_* or a flag)
#
# Arguments go to cmd/bench as flags. The report goes to stdout, progress to
# stderr; exit 1 when a measurement failed (pgloader aside), 2 for an invalid
# knob. MIGRATE_SVC_DIR, MIGRATE_PG_PORT, MIGRATE_MYSQL_PORT and
# MIGRATE_REDIS_PORT choose another set of services. Run as root (like
# services.sh: it, and the bench for pgloader, may install packages with apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "$(date +%H:%M:%S) bench: starting the services" >&2
eval "$(scripts/services.sh start)"
bin=$(mktemp -d /tmp/bench-cmd.XXXXXX)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/bench" ./cmd/bench
"$bin/bench" "$@"
