#!/usr/bin/env bash
# The test command: start private PostgreSQL, MariaDB, Redis, etcd and ZooKeeper (installing
# what is missing), check formatting and vet, run staticcheck, run every test
# against the real services.
set -euo pipefail
cd "$(dirname "$0")/.."

eval "$(scripts/services.sh start)"
export MIGRATE_TEST_PG MIGRATE_TEST_MYSQL MIGRATE_TEST_REDIS MIGRATE_TEST_ETCD MIGRATE_TEST_ZK

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
echo "== go test"
# -timeout is a guard against a hang, not a budget: cmd/migrate's end-to-end
# tests take 9–11 minutes on two idle cores and more than 15 beside a
# CPU-bound process.
go test -race -count=1 -timeout 40m "$@" ./...
