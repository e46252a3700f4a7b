#!/usr/bin/env bash
# Set up (if needed) and run the server on the embedded defaults: SQLite file ./chatsync.db,
# in-process bus, the offline echo model, http://127.0.0.1:8787. Extra arguments go to `chatsync serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/chatsync serve "$@"
