"""What share of a server's busy time each layer takes, from a py-spy profile (``bench/capacity.py --profile``).

    .venv/bin/python bench/profile_summary.py PROFILE.txt [--top 25]

``PROFILE.txt`` is ``py-spy record -f raw`` output: one line per distinct stack, frames root first separated
by ``;``, then the sample count. A sample belongs to a layer when any frame of its stack is in it (inclusive
share: the layers nest, so the shares add to more than 100%); then the frames with the largest inclusive
share, by function and file.

py-spy shows what runs inside one of SQLAlchemy's greenlets (its bridge between async and sync code) as a stack
of its own, cut off from the coroutine that awaits it: those samples count for SQLAlchemy and the driver, not
for the run loop or service that made the statement, so the shares of the layers above SQLAlchemy are lower
bounds.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

# (layer, a pattern its frames' "function (file:line)" text matches), in the order they are printed.
LAYERS = [
    ("run loop (engine/run.py)", r"server/engine/run\.py"),
    ("send / queue services", r"server/services/(queue|runs|requests)\.py"),
    ("unit of work + lease + transitions", r"server/services/(uow|lease|transitions)\.py"),
    ("SQLAlchemy, all", r"sqlalchemy/"),
    ("SQLAlchemy ORM", r"sqlalchemy/orm/"),
    ("SQLAlchemy Core / engine", r"sqlalchemy/(engine|sql|pool|dialects)/"),
    ("sqlite3 / inline driver", r"server/store/(sqlite_inline|prepared)\.py"),
    ("store (repo, event log)", r"server/store/(repo|eventlog)\.py"),
    ("fan-out (sync/)", r"server/sync/"),
    ("transport (rpc/: calls in, frames out)", r"server/rpc/"),
    ("provider (llm/, the bench's stamp provider, SDK)", r"server/llm/|^_attempt \(.*bench/streaming|openai/|httpx"),
    ("pydantic", r"pydantic"),
    ("  the send (RunService.send)", r"^RunService\.send "),
    ("  a step's end (RunLoop._finish_step)", r"^RunLoop\._finish_step "),
    ("  the token path (RunLoop._consume: provider, partial text, delta, fan-out)", r"^RunLoop\._consume "),
    ("  socket writes of frames (_write_fd)", r"^_write_fd "),
]

# Samples that are not work: a thread pool's worker waiting for a job (py-spy shows it as running), and with
# ``--native`` the event loop waiting in epoll.
_IDLE_WORKER = re.compile(r"^_worker \(.*concurrent/futures/thread\.py")
_IDLE_LEAF = re.compile(r"^epoll_p?wait ")


def parse(path: str) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line:
                continue
            frames, _, count = line.rpartition(" ")
            stack = tuple(frames.split(";"))
            if _idle(stack):
                continue
            stacks[stack] += int(count)
    return stacks


def _idle(stack: tuple[str, ...]) -> bool:
    if _IDLE_LEAF.match(stack[-1]):
        return True
    in_pool = any(_IDLE_WORKER.match(f) for f in stack)
    return in_pool and not any(f.startswith("_WorkItem.run ") for f in stack)


def _short(frame: str) -> str:
    m = re.match(r"(.*) \((.*?):\d+\)$", frame)
    if not m:
        return frame
    func, file = m.groups()
    for marker in ("site-packages/", "/server/", "/bench/"):
        if marker in file:
            file = (marker.strip("/") + "/" if marker != "site-packages/" else "") + file.split(marker, 1)[1]
            break
    return f"{func} ({file})"


def summarize(path: str, top: int) -> str:
    stacks = parse(path)
    total = sum(stacks.values())
    out = [f"{path}: {total} samples (busy time only: idle pool workers and epoll waits left out)"]
    for name, pattern in LAYERS:
        rx = re.compile(pattern)
        n = sum(c for stack, c in stacks.items() if any(rx.search(f) for f in stack))
        out.append(f"  {n / total * 100:5.1f}%  {name}")
    inclusive: Counter[str] = Counter()
    for stack, c in stacks.items():
        for frame in {_short(f) for f in stack}:
            inclusive[frame] += c
    out.append("  top frames (inclusive):")
    for frame, c in inclusive.most_common(top):
        out.append(f"  {c / total * 100:5.1f}%  {frame}")
    own: Counter[str] = Counter()
    for stack, c in stacks.items():
        own[_short(stack[-1])] += c
    out.append("  top frames (self):")
    for frame, c in own.most_common(top):
        out.append(f"  {c / total * 100:5.1f}%  {frame}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profiles", nargs="+")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    for path in args.profiles:
        print(summarize(path, args.top))


if __name__ == "__main__":
    main()
