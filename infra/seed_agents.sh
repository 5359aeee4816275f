#!/usr/bin/env bash
# Saves every agent file of a folder into a deployed stack's table as a new version
# (`infinity agents save`), after `make deploy AGENTS=folder`. Script files (*.script.yaml) and
# skills are read in with the agents that name them.
#   infra/seed_agents.sh STACK FOLDER
set -euo pipefail
stack="${1:?usage: seed_agents.sh STACK FOLDER}"
folder="${2:?usage: seed_agents.sh STACK FOLDER}"
here="$(cd "$(dirname "$0")/.." && pwd)"
sam="${SAM:-sam}"
table="$("$sam" list stack-outputs --stack-name "$stack" --output json \
  | python3 -c 'import json, sys; print(next(o["OutputValue"] for o in json.load(sys.stdin) if o["OutputKey"] == "ThreadsTableName"))')"
infinity="${INFINITY:-$here/target/debug/infinity}"
saved=0
for file in "$folder"/*.yaml "$folder"/*.yml; do
  [ -e "$file" ] || continue
  case "$file" in *.script.yaml|*.script.yml) continue ;; esac
  # Only agent files: a YAML with a top-level `name:` and `model:`.
  grep -q '^model:' "$file" && grep -q '^name:' "$file" || continue
  "$infinity" agents save --table "$table" "$file"
  saved=$((saved + 1))
done
echo "seeded $saved agent(s) into $table"
