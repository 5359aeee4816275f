#!/usr/bin/env bash
# The client's whole check, on a fresh machine with Node 20 and the `infinity` binary:
#   1. install the pinned packages (npm ci) when node_modules is missing;
#   2. regenerate src/schema.d.ts from the OpenAPI document and fail if it changed: the
#      committed types must be the document's (run `npm run generate` and commit the result);
#   3. build the library, and type-check everything strictly (`tsc --noEmit`): the library, the
#      tests, and the examples as a user's code;
#   4. run the tests (node's test runner) against a real `infinity serve`.
# Environment: INFINITY_OPENAPI (the document, default ../openapi.json, the repository's
# clients/openapi.json) and INFINITY_BIN (the binary, default the workspace's debug build,
# target/debug/infinity, or under CARGO_TARGET_DIR).
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -d node_modules ]; then
  npm ci --no-audit --no-fund
fi

committed="$(mktemp)"
trap 'rm -f "$committed"' EXIT
cp src/schema.d.ts "$committed"
npm run --silent generate >/dev/null
if ! cmp -s "$committed" src/schema.d.ts; then
  diff -u "$committed" src/schema.d.ts | head -40 || true
  cp "$committed" src/schema.d.ts # leave the committed file as it was
  echo "run-tests: src/schema.d.ts is not what the document generates (stale, or edited by hand): run \`npm run generate\` and commit it." >&2
  exit 1
fi

# The library first: the examples import it by its name, as its users do, through dist/.
npm run --silent build
# Everything, strictly: the library, the tests, the examples (against dist/'s declarations).
npx tsc -p tsconfig.test.json --noEmit
# Checked just above: emit the tests without checking again.
rm -rf .test-build
npx tsc -p tsconfig.test.json --noCheck

node --test --test-reporter=spec .test-build/test/*.test.js
