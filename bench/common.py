"""Shared pieces for benchmarks: a real `chatsync serve` process, its CPU time, percentiles."""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The checkout whose server the benchmarks start (``python -m server.cli`` runs in it): by default this one.
# Another checkout (e.g. a git worktree of an older commit) compares two versions under one load generator.
SERVER_ROOT = os.environ.get("CHATSYNC_BENCH_SERVER_ROOT") or ROOT
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the test kit: its process and user helpers serve here too

from testkit import free_port  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def interpreter() -> str:
    """Which Python the servers run on (every server a benchmark starts runs on ``sys.executable``): its path,
    version, and whether its interpreter is a shared ``libpython`` (pyenv's default build) or linked into the
    executable (Debian's ``python3``). Absolute figures from different interpreters do not compare; ratios
    against the bare broadcast, which runs on the same one, do (``docs/performance.md``)."""
    try:
        with open("/proc/self/maps") as maps:
            shared = any("libpython" in line for line in maps)
    except OSError:
        return f"{sys.executable} (Python {sys.version.split()[0]})"
    linked = "a shared libpython" if shared else "libpython linked in"
    return f"{sys.executable} (Python {sys.version.split()[0]}, {linked})"


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def machine_ticks() -> tuple[int, int]:
    """(steal, total) CPU ticks of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: already counted in user/nice]
    return fields[7], sum(fields[:8])


def steal_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Share of the machine's CPU time that its host took away (steal) between two ``machine_ticks``.

    On a virtual machine this is time the vCPUs were ready to run and not running; a benchmark's tail
    latency follows it, so each run prints it beside its numbers."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    return sum(cpu_split(pid))


def cpu_seconds_with_reaped(pid: int) -> float:
    """User + system CPU time of a process and of its children that exited and were waited for. Summed over
    a server's processes (PostgreSQL's backends, whose postmaster reaps them) it never goes down when a
    child exits between two readings, as a sum over the live processes alone does."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / CLK_TCK  # utime, stime, cutime, cstime


def create_user(env: dict[str, str], name: str, cwd: str | None = None) -> str:
    """``chatsync users create NAME`` against the database in ``env`` (run in the checkout ``cwd``); returns
    the new user's token."""
    return subprocess.run(
        [sys.executable, "-m", "server.cli", "users", "create", name],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


_CREATE_USERS = """
import asyncio, sys
from server.services.auth import AuthService
from server.settings import load_settings
from server.store import migrate
from server.store.db import Database

async def main(prefix: str, n: int) -> None:
    async with Database(load_settings().database_url) as db:
        await migrate.upgrade(db)
        auth = AuthService(db)
        for i in range(n):
            print((await auth.create_user(f"{prefix}-{i}"))[1])

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def create_users(env: dict[str, str], prefix: str, n: int, cwd: str | None = None) -> list[str]:
    """``n`` users named ``PREFIX-i`` in the database in ``env``, made by one process of the checkout ``cwd``
    (as ``chatsync users create`` makes one); returns their tokens in order."""
    out = subprocess.run(
        [sys.executable, "-c", _CREATE_USERS, prefix, str(n)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(out) == n, out
    return out


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def summary(values: list[float]) -> str:
    if not values:
        return "n/a"
    med = statistics.median(values)
    spread = (max(values) - min(values)) / 2
    return f"{med:.2f} ± {spread:.2f} (n={len(values)})"


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Until the server at ``url`` answers ``/readyz``; fails if its process ends or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.05)


@contextlib.contextmanager
def pg_database() -> Iterator[str]:
    name = f"chatsync_bench_{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-qc", f'CREATE DATABASE "{name}"'],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        subprocess.run(
            [
                "psql",
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-qc",
                f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
            ],
            capture_output=True,
        )


@dataclass
class Server:
    url: str
    token: str
    proc: subprocess.Popen
    # With ``run_server(users=N)``: N more users' tokens, for a load where each session has its own user.
    tokens: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid


@contextlib.contextmanager
def run_server(
    database_url: str | None = None,
    token: str | None = None,
    command: tuple[str, ...] = ("-m", "server.cli", "serve"),
    cpus: set[int] | None = None,
    root: str | None = None,
    log_path: str | None = None,
    users: int = 0,
    tokens: list[str] | None = None,
    **env_overrides: str,
) -> Iterator[Server]:
    """A `chatsync serve` process (or ``python *command``, which must serve the same way); ``token`` reuses a
    user of a shared database instead of creating one; ``cpus`` pins the server to those cores; ``root`` is the
    checkout it runs from (default ``SERVER_ROOT``: another worktree compares two versions under one load);
    ``log_path`` keeps its log there; ``users`` makes that many more users (``Server.tokens``), and ``tokens``
    passes those of a shared database on."""
    root = root or SERVER_ROOT
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = {
            **os.environ,
            "CHATSYNC_DATABASE_URL": database_url or f"sqlite+aiosqlite:///{tmp}/bench.db",
            "CHATSYNC_PORT": str(port),
            "CHATSYNC_LOG_LEVEL": "warning",
            # one load-generating user stands in for many: the per-user rate limit would measure itself
            "CHATSYNC_RATE_LIMIT_PER_SECOND": "0",
            **env_overrides,
        }
        if token is None:
            token = create_user(env, "bench", root)
        if tokens is None:
            tokens = create_users(env, "bench-user", users, root) if users else []
        # CHATSYNC_BENCH_SERVER_LOG keeps the server's log for a look afterwards.
        log = open(log_path or os.environ.get("CHATSYNC_BENCH_SERVER_LOG") or os.path.join(tmp, "server.log"), "wb")
        proc = subprocess.Popen([sys.executable, *command], env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT)
        if cpus is not None:
            os.sched_setaffinity(proc.pid, cpus)  # before it has started its event loop
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, proc, 30)
            yield Server(url, token, proc, tokens)
        finally:
            proc.terminate()
            proc.wait(20)
            log.close()
