"""What an upload and a download cost a real `chatsync serve`: throughput and resident memory, per backend.

    .venv/bin/python bench/files.py [--mb 100] [--repeat 5] [--postgres]

For each storage backend (directory, database) one server takes ``--repeat`` uploads of ``--mb`` MB (distinct
content each time, so none is stored only once) through ``POST /files`` and streams each back with
``GET /files/{id}``. Prints MB/s each way and how far the server's peak resident memory (VmHWM) rose above its
resident memory before the first upload, median ± half the range.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from testkit import process_memory as memory  # noqa: E402

from bench.common import pg_database, run_server, summary  # noqa: E402

CHUNK = 1024 * 1024
BOUNDARY = "benchfiles"


def body(mb: int, tag: int):
    yield (f"--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"f{tag}.bin\"\r\n\r\n").encode()
    block = bytearray(os.urandom(CHUNK))
    for i in range(mb):
        block[0], block[1] = tag % 256, i % 256
        yield bytes(block)
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def measure(url: str, token: str, pid: int, mb: int, repeat: int) -> None:
    up, down, growth = [], [], []
    auth = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=auth, timeout=600) as http:
        http.post("/files", files={"file": ("warm.txt", b"warm up")}).raise_for_status()
        base = memory(pid)["VmRSS"]
        for tag in range(repeat):
            start = time.perf_counter()
            reply = http.post(
                "/files", content=body(mb, tag), headers={"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
            )
            reply.raise_for_status()
            up.append(mb / (time.perf_counter() - start))
            start, size = time.perf_counter(), 0
            with http.stream("GET", f"/files/{reply.json()['id']}") as got:
                for chunk in got.iter_raw():
                    size += len(chunk)
            assert size == mb * CHUNK
            down.append(mb / (time.perf_counter() - start))
            growth.append((memory(pid)["VmHWM"] - base) / 2**20)
    print(f"  upload MB/s   {summary(up)}")
    print(f"  download MB/s {summary(down)}")
    print(f"  peak RSS growth MiB {summary(growth)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    limits = {
        "CHATSYNC_MAX_FILE_BYTES": str(args.mb * CHUNK),
        "CHATSYNC_MAX_USER_FILE_BYTES": str((args.repeat + 1) * args.mb * CHUNK),
    }
    for backend in ("directory", "database"):
        with tempfile.TemporaryDirectory() as tmp:
            files_url = str(Path(tmp) / "files") if backend == "directory" else "database:"
            print(f"{'postgres' if args.postgres else 'sqlite'} / {backend}: {args.repeat} x {args.mb} MB")
            if args.postgres:
                with pg_database() as db, run_server(db, CHATSYNC_FILES_URL=files_url, **limits) as server:
                    measure(server.url, server.token, server.pid, args.mb, args.repeat)
            else:
                with run_server(CHATSYNC_FILES_URL=files_url, **limits) as server:
                    measure(server.url, server.token, server.pid, args.mb, args.repeat)


if __name__ == "__main__":
    main()
