#!/usr/bin/env bash
# Installs npm dependencies when node_modules is missing or older than the lockfile, then builds.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "[deps] installing npm packages"
  npm ci --no-audit --no-fund
fi
echo "[build] compiling TypeScript"
npx tsc -p tsconfig.json
