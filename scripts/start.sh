#!/usr/bin/env bash
# npm start: install, provision PostgreSQL/Redis if absent, build, migrate, seed, run the fleet.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
bash scripts/provision.sh
node dist/scripts/cli.js migrate
node dist/scripts/cli.js seed
echo "[start] api + workers + realtime under pm2-runtime (PORT=${PORT:-3000})"
exec npx pm2-runtime start ecosystem.config.js
