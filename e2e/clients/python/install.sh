#!/usr/bin/env bash
# Installs the confluent-kafka (Python) driver's packages into a virtual
# environment at CACHE/python-venv, unless it is there already for the same
# requirements.txt and Python. Usage: install.sh CACHE
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 CACHE" >&2; exit 2; }
cache=$1
cd "$(dirname "$0")"
command -v python3 >/dev/null || { echo "e2e: python3 (3.9+, with venv) is required for the confluent-kafka driver (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
venv=$cache/python-venv
want=$({ python3 --version; cat requirements.txt; } | sha256sum | cut -d' ' -f1)
stamp=$venv/kproxy-e2e-stamp
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "== e2e: confluent-kafka driver venv is up to date in $venv"
  exit 0
fi
echo "== e2e: creating the confluent-kafka driver venv in $venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt
"$venv/bin/python" -c 'import confluent_kafka'
echo "$want" >"$stamp"
