#!/usr/bin/env bash
# Installs npm dependencies when node_modules is missing or older than the lockfile, then builds.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "[deps] installing npm packages"
  # The lockfile lists every platform's optional packages, so `npm ci` succeeds. The fallback stays
  # for a lockfile regenerated where npm silently dropped optional packages it could not resolve
  # (npm ci then refuses it as out of sync); `npm install` still installs the locked versions.
  npm ci --no-audit --no-fund || npm install --no-audit --no-fund
fi
echo "[build] compiling TypeScript"
npx tsc -p tsconfig.json
