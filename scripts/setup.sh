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
  .venv/bin/python -m pip install --quiet -e '.[dev]'
  touch "$stamp"
fi

# Builds the web app (client_js/app, with the library in client_js/src) into server/web/dist when its inputs
# changed since the last build. The build is not committed. A hash of every input, kept beside the output,
# decides: timestamps would not, since a checkout or a branch switch sets them arbitrarily.
build_web() {
  local dist=server/web/dist
  local stamp=$dist/.sources-sha256
  local hash
  hash=$(cd client_js && { find app src -type f 2>/dev/null || true; ls vite.config.* package-lock.json 2>/dev/null || true; } \
    | LC_ALL=C sort | while IFS= read -r f; do printf '%s %s\n' "$(sha256sum < "$f" | cut -c1-64)" "$f"; done \
    | sha256sum | cut -c1-64)
  if [ -f "$dist/index.html" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ]; then
    return 0
  fi
  echo "setup: building the web app (client_js/app -> $dist)" >&2
  (cd client_js && node node_modules/vite/bin/vite.js build --logLevel warn)
  printf '%s\n' "$hash" > "$stamp"
}

# client_js/node_modules and the web app are needed in both modes: the server serves the app at `/`.
if [ -f client_js/package.json ]; then
  if ! command -v node >/dev/null; then
    echo "setup: node (20+) and npm are required to build the web app and run the client_js suite" >&2
    exit 1
  fi
  if [ ! -d client_js/node_modules ] || [ client_js/package-lock.json -nt client_js/node_modules ]; then
    (cd client_js && npm ci --no-audit --no-fund --loglevel=error)
    touch client_js/node_modules
  fi
  build_web
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
