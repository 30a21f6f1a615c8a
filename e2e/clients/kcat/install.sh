#!/usr/bin/env bash
# Makes sure the kcat command-line tool is installed: when kcat is not on
# PATH it installs Debian's package (which brings its librdkafka) with
# apt-get, as root. The driver needs python3 (standard library only).
# Usage: install.sh CACHE (the cache is not used).
set -euo pipefail
command -v python3 >/dev/null || { echo "e2e: python3 is required for the kcat driver (Debian: apt-get install python3)" >&2; exit 1; }
if command -v kcat >/dev/null; then
  echo "== e2e: kcat is installed: $(kcat -V 2>&1 | grep -m1 '^Version' || true)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "e2e: kcat is not installed; run as root: apt-get update && apt-get install -y kcat" >&2
  exit 1
fi
echo "== e2e: installing kcat with apt-get"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q kcat; then
  apt-get update -q
  apt-get install -y -q kcat
fi
kcat -V 2>&1 | grep -m1 '^Version'
