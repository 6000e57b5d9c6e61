#!/usr/bin/env bash
# The dashboard's browser test: Debian's Chromium (installed if missing), playwright-core from npm
# (pinned, installed once into this folder's node_modules), and the built `undolog` binary.
#   tests/browser/run.sh [path/to/undolog]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
export UNDOLOG_BIN=${1:-${UNDOLOG_BIN:-$repo/target/debug/undolog}}
export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

if [ ! -x "$CHROMIUM" ]; then
  echo "installing Debian's chromium (apt-get)"
  if [ "$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi
  $sudo apt-get install -y -qq chromium >/dev/null || {
    $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium >/dev/null
  }
fi

# npm ci only when the lock file changed since the last install.
stamp="$here/node_modules/.installed-lock"
if ! cmp -s "$here/package-lock.json" "$stamp" 2>/dev/null; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$stamp"
fi

# The identity provider of the sign-in step (oidc-provider), with the other fixtures.
bash "$here/../fixtures/setup.sh" >/dev/null

exec node "$here/dashboard.test.mjs"
