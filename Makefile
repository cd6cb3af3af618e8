# Entry points. Each target is a script under scripts/ that installs what it
# needs (apt-get, as root) and starts the local services itself.

.PHONY: build test demo bench soak

build:
	go build -o bin/migrate ./cmd/migrate

test:
	scripts/test.sh

demo:
	scripts/demo.sh

# The throughput benchmark: cmd/bench (internal/bench) measures and reports;
# scripts/bench.sh starts the services and runs it. The report goes to stdout,
# progress to stderr. Knobs: BENCH_ROWS, BENCH_RUNS, BENCH_ONLY,
# BENCH_SCALE_ROWS, BENCH_DURABLE, BENCH_FLEET, BENCH_FLEET_SHARDS,
# BENCH_FLEET_INSTANCES, BENCH_FLEET_TTL, BENCH_STREAM_ROWS, BENCH_STREAM_CHANGES
# (each also a flag of cmd/bench:
# scripts/bench.sh -h describes them).
bench:
	scripts/bench.sh

# The random-fault soak (cmd/migrate/soak_test.go): SOAK (default 10m) of
# kills, pauses, partitions and Redis restarts on SOAK_ROWS (2,000,000) rows;
# the report goes to soak-report.md. FOLLOW=1 runs it under `run --follow`
# with an application writing to the source and a cutover per round
# (cmd/migrate/soak_follow_test.go). CI runs a 45s and a 30s version with
# the tests.
SOAK ?= 10m
SOAK_ROWS ?= 2000000
SOAK_TEST = $(if $(FOLLOW),TestSoakFollow,TestSoak)
soak:
	scripts/services.sh start >/dev/null
	MIGRATE_SOAK=$(SOAK) MIGRATE_SOAK_ROWS=$(SOAK_ROWS) MIGRATE_SOAK_REPORT=$(CURDIR)/soak-report.md \
		go test -count=1 -run '^$(SOAK_TEST)$$' -timeout 60m -v ./cmd/migrate/
