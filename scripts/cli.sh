#!/usr/bin/env bash
# npm run cli -- <command>: builds when needed, then runs the operator CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -d node_modules ]]; then npm ci --no-audit --no-fund >&2 || npm install --no-audit --no-fund >&2; fi
npx tsc -p tsconfig.json >&2
exec node dist/scripts/cli.js "$@"
