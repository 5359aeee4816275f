#!/usr/bin/env bash
# The API against its document, with Schemathesis (schemathesis.toml says what is checked, and
# each exception):
#
#   1. makes .venv (Python 3.12 or newer: Schemathesis's generator crashes on 3.11) with
#      requirements.txt, if missing or outdated;
#   2. starts a real `infinity serve` on a free loopback port, with a scratch store, the demo
#      agent (the scripted model: no keys) and INFINITY_CHECK_API=1 (the server answers 500,
#      naming it, for anything that breaks its document);
#   3. runs Schemathesis against the document the server serves, and stops the server.
#
#   ./run.sh [SCHEMATHESIS_RUN_ARGS...]
#
# Environment: INFINITY_BIN (the server binary, default the workspace's debug build of
# `infinity`, under CARGO_TARGET_DIR or target/), PYTHON (the interpreter for the venv).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$here/.venv"

# --- 1. The virtual environment ---------------------------------------------------------------
source "$here/../find-python.sh"

stamp="$venv/.requirements.txt"
if [[ ! -x "$venv/bin/schemathesis" ]] || ! cmp -s "$here/requirements.txt" "$stamp"; then
    echo "api-fuzz: making $venv"
    python="$(find_python)" || { echo "api-fuzz: no Python 3.12 or newer (set PYTHON)" >&2; exit 2; }
    rm -rf "$venv"
    "$python" -m venv "$venv" || exit 2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r "$here/requirements.txt" || exit 2
    cp "$here/requirements.txt" "$stamp"
fi

# --- 2. The server ----------------------------------------------------------------------------
bin="${INFINITY_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/infinity}"
[[ -x "$bin" ]] || { echo "api-fuzz: no server binary at $bin (cargo build -p infinity-cli, or set INFINITY_BIN)" >&2; exit 2; }
scratch="$(mktemp -d)"
port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
env -u INFINITY_SERVE_TOKEN -u ANTHROPIC_API_KEY -u OPENAI_API_KEY INFINITY_CHECK_API=1 \
    "$bin" serve --agent "$repo/examples/demo/agent.yaml" --store "$scratch/store" \
    --port "$port" >"$scratch/serve.log" 2>&1 &
server=$!
stop() {
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    rm -rf "$scratch"
}
trap stop EXIT
api="http://127.0.0.1:$port"
for _ in $(seq 1 150); do
    "$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('$api/health', timeout=1)" \
        2>/dev/null && break
    kill -0 "$server" 2>/dev/null || { cat "$scratch/serve.log"; echo "api-fuzz: the server stopped" >&2; exit 1; }
    sleep 0.1
done

# --- 3. Schemathesis --------------------------------------------------------------------------
# Run from the scratch folder, so that what it writes (its cache) stays out of the repository.
cd "$scratch" || exit 2
"$venv/bin/schemathesis" --no-color --config-file "$here/schemathesis.toml" run "$api/openapi.json" "$@"
status=$?
if grep -q "the API broke its document" "$scratch/serve.log"; then
    grep "the API broke its document" "$scratch/serve.log" | head -20
    echo "api-fuzz: the server's own check (INFINITY_CHECK_API) found breaks of the document" >&2
    status=1
fi
exit $status
