#!/usr/bin/env bash
# Checks the Python client from scratch:
#
#   1. makes .venv (Python 3.12 or newer) with requirements-dev.txt, if missing or outdated;
#   2. validates the OpenAPI document with openapi-spec-validator;
#   3. regenerates src/infinity_client/models.py and fails if it changed (stale models);
#   4. runs pytest against a real `infinity serve`.
#
#   ./run-tests.sh [PYTEST_ARGS...]
#
# Environment: INFINITY_BIN (the server binary, default the workspace's debug build of
# `infinity`, under CARGO_TARGET_DIR or target/), OPENAPI (the
# document, default as generate.sh picks it), PYTHON (the interpreter for the venv).
# Every step runs even when an earlier check failed, so one run shows every problem; the exit
# status is non-zero if any step failed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
venv="$here/.venv"
failed=()

step() { printf '\n== %s\n' "$*"; }

# --- 1. The virtual environment ---------------------------------------------------------------
source "$here/../find-python.sh"

stamp="$venv/.requirements-dev.txt"
if [[ ! -x "$venv/bin/python" ]] || ! cmp -s requirements-dev.txt "$stamp"; then
    step "making $venv"
    python="$(find_python)" || { echo "run-tests.sh: no Python 3.12 or newer (set PYTHON)" >&2; exit 2; }
    rm -rf "$venv"
    "$python" -m venv "$venv" || exit 2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt || exit 2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-build-isolation --no-deps --editable . || exit 2
    cp requirements-dev.txt "$stamp"
fi

# --- 2. The document --------------------------------------------------------------------------
document="${OPENAPI:-$here/../openapi.json}"
step "validating $document (openapi-spec-validator)"
if ! "$venv/bin/openapi-spec-validator" "$document"; then
    echo "run-tests.sh: the OpenAPI document is not valid OpenAPI 3.1: fix the Rust side (crates/infinity-server/src/openapi) and run make openapi"
    failed+=("document validation")
fi

# --- 3. The generated models ------------------------------------------------------------------
step "regenerating src/infinity_client/models.py"
models="src/infinity_client/models.py"
before="$(mktemp)"
trap 'rm -f "$before"' EXIT
cp "$models" "$before" 2>/dev/null || : > "$before"
if ! DATAMODEL_CODEGEN="$venv/bin/datamodel-codegen" ./generate.sh "$document"; then
    failed+=("model generation")
elif ! diff -u --label "$models (committed)" --label "$models (regenerated)" "$before" "$models" \
        > "$before.diff"; then
    head -60 "$before.diff"
    echo "run-tests.sh: $models was stale; it has been regenerated: review and commit it"
    failed+=("stale models")
fi
rm -f "$before.diff"

# --- 4. The tests -----------------------------------------------------------------------------
step "pytest (server: ${INFINITY_BIN:-target/debug/infinity})"
"$venv/bin/python" -m pytest "$@"
status=$?
if [[ $status -eq 5 ]]; then
    echo "run-tests.sh: pytest ran no test"
    failed+=("pytest: no tests")
elif [[ $status -ne 0 ]]; then
    failed+=("pytest")
fi

if [[ ${#failed[@]} -gt 0 ]]; then
    printf '\nrun-tests.sh: FAILED: %s\n' "$(IFS=,; echo "${failed[*]}" | sed 's/,/, /g')"
    exit 1
fi
printf '\nrun-tests.sh: all checks passed\n'
