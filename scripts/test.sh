#!/usr/bin/env bash
# npm test: install, provision PostgreSQL/Redis if absent, build, prepare the template database,
# run the ava suite (each test file gets its own database and Redis prefix).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
bash scripts/provision.sh
node dist/test/helpers/prepare.js
npx ava "$@"
