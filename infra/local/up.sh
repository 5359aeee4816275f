#!/usr/bin/env bash
# make local-up AGENT=path/to/agent.yaml: the whole local stack in the background.
# Starts the emulators, creates the template's table and queues, writes infra/local/env.sh, and
# runs the real agent and relay handlers through the local poller and schedule pump
# (target/debug/infinity-local). After `source infra/local/env.sh`, `infinity send`,
# `infinity thread show` and `infinity tail` need no flags.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
agent="${1:-${AGENT:-}}"
if [[ -z "$agent" ]]; then
    echo "usage: make local-up AGENT=path/to/agent.yaml" >&2
    exit 2
fi
if [[ ! -f "$agent" ]]; then
    echo "local-up: agent file $agent does not exist" >&2
    exit 2
fi
agent="$(cd "$(dirname "$agent")" && pwd)/$(basename "$agent")"

"$here/install.sh"
"$here/emulators.sh" start
"$repo/.venv/bin/python" "$here/bootstrap.py" --env-file "$here/env.sh"
echo "export INFINITY_AGENT_FILE=\"$agent\"" >> "$here/env.sh"

(cd "$repo" && cargo build -q -p infinity-aws --bin infinity-local -p infinity-cli)
# Where cargo put them (CARGO_TARGET_DIR, if set, or target/ in the repo).
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
case "$target_dir" in /*) ;; *) target_dir="$repo/$target_dir" ;; esac
mkdir -p "$here/run"
if [[ -f "$here/run/runner.pid" ]] && kill -0 "$(cat "$here/run/runner.pid")" 2>/dev/null; then
    kill "$(cat "$here/run/runner.pid")" || true
fi
(
    set -a
    # shellcheck disable=SC1091
    . "$here/env.sh"
    set +a
    nohup "$target_dir/debug/infinity-local" >"$here/run/runner.log" 2>&1 &
    echo $! >"$here/run/runner.pid"
)
echo "local stack is up: agent $agent; handlers log to infra/local/run/runner.log"
echo "next: source infra/local/env.sh && $target_dir/debug/infinity send --thread demo \"hello\""
