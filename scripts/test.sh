#!/usr/bin/env bash
# npm test: install, provision PostgreSQL/Redis (and Chromium, pdftotext) if absent, build, prepare the run's template database,
# run the ava suite (each test file gets its own database and Redis prefix), then drop the run's
# databases. Runs are named by TEST_RUN_ID, so two runs on one machine do not touch each other.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
PROVISION_TEST_TOOLS=1 bash scripts/provision.sh
TEST_RUN_ID="${TEST_RUN_ID:-$(node -e 'process.stdout.write(Math.floor(Date.now() / 1000).toString(36) + require("node:crypto").randomBytes(3).toString("hex"))')}"
export TEST_RUN_ID
node dist/test/helpers/prepare.js
trap 'node dist/test/helpers/prepare.js --cleanup || true' EXIT
npx ava "$@"
