#!/usr/bin/env bash
# `make bench-peer`: one workload on LangGraph and on Infinity, one after the other, in one run,
# and one table of both with the ratios (docs/benchmarks.md, "Side by side with LangGraph").
# The JSON lines of both sides go to standard error as they come; the table to standard output.
# Arguments are passed to bench.py (e.g. --sizes 10,1000 --turns 20 for a quick look).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cargo="${CARGO:-cargo}"

bash "$here/setup.sh"

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# Both sides run on one CPU (BENCH_CPU, default 1; BENCH_CPU=none for all of them), as Python
# runs LangGraph anyway: on a shared 2-vCPU machine a turn of ours otherwise swings by twice from
# run to run with where the OS wakes the runtime's worker thread.
pin=()
if [ "${BENCH_CPU:-1}" != none ] && command -v taskset >/dev/null; then
    pin=(taskset -c "${BENCH_CPU:-1}")
fi

echo "== Infinity: cargo bench -p infinity-agent-core --bench slice -- peer" >&2
(cd "$root" && "$cargo" bench -q -p infinity-agent-core --bench slice --no-run)
(cd "$root" && "${pin[@]}" "$cargo" bench -q -p infinity-agent-core --bench slice -- peer) | tee "$out/infinity.jsonl" >&2
printf '{"system": "infinity", "metric": "versions", "size": null, "value": null, "unit": "", "rust": "%s"}\n' \
    "$(cd "$root" && rustc --version | cut -d" " -f2-)" >>"$out/infinity.jsonl"

echo "== LangGraph: bench.py" >&2
"${pin[@]}" "$here/.venv/bin/python" "$here/bench.py" "$@" | tee "$out/langgraph.jsonl" >&2

echo >&2
"$here/.venv/bin/python" "$here/report.py" "$out/infinity.jsonl" "$out/langgraph.jsonl"
