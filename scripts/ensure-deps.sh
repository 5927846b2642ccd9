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
elif [[ -n $(find patches -newer node_modules/.package-lock.json -print -quit 2>/dev/null) ]]; then
  # A patch of a dependency (patches/, applied by npm's postinstall) newer than the install: apply it
  # to the packages installed before it.
  echo "[deps] applying patches/"
  npx patch-package --error-on-fail
  touch node_modules/.package-lock.json
fi
# tsc's own up-to-date check (incremental) still takes ~13 s of CPU on this tree, and npm start,
# npm test and npm run cli each come here: a stamp written when a build starts says whether any
# source (tsconfig.json's include, tsconfig itself, package.json, the lockfile) changed since.
STAMP=dist/.build-stamp
SOURCES=(api workers realtime shared migrations scripts test bench tsconfig.json package.json package-lock.json)
if [[ -f $STAMP && -z $(find "${SOURCES[@]}" -newer "$STAMP" \( -name '*.ts' -o -name '*.json' \) -print -quit 2>/dev/null) ]]; then
  echo "[build] dist/ is up to date"
else
  echo "[build] compiling TypeScript"
  mkdir -p dist
  # Taken before compiling: a file saved while tsc runs is newer than the stamp, so the next run builds.
  touch "$STAMP.next"
  npx tsc -p tsconfig.json
  mv "$STAMP.next" "$STAMP"
fi
