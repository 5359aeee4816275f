# Infinity: common tasks. `make help` lists them.

CARGO ?= cargo
MESSAGE ?= Plan the launch party

.PHONY: help demo test fmt-check lint unit build bench clean

help:
	@echo "make demo    run the offline demo agent on the embedded runtime"
	@echo "make test    everything CI runs: fmt check, clippy -D warnings, all tests incl. doc tests"
	@echo "make build   build the workspace (debug)"
	@echo "make bench   run the core benchmarks (see docs/benchmarks.md)"

demo:
	$(CARGO) run -q -p infinity-cli -- run --agent examples/demo/agent.yaml "$(MESSAGE)"

test: fmt-check lint unit

fmt-check:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --workspace

build:
	$(CARGO) build --workspace

bench:
	$(CARGO) bench -p infinity-agent-core --bench slice

clean:
	$(CARGO) clean
