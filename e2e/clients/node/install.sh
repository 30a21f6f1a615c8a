#!/usr/bin/env bash
# Installs the kafkajs driver's packages from package-lock.json into
# clients/node/node_modules (npm ci), unless they are there already for
# the same lock file. Usage: install.sh CACHE (the cache is not used: the
# packages stay next to the driver, where Node.js finds them).
set -euo pipefail
cd "$(dirname "$0")"
command -v node >/dev/null || { echo "e2e: node is required for the kafkajs driver: install Node.js 20+ (Debian: apt-get install nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null || { echo "e2e: npm is required for the kafkajs driver (Debian: apt-get install npm)" >&2; exit 1; }
want=$({ node --version; cat package.json package-lock.json; } | sha256sum | cut -d' ' -f1)
stamp=node_modules/.kproxy-e2e-stamp
if [ -d node_modules ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "== e2e: kafkajs driver packages are up to date in $PWD/node_modules"
  exit 0
fi
echo "== e2e: npm ci for the kafkajs driver in $PWD"
npm ci --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
