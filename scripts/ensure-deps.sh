#!/usr/bin/env bash
# Installs npm dependencies when node_modules is missing or older than the lockfile, then builds.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "[deps] installing npm packages"
  # npm 11 may write a lockfile holding only this platform's optional packages and then refuse it in
  # `npm ci`; `npm install` still installs the locked versions.
  npm ci --no-audit --no-fund || npm install --no-audit --no-fund
fi
echo "[build] compiling TypeScript"
npx tsc -p tsconfig.json
