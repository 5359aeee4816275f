# Infinity: common tasks. `make help` lists them.

CARGO ?= cargo
MESSAGE ?= Plan the launch party
AGENT ?= examples/demo/agent.yaml
VENV := .venv/bin
AWS_CHECK_ENV := AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test SAM_CLI_TELEMETRY=0
# The local emulator: moto (with DynamoDB Local) or localstack. `make local-up EMULATOR=localstack`.
EMULATOR ?= $(or $(INFINITY_EMULATOR),moto)
# A deployed stack's name, for `make smoke`.
STACK ?=

.PHONY: api-fuzz clients openapi package-check bench-aws bench-models help demo test fmt-check lint template-check tools browser unit unit-localstack build build-local bench deploy smoke local-up local-down clean

help:
	@echo "make demo        run the offline demo agent on the embedded runtime"
	@echo "make test        everything CI runs: fmt, clippy -D warnings, template checks, all tests (incl. doc tests and the local AWS stack, on moto + DynamoDB Local and again on LocalStack)"
	@echo "make build       cargo lambda build --release --arm64 (the Lambda binaries)"
	@echo "make deploy      sam build + sam deploy --guided (AGENT=path/to/agent.yaml)"
	@echo "make smoke       send a message through a deployed stack and wait for the reply (STACK=...)"
	@echo "make clients     the Python and TypeScript clients' tests, against a real infinity serve"
	@echo "make api-fuzz    Schemathesis against a real infinity serve: every answer held to the API's document"
	@echo "make openapi     write clients/openapi.json, the API's document, again from the code"
	@echo "make local-up    emulators + queues/table + the real handlers in the background (AGENT=..., EMULATOR=moto|localstack)"
	@echo "make local-down  stop all of it"
	@echo "make bench       core benchmarks (docs/benchmarks.md)"
	@echo "make bench-peer  the same workload on LangGraph and on Infinity, side by side (own venv, not in make test)"
	@echo "make bench-soak  200 conversations x 10 turns on LocalStack, a slow faulty model, infinity-local killed 10 times (SOAK_ARGS=--quick: minutes)"

# Offline with the scripted model, unless a model key is set: then the same agent on a real model.
demo:
	@model=""; \
	if [ -n "$$ANTHROPIC_API_KEY" ]; then model="--model anthropic:claude-sonnet-4-5"; \
	elif [ -n "$$OPENAI_API_KEY" ]; then model="--model openai:gpt-4.1"; fi; \
	$(CARGO) run -q -p infinity-cli -- run --agent examples/demo/agent.yaml $$model "$(MESSAGE)"

test: fmt-check lint package-check tools browser template-check unit clients api-fuzz unit-localstack

fmt-check:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Every library crate packages (metadata, readme, versions on path dependencies) and its docs
# build without warnings. `--no-verify` keeps it quick; a full `cargo package` also builds each.
package-check:
	$(CARGO) package --workspace --exclude custom-tool-example --exclude rap-example-servers --exclude infinity-test-support --no-verify --allow-dirty --quiet
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --quiet

# The Python venv (cfn-lint, SAM CLI, moto) and DynamoDB Local; idempotent and quick once done.
tools:
	bash infra/local/install.sh

# Chromium for the web app's end-to-end test (crates/infinity-cli/tests/web.rs), installed with
# apt-get (as root, or with sudo) when it is missing; without it that test says it is skipped.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
		|| command -v google-chrome >/dev/null 2>&1; then \
		echo "browser: chromium is installed"; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "browser: no chromium and no apt-get to install it: the web app's browser test will be skipped"; \
	else \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
		$$sudo apt-get update -qq && $$sudo apt-get install -y -qq chromium \
			|| echo "browser: apt-get could not install chromium: the web app's browser test will be skipped"; \
	fi

template-check: tools
	$(VENV)/cfn-lint template.yaml
	$(AWS_CHECK_ENV) $(VENV)/sam validate --lint --template template.yaml
	$(VENV)/python infra/check_alarms.py template.yaml

# The local-stack tests start the emulators themselves (infra/local/emulators.sh). Every server
# the tests start checks itself against the API's document (INFINITY_CHECK_API, docs/api.md).
# A test that needs what `make tools` installs is skipped without it, saying so, unless
# INFINITY_REQUIRE_TOOLS is set, as here: then it fails loudly, and CI never skips one.
unit:
	INFINITY_REQUIRE_TOOLS=1 INFINITY_CHECK_API=1 $(CARGO) test --workspace

# The Python and TypeScript clients (clients/), each generated from clients/openapi.json and
# tested against a real `infinity serve`: the one `unit` built (INFINITY_BIN to use another).
# Each makes what it needs (a venv from PyPI, npm ci) on first use.
clients:
	@test -x "$${INFINITY_BIN:-$${CARGO_TARGET_DIR:-target}/debug/infinity}" || $(CARGO) build -q -p infinity-cli --bin infinity
	bash clients/python/run-tests.sh -q
	bash clients/typescript/run-tests.sh

