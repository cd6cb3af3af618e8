# Entry points. Each target is a script under scripts/ that installs what it
# needs (apt-get, as root) and starts the local services itself.

.PHONY: build test demo bench

build:
	go build -o bin/migrate ./cmd/migrate

test:
	scripts/test.sh

demo:
	scripts/demo.sh

# BENCH_ROWS, BENCH_RUNS, BENCH_ONLY, BENCH_SCALE_ROWS, BENCH_DURABLE, BENCH_FLEET,
# BENCH_FLEET_SHARDS, BENCH_FLEET_INSTANCES, BENCH_FLEET_TTL: see scripts/bench.sh.
bench:
	scripts/bench.sh
