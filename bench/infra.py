"""Private PostgreSQL and Redis servers for one benchmark run, so their CPU per event can be read from /proc.

The shared PostgreSQL at 5432 and Redis at 6379 also serve other work (test suites), so summing their
processes' CPU counts that work too. A benchmark that reports the database's or the bus's cost per event
starts its own: ``private_postgres()`` runs ``initdb`` + ``postgres`` in a temporary directory on a free port
(default settings, ``fsync`` on), ``private_redis()`` a ``redis-server`` without persistence. Each yields its
URL and a function giving the CPU seconds that server has used so far:

* PostgreSQL: the postmaster's own time plus its reaped children's (``cutime``/``cstime``: backends that
  exited), plus the time of every live child (backends, WAL writer, checkpointer, ...). A backend's time moves
  from the second sum to the first when it exits, so the total never goes down and counts nothing twice.
* Redis: the one ``redis-server`` process's time (its I/O threads are threads, counted in the process).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator

from testkit import free_port

from bench.common import CLK_TCK


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    out = []
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = _stat_fields(int(path.split("/")[2]))
        except (OSError, ValueError):
            continue
        if int(fields[1]) == pid:
            out.append(int(path.split("/")[2]))
    return out


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process, its reaped children and its live children (one level: PostgreSQL's)."""
    fields = _stat_fields(pid)
    total = sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    for child in _children(pid):
        try:
            total += sum(int(v) for v in _stat_fields(child)[11:13])
        except OSError:  # exited between the listing and the read: its time is in cutime at the next reading
            continue
    return total / CLK_TCK


def _pg_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise RuntimeError("PostgreSQL's server binaries are not installed (/usr/lib/postgresql/*/bin)")
    return os.path.dirname(found[-1])


@contextlib.contextmanager
def private_postgres() -> Iterator[tuple[str, Callable[[], float]]]:
    """A PostgreSQL cluster of its own; yields (SQLAlchemy URL, CPU seconds so far)."""
    bindir = _pg_bin()
    tmp = tempfile.mkdtemp(prefix="chatsync-bench-pg-")
    shutil.chown(tmp, "postgres", "postgres")
    data = os.path.join(tmp, "data")
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run(
        [*as_pg, f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            *as_pg,
            f"{bindir}/postgres",
            "-D",
            data,
            "-p",
            str(port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"unix_socket_directories={tmp}",
            "-c",
            "max_connections=200",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(
            [f"{bindir}/pg_isready", "-h", "127.0.0.1", "-p", str(port)], capture_output=True
        ).returncode:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("private PostgreSQL did not start")
            time.sleep(0.1)
        with open(os.path.join(data, "postmaster.pid")) as f:
            postmaster = int(f.readline())
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres", lambda: tree_cpu_seconds(postmaster)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def private_redis() -> Iterator[tuple[str, Callable[[], float]]]:
    """A redis-server of its own, no persistence; yields (bus URL, CPU seconds so far)."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout.strip() != b"PONG":
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("private Redis did not start")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0", lambda: tree_cpu_seconds(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
