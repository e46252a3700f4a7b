#!/usr/bin/env bash
# Set up (if needed) and run every test: Python (SQLite, PostgreSQL at 127.0.0.1:5432, Redis at
# 127.0.0.1:6379, real uvicorn servers) and the @trpc/client conformance suite (Node).
# Extra arguments go to pytest. `--fast` runs only the tests marked fast (the services tier and unit tests: in
# process, no server, browser or child process), in one process: a signal for a change in well under a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fast" ]; then
  shift
  bash scripts/setup.sh
  # Only the modules that mark themselves fast are collected (importing every module would cost more than
  # running these); -m keeps any test of theirs that is not.
  mapfile -t modules < <(grep -rl --include='test_*.py' '^pytestmark = pytest.mark.fast' tests | sort)
  exec .venv/bin/python -m pytest -q -p no:cacheprovider -m fast "${modules[@]}" "$@"
fi
bash scripts/setup.sh --with-node
# The tests start many Python processes (`chatsync serve`, the `chatsync` command), each importing the
# server again: compiled here once, its modules are read as bytecode instead of compiled at every start, also
# where PYTHONDONTWRITEBYTECODE is set (Python then writes no bytecode of its own). Later runs compile only what changed.
.venv/bin/python -m compileall -q -j 0 server chatsync_client tests || true
set +e
# Three workers by default (a module's tests stay on one worker, so module-scoped servers start once): most of
# a test's time is spent waiting on the servers, browsers and child processes it started, so on two cores a
# third worker fills time the other two leave idle.
# A worker that dies (a crash in native code) fails the run at once: replacing it under --dist loadscope can
# leave the controller waiting for tests no worker holds. Modules are handed out in collection order, which
# tests/conftest.py makes slowest first (--no-loadscope-reorder: not by their number of tests).
workers=${CHATSYNC_TEST_WORKERS:-3}
if [ "$workers" -gt 1 ]; then
  .venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadscope --no-loadscope-reorder \
    --max-worker-restart 0 "$@"
else
  .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
fi
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$rc"
