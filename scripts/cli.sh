#!/usr/bin/env bash
# npm run cli -- <command>: installs and builds when needed (scripts/ensure-deps.sh), then runs the operator CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh >&2
exec node dist/scripts/cli.js "$@"
