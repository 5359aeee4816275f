#!/usr/bin/env bash
# make local-down: stops the local poller/pump and the emulators.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -f "$here/run/runner.pid" ]]; then
    kill "$(cat "$here/run/runner.pid")" 2>/dev/null || true
    rm -f "$here/run/runner.pid"
fi
"$here/emulators.sh" stop
