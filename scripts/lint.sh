#!/usr/bin/env bash
# npm run lint: eslint (layer and one-way rules, docs/conventions.md) and prettier's check, run side
# by side (each uses one core; together they took 75 s in a row on CI's two). Each one's output is
# printed whole once it ends; the exit status is non-zero when either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
npx eslint . > "$out/eslint" 2>&1 &
eslint_pid=$!
npx prettier --check . > "$out/prettier" 2>&1 &
prettier_pid=$!
wait "$eslint_pid"; eslint_rc=$?
wait "$prettier_pid"; prettier_rc=$?
echo "[lint] eslint$([[ $eslint_rc == 0 ]] && echo ': no problems' || echo " failed ($eslint_rc)")"
cat "$out/eslint"
echo "[lint] prettier$([[ $prettier_rc == 0 ]] && echo '' || echo " failed ($prettier_rc); npm run format fixes it")"
cat "$out/prettier"
(( eslint_rc == 0 && prettier_rc == 0 ))
