#!/usr/bin/env bash
# Installs everything chatsync needs: ./.venv (Python), client_js/node_modules (npm ci) and the web app's build
# (server/web/dist, rebuilt when its sources changed); with --with-node also Debian's chromium for the browser tests.
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
  # otel too: the tracing tests run the OpenTelemetry SDK with its in-memory exporter.
  .venv/bin/python -m pip install --quiet -e '.[dev,otel]'
  touch "$stamp"
fi

# client_js/node_modules and the web app are needed in both modes: the server serves the app at `/`.
if [ -f client_js/package.json ]; then
  if ! command -v node >/dev/null; then
    echo "setup: node (20+) and npm are required to build the web app and run the client_js suite" >&2
    exit 1
  fi
  # npm records what it installed in node_modules/.package-lock.json when an install completes: without it the
  # folder is missing, emptied or half made.
  if [ ! -f client_js/node_modules/.package-lock.json ] || [ client_js/package-lock.json -nt client_js/node_modules ]; then
    (cd client_js && npm ci --no-audit --no-fund --loglevel=error)
    touch client_js/node_modules
  fi
  # The web app (client_js/app) into server/web/dist, when its sources changed since the last build; the
  # package build runs the same step (scripts/web_build.py). The build is not committed.
  .venv/bin/python scripts/web_build.py
fi

if [ "${1:-}" = "--with-node" ]; then
  # The browser tests drive Debian's Chromium through playwright-core (no browser download at run time);
  # the bus tests start Redis servers and a Redis Cluster of their own from Debian's redis-server (7+).
  MISSING=""
  [ -x /usr/bin/chromium ] || MISSING="$MISSING chromium"
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null || MISSING="$MISSING redis-server"
  if [ -n "$MISSING" ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $MISSING >/dev/null
  fi
fi
