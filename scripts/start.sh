#!/usr/bin/env bash
# npm start: install, provision PostgreSQL/Redis if absent, build, migrate, seed, run the fleet.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
# Before provisioning acts on DATABASE_URL / REDIS_URL: a bad value stops here, naming the variable.
node dist/scripts/cli.js check-config
bash scripts/provision.sh
node dist/scripts/cli.js migrate
node dist/scripts/cli.js seed
echo "[start] api + workers + realtime under pm2-runtime (PORT=${PORT:-3000})"
# pm2-runtime takes this process's place, and package.json's `exec bash` took npm's shell's: the
# signal npm forwards (SIGTERM from `docker stop`, an init system or kill) reaches pm2-runtime itself,
# which drains the fleet. `npx` would put two more shells in between, which die without passing it on.
exec node_modules/.bin/pm2-runtime start ecosystem.config.js