# The API against its document: Schemathesis (pinned, in its own venv: clients/schemathesis/)
# sends requests generated from the document, valid and invalid, to a real `infinity serve` (a
# scratch store, the demo agent, INFINITY_CHECK_API=1), and holds every answer to the document:
# statuses, content types, schemas, no 5xx, valid data taken, invalid data refused. A fixed
# seed and budget: about 40 s. clients/schemathesis/schemathesis.toml lists each exception, and
# why (docs/api.md too). Extra arguments: API_FUZZ_ARGS="--max-examples 200 --seed 7".
API_FUZZ_ARGS ?=
api-fuzz:
	@test -x "$${INFINITY_BIN:-$${CARGO_TARGET_DIR:-target}/debug/infinity}" || $(CARGO) build -q -p infinity-cli --bin infinity
	bash clients/schemathesis/run.sh $(API_FUZZ_ARGS)

# The API's document, clients/openapi.json, and its Markdown, docs/api-reference.md, written
# again from the code (a test fails while either differs); the clients' types come from it.
openapi:
	INFINITY_WRITE_OPENAPI=1 $(CARGO) test -q -p infinity-server --lib openapi::tests::the_committed

# The local-stack tests again, on LocalStack in host mode (installed and started by the harness).
# `--workspace` keeps the features `unit` built with: with `-p infinity-aws` alone cargo resolves
# tokio and its dependants with other features and builds 65 crates again (3 minutes).
# First, on the same LocalStack, the alarms: created with a stack's names, each SQS alarm's metric
# seen to show a message (infra/check_alarms.py; LocalStack reports queue counts every 5 s here).
unit-localstack: tools
	export INFINITY_EMULATOR=localstack INFINITY_LOCAL_SQS_METRICS_SECONDS=5; \
	bash infra/local/install.sh >/dev/null && bash infra/local/emulators.sh start >/dev/null \
	&& $(VENV)/python infra/check_alarms.py --live template.yaml \
	&& INFINITY_REQUIRE_TOOLS=1 INFINITY_CHECK_API=1 $(CARGO) test --workspace --test local_stack; \
	status=$$?; bash infra/local/emulators.sh stop >/dev/null; exit $$status

build:
	@command -v cargo-lambda >/dev/null || { echo "make build needs cargo-lambda: cargo install cargo-lambda (and zig for cross-compiling to arm64)"; exit 1; }
	$(CARGO) lambda build --release --arm64 -p infinity-aws --bin infinity-agent-lambda --bin infinity-relay-lambda --bin infinity-callback-lambda
	$(CARGO) lambda build --release --arm64 -p infinity-cli --bin infinity

# One agent in the template (AGENT=file), or a folder of agents saved into the table once the
# stack is up (AGENTS=folder DEFAULT_AGENT=name; the template then carries no agent). STACK names
# the stack (default infinity; `make smoke STACK=...` needs it named).
TEMPLATE_AGENT = $(if $(AGENTS),,$(AGENT))
deploy: tools
	@test -d "$(AGENTS)" -o -f "$(TEMPLATE_AGENT)" || { echo "make deploy AGENT=path/to/agent.yaml, or AGENTS=folder DEFAULT_AGENT=name"; exit 1; }
	@test -z "$(AGENTS)" -o -n "$(DEFAULT_AGENT)" || { echo "make deploy AGENTS=$(AGENTS) needs DEFAULT_AGENT=name (the agent new conversations run)"; exit 1; }
	$(VENV)/sam build --template template.yaml
	$(VENV)/sam deploy --guided --stack-name "$(or $(STACK),infinity)" --parameter-overrides "AgentYaml=$(if $(TEMPLATE_AGENT),$$(cat $(TEMPLATE_AGENT)),)" "DefaultAgent=$(DEFAULT_AGENT)"
	@if [ -n "$(AGENTS)" ]; then $(CARGO) build -q -p infinity-cli && SAM="$(VENV)/sam" bash infra/seed_agents.sh "$(or $(STACK),infinity)" "$(AGENTS)"; fi

# After `make deploy`: a message through the deployed stack, and its reply (needs AWS credentials).
smoke:
	@test -n "$(STACK)" || { echo "make smoke STACK=<the stack name you deployed>"; exit 1; }
	$(CARGO) build -q -p infinity-cli
	$(VENV)/python infra/smoke_deployed.py --stack "$(STACK)"

local-up:
	INFINITY_EMULATOR=$(EMULATOR) bash infra/local/up.sh "$(AGENT)"

local-down:
	bash infra/local/down.sh

bench:
	$(CARGO) bench -p infinity-agent-core --bench slice

clean:
	$(CARGO) clean

bench-aws:
	$(CARGO) bench -p infinity-aws --bench aws_cost

bench-models:
	$(CARGO) bench -p infinity-models --bench requests

# LangGraph (its own venv in benchmarks/langgraph/.venv, made on first use) beside the engine.
.PHONY: bench-peer
bench-peer:
	CARGO="$(CARGO)" bash benchmarks/langgraph/run.sh

# The soak (docs/benchmarks.md, "The soak"): conversations through the local stack on LocalStack (its
# own, on port 4599), the provider stand-in at real latencies and faults, infinity-local (release)
# killed with kill -9 and restarted. SOAK_ARGS="--quick" for a run of a few minutes.
SOAK_ARGS ?=
.PHONY: bench-soak
bench-soak:
	$(CARGO) build -q --release -p infinity-aws --bin infinity-local
	INFINITY_EMULATOR=localstack bash infra/local/install.sh
	$(VENV)/python benchmarks/soak/soak.py --runner "$${CARGO_TARGET_DIR:-target}/release/infinity-local" $(SOAK_ARGS)
