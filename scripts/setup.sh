#!/usr/bin/env bash
# Installs everything chatsync needs into ./.venv (Python); with --with-node also client_js/node_modules (Node)
# and Debian's chromium for the browser test.
# Safe to run again: it only does work that is missing or out of date.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.chatsync-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev]'
  touch "$stamp"
fi

if [ "${1:-}" = "--with-node" ] && [ -f client_js/package.json ]; then
  if ! command -v node >/dev/null; then
    echo "setup: node is required for the client_js conformance suite (Node 20+)" >&2
    exit 1
  fi
  if [ ! -d client_js/node_modules ] || [ client_js/package-lock.json -nt client_js/node_modules ]; then
    (cd client_js && npm ci --no-audit --no-fund --loglevel=error)
  fi
  # The admin page's test drives Debian's Chromium through playwright-core (no browser download at run time).
  if [ ! -x /usr/bin/chromium ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  fi
fi
