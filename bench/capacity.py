"""Many sessions at once: S sessions, 3 subscribers each, every session's user sending while answers stream.

    .venv/bin/python bench/capacity.py --sessions 50 100 200 [--seconds 20] [--send-every 4] [--tokens 60] [--runs 3]
    .venv/bin/python bench/capacity.py --server reference ...   # the same load on the bare broadcast() server
    .venv/bin/python bench/capacity.py --server chatsync before reference --before-root ../older-checkout ...
    .venv/bin/python bench/capacity.py --provider openai ...    # the OpenAI SDK against bench/fake_openai.py
    .venv/bin/python bench/capacity.py --replicas 2 ...         # two servers on a private PostgreSQL + Redis
    .venv/bin/python bench/capacity.py --profile DIR ...        # py-spy each server once (bench/profile_summary.py)
    .venv/bin/python bench/capacity.py --cpu-split ...          # chatsync's CPU per answer by part (bench/cpu_split.py)
    .venv/bin/python bench/capacity.py --pin ...                # servers on core 0, load generators on the others
    .venv/bin/python bench/capacity.py --history 400 ...        # in chats that already hold 400 messages

The server is a real `chatsync serve` process (SQLite, in-process bus) with ``bench/streaming.py``'s ``stamp``
provider at ``--pace`` tokens per second (30: the echo model's pace, a human-like one): it streams like the
echo model, but each token is the wall-clock time the provider yielded it, so latency is provider -> client.
Each session has 3 subscribers (raw WebSocket clients, ``bench/wsclient.py``), spread over ``--procs`` load
generator processes. The first subscriber of each session is also its user: every ``--send-every`` seconds
(jittered, first send at a random offset) it sends ``message.send`` on its own socket asking for ``--tokens``
tokens. A send during an answer is queued and sent when the answer ends, so queue events, run events and
text deltas mix. The load begins once every subscription has finished its first catch-up (the server's count
of them, on ``/metrics``). Each user sends ``seconds / send-every`` messages; a subscriber is done when it saw the
run of every one finish. Each session belongs to a user of its own, as S people would (``--users one``: one user
owns every session, with the per-user cap on runs raised to S; that user's rows then serialise every session's
writes that touch them, which no real user's sessions would).

Per S it prints: token latency p50/p99 (provider -> subscriber, text deltas), server CPU µs per delivered
event (all frames a subscriber got: deltas, queue and run events), the server's RSS at the end, losses, the
host's steal, and how long write transactions waited to begin (mean, and the share that waited over 100 ms,
from the server's ``/metrics``). Each subscriber keeps its copy of the session as the TypeScript client does
(``bench/follower.py``): it applies ``stream-snapshot`` (a subscriber that joins, or catches up, while an answer
streams gets the text so far in one, then the deltas past it), so deltas a snapshot carried are not missing. A
loss is what breaks the protocol's promise where a client sees it: an event id repeated or skipped, a text
delta past (or wholly inside) the text held, a snapshot the client cannot use, an answer whose text assembled
from snapshot and deltas is not the completed message's (or that is not what the model produced), or a run
that never finished. Each is printed with its kind, session, subscriber and offsets. Then
the largest S whose median p99 stayed <= ``--p99-ms`` with nothing lost and whose answers kept the schedule:
the last answer ended within 10% of when the bare broadcast's did. ``--server reference`` replays the same load
(same sessions, same sends, same token pace) on ``bench/reference_broadcast.py``: the ratio of the two, at the
same delivered rate, does not drift with the machine as the absolute figures do. Several ``--server`` values
run interleaved, run by run, the order rotating from one run to the next so that each server goes first as often as
the others (``before``: the server of another checkout, e.g. a git worktree of older code).

``--pin`` keeps the server on the first core and the load generators on the others, as a deployment's clients are on
other machines (with the three sharing both cores, the server also shares its caches with the clients;
docs/performance.md compares the two). ``--cpu-split`` prints, after each chatsync run, where its CPU went per
answer by part of the run path (the send, the token path, a step's end, fan-out, the transactions' parts), timed
inside the server (``bench/cpu_split.py``); the timing costs CPU itself, so runs with it are for the split, not for
the CPU per event.

``--history N`` gives each chatsync session N messages before the load (one-token questions and answers, sent
through the server and queued as a user's would be; not counted): every step of a run then reads and converts a
conversation that long, as in the chats people keep. The bare broadcast keeps no history, so its runs are the same.

``--provider openai`` streams every answer through chatsync's OpenAI adapter (the official SDK and its HTTP
client) from ``bench/fake_openai.py``, a local OpenAI-compatible server pacing the same stamped tokens: the
adapter's parsing is part of a real run's cost. ``--replicas 2`` runs two servers on a PostgreSQL cluster and a
Redis server of their own (``bench/infra.py``), a session's subscribers spread over both; it prints both
replicas' CPU per event, and PostgreSQL's and Redis's, read from their processes in /proc (nothing else uses
them, so nothing else is counted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import cpu_split
from bench.common import (
    ROOT,
    Server,
    cpu_seconds,
    interpreter,
    machine_ticks,
    pct,
    run_server,
    steal_share,
    summary,
)
from bench.idle_connections import rss_kib
from bench.infra import private_postgres, private_redis
from chatsync_client import TrpcClient

SUBSCRIBERS_PER_SESSION = 3
# ``--pin``: the server on the first core, the load generators on the others.
SERVER_CPUS = {0}


def load_cpus() -> set[int]:
    return (os.sched_getaffinity(0) - SERVER_CPUS) or set(SERVER_CPUS)


def load_proc(
    subs: list[tuple[str, str, int, int | None, str]],
    messages: int,
    send_every: float,
    tokens: int,
    creates_messages: bool,
    ready: mp.Queue,
    go: mp.Event,
    results: mp.Queue,
) -> None:  # type: ignore[type-arg]
    """One load-generator process: ``subs`` are (server URL, session id, the subscriber's index in its session
    (0: the one that sends), the session's last seq before the run, the token of the session's user), one
    subscriber each."""
    from bench.follower import Follower
    from bench.wsclient import subscribe_session

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    stats: dict = {"events": 0, "lat": [], "sent": 0, "send_errors": 0, "missing_runs": 0}
    lat = stats["lat"]
    followers: list[Follower] = []

    async def one(url: str, sid: str, index: int, last_seq: int | None, token: str) -> None:
        loop = asyncio.get_running_loop()
        started, finished = loop.create_future(), loop.create_future()
        follower = Follower(sid, index, tokens, last_seq, creates_messages)
        followers.append(follower)

        def on_text(raw: bytes) -> None:
            now = time.time_ns()
            msg = orjson.loads(raw)
            if msg.get("id") != 1:  # the reply to one of this user's sends
                if "error" in msg:
                    stats["send_errors"] += 1
                    stats.setdefault("first_error", msg["error"].get("message"))
                return
            if "error" in msg:  # the subscription itself failed (the server refused or ended it)
                stats["subscription_errors"] = stats.get("subscription_errors", 0) + 1
                stats.setdefault("first_error", msg["error"].get("message"))
                return
            result = msg["result"]
            kind = result.get("type")
            if kind == "started":
                started.set_result(None)
                return
            if kind != "data":
                return
            data = result["data"]
            tracked = "id" in result
            ev = data["data"] if tracked else data
            stats["events"] += 1
            follower.apply(result["id"] if tracked else None, ev)
            etype = ev["type"]
            if etype == "text-delta":
                lat.append((now - int(ev["delta"].split()[0])) / 1e6)
            elif etype == "run-finished" and follower.runs == messages and not finished.done():
                finished.set_result(None)

        ws = await subscribe_session(url, token, sid, on_text)
        await started
        ready.put(1)
        while not go.is_set():
            await asyncio.sleep(0.05)
        if index == 0:
            await asyncio.sleep(random.uniform(0, send_every))
            for n in range(messages):
                ws.send_text(
                    orjson.dumps(
                        {
                            "id": 2 + n,
                            "method": "mutation",
                            "params": {"path": "message.send", "input": {"sessionId": sid, "content": str(tokens)}},
                        }
                    ).decode()
                )
                stats["sent"] += 1
                if n < messages - 1:
                    await asyncio.sleep(send_every * random.uniform(0.75, 1.25))
        try:
            await asyncio.wait_for(finished, 300)
        except TimeoutError:
            stats["missing_runs"] += messages - follower.runs  # runs that never finished here
        assert ws.transport is not None
        ws.transport.close()

    async def main() -> None:
        await asyncio.gather(*(one(*sub) for sub in subs))
        for key in ("deltas", "snapshots", "snapshot_chars", "snapshot_tokens", "checked"):
            stats[key] = sum(getattr(f, key) for f in followers)
        stats["losses"] = [str(loss) for f in followers for loss in f.losses]
        results.put(stats)

    asyncio.run(main())


async def create_sessions(
    url: str, tokens: list[str], provider: str, pace: str, history: int = 0
) -> list[tuple[str, int]]:
    """A new session for each token (its user's), each with its last seq (where its subscribers' copies start).
    ``history``: each session first holds that many messages (see :func:`prefill`)."""
    out = []
    for token in tokens:
        async with TrpcClient(url, token) as c:
            sid = (await c.mutation("session.create", {"provider": provider, "model": pace}))["id"]
            out.append((sid, token))
    if history:
        await prefill(url, out, history)
    last: list[tuple[str, int]] = []
    for sid, token in out:
        async with TrpcClient(url, token) as c:
            last.append((sid, int((await c.query("session.get", {"sessionId": sid}))["lastEventId"])))
    return last


PREFILL_AT_ONCE = 50  # sessions filled at the same time
PREFILL_BATCH = 100  # messages sent to a session before waiting for its queue to empty (the bench's cap is 1000)


async def prefill(url: str, sessions: list[tuple[str, str]], history: int) -> None:
    """Give every session ``history`` messages before the load: ``history // 2`` one-token questions ("1") and
    their one-token answers, through the server as a user would (sent while a run goes on, they queue and are
    sent in turn). A session is done when it is idle with an empty queue and holds every message."""
    gate = asyncio.Semaphore(PREFILL_AT_ONCE)

    async def fill(sid: str, token: str) -> None:
        async with gate, TrpcClient(url, token) as c:
            left = history // 2
            while left:
                batch = min(left, PREFILL_BATCH)
                for _ in range(batch):
                    await c.mutation("message.send", {"sessionId": sid, "content": "1"})
                left -= batch
                while True:
                    state = await c.query("session.get", {"sessionId": sid, "messageLimit": 1})
                    if state["session"]["status"] == "idle" and not state["queue"]:
                        break
                    await asyncio.sleep(0.05)
            held, before = 0, None
            while True:  # count the conversation, a page at a time
                page = await c.query("message.list", {"sessionId": sid, "limit": 100, "before": before})
                held += len(page["items"])
                before = page["nextCursor"]
                if before is None:
                    break
            if held != history // 2 * 2:
                raise RuntimeError(f"session {sid} holds {held} messages, not {history // 2 * 2}")

    await asyncio.gather(*(fill(sid, token) for sid, token in sessions))


@contextlib.contextmanager
def fake_openai() -> Iterator[str]:
    """``bench/fake_openai.py`` in its own process; yields its base URL."""
    from testkit import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "fake_openai.py"), "--port", str(port)])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("fake OpenAI server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def servers(
    args: argparse.Namespace, kind: str, sessions: int, log_path: str | None = None, split_path: str | None = None
) -> Iterator[tuple[list[Server], dict[str, Callable[[], float]]]]:
    """The servers of one run (``kind``: chatsync, before or reference) and the CPU readers of its database
    and bus when they are private (two replicas); ``log_path``: the first server's log, with its deliveries'
    debug lines (catch-ups and stream-snapshots sent); ``split_path``: where the first server writes its CPU
    split (``bench/cpu_split.py``)."""
    with contextlib.ExitStack() as stack:
        cpus = SERVER_CPUS if args.pin else None
        if kind == "reference":
            reference = run_server(token="reference", command=("bench/reference_broadcast.py",), cpus=cpus)
            yield [stack.enter_context(reference)], {}
            return
        root = args.before_root if kind == "before" else ROOT
        env = {
            "CHATSYNC_MAX_QUEUE_LENGTH": "1000",
            "CHATSYNC_MAX_CONNECTIONS": str(sessions * 4 + 100),
        }
        if args.users == "one":
            # one load-generating user stands in for S users: the per-user cap on runs would measure itself
            env["CHATSYNC_MAX_ACTIVE_RUNS_PER_USER"] = str(sessions + 10)
        users = sessions if args.users == "per-session" else 0
        infra: dict[str, Callable[[], float]] = {}
        db_url = None
        if args.provider == "openai":
            env["OPENAI_BASE_URL"] = stack.enter_context(fake_openai())
            env["OPENAI_API_KEY"] = "bench"
        if args.replicas > 1:
            db_url, infra["postgres"] = stack.enter_context(private_postgres())
            env["CHATSYNC_BUS_URL"], infra["redis"] = stack.enter_context(private_redis())
        command = ("-m", "bench.streaming", "--serve")
        if log_path:
            env["CHATSYNC_LOG_DEBUG"] = "server.sync.delivery"
        if split_path:
            env["BENCH_CPU_SPLIT"] = split_path
        first = stack.enter_context(
            run_server(db_url, command=command, root=root, log_path=log_path, users=users, cpus=cpus, **env)
        )
        rest = [
            stack.enter_context(
                run_server(db_url, token=first.token, tokens=first.tokens, command=command, root=root, **env)
            )
            for _ in range(args.replicas - 1)
        ]
        yield [first, *rest], infra


def metric_lines(url: str, prefix: str) -> dict[str, float]:
    """The server's ``/metrics`` samples whose names start with ``prefix``: {name with labels: value}."""
    import urllib.request

    values: dict[str, float] = {}
    with urllib.request.urlopen(url + "/metrics", timeout=10) as res:
        for line in res.read().decode().splitlines():
            if line.startswith(prefix):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
    return values


def wait_caught_up(srvs: list[Server], subscriptions: int, timeout: float = 300) -> None:
    """Wait until the servers' subscriptions have all finished their first catch-up (the count of
    ``chatsync_resume_catchup_seconds``). A subscription is started before its catch-up reads the log; with
    thousands at once some reads would otherwise still be queued when the load begins, and such a subscriber
    would get an answer it joined before as created and completed from the log, never streaming."""
    deadline = time.monotonic() + timeout
    while True:
        done = sum(
            metric_lines(s.url, "chatsync_resume_catchup_seconds_count").get(
                "chatsync_resume_catchup_seconds_count", 0.0
            )
            for s in srvs
        )
        if done >= subscriptions:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {done:.0f} of {subscriptions} subscriptions caught up")
        time.sleep(0.05)


def write_waits(url: str) -> tuple[float, int, int]:
    """How long the server's write transactions waited to begin (``chatsync_db_pool_wait_seconds``, kind
    write: on SQLite their turn at the one writer, on PostgreSQL a pooled connection): the sum in seconds, the
    count, and how many waited over 100 ms."""

    values = {k: v for k, v in metric_lines(url, "chatsync_db_pool_wait_seconds_").items() if 'kind="write"' in k}
    total = values.get('chatsync_db_pool_wait_seconds_count{kind="write"}', 0.0)
    within = values.get('chatsync_db_pool_wait_seconds_bucket{kind="write",le="0.1"}', total)
    return values.get('chatsync_db_pool_wait_seconds_sum{kind="write"}', 0.0), int(total), int(total - within)


@contextlib.contextmanager
def split_file(enabled: bool) -> Iterator[str | None]:
    """Where a server writes its CPU split's snapshots, in a folder removed afterwards; None when not splitting."""
    if not enabled:
        yield None
        return
    with tempfile.TemporaryDirectory() as folder:
        yield os.path.join(folder, "split")


def one_run(
    args: argparse.Namespace, sessions: int, kind: str, profile: str | None = None, log_path: str | None = None
) -> dict:
    with (
        split_file(args.cpu_split and kind == "chatsync") as split_path,
        servers(args, kind, sessions, log_path, split_path) as (srvs, infra),
    ):
        tokens = srvs[0].tokens or [srvs[0].token] * sessions  # a user per session, or one for all
        provider = "stamp" if kind == "reference" or args.provider == "stamp" else args.provider
        history = args.history if kind != "reference" else 0  # the bare broadcast keeps nothing
        sids = asyncio.run(create_sessions(srvs[0].url, tokens, provider, str(args.pace), history))
        messages = max(1, round(args.seconds / args.send_every))
        per_proc: list[list[tuple[str, str, int, int | None, str]]] = [[] for _ in range(args.procs)]
        for i, (sid, last_seq) in enumerate(sids):
            for j in range(SUBSCRIBERS_PER_SESSION):  # a session's subscribers spread over the processes
                url = srvs[(i + j) % len(srvs)].url  # ... and over the replicas
                per_proc[(i + j) % args.procs].append((url, sid, j, last_seq, tokens[i]))
        ctx = mp.get_context("spawn")
        ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        procs = [
            ctx.Process(
                target=load_proc,
                args=(subs, messages, args.send_every, args.tokens, kind != "reference", ready, go, results),
            )
            for subs in per_proc
            if subs
        ]
        for p in procs:
            p.start()
            if args.pin:
                os.sched_setaffinity(p.pid, load_cpus())
        for _ in range(sessions * SUBSCRIBERS_PER_SESSION):
            ready.get(timeout=300)
        if kind != "reference":
            wait_caught_up(srvs, sessions * SUBSCRIBERS_PER_SESSION)
        spy = None
        if profile:
            spy = subprocess.Popen(
                [
                    *(
                        shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy"),
                        "record",
                        "-r",
                        "100",
                        "-d",
                        str(args.profile_seconds),
                        "-f",
                        "raw",
                    ),
                    *("-o", profile, "--pid", str(srvs[0].pid)),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        def cpu() -> tuple[float, dict[str, float]]:
            return sum(cpu_seconds(s.pid) for s in srvs), {k: f() for k, f in infra.items()}

        splits = []
        if split_path:
            splits.append(cpu_split.take(srvs[0].pid, split_path, 0))
        (cpu0, infra0), ticks0, load0, t0 = cpu(), machine_ticks(), os.getloadavg()[0], time.perf_counter()
        go.set()
        stats = [results.get(timeout=900) for _ in procs]
        elapsed = time.perf_counter() - t0
        (cpu1, infra1), steal = cpu(), steal_share(ticks0, machine_ticks())
        if split_path:
            splits.append(cpu_split.take(srvs[0].pid, split_path, 1))
        # Read after the CPU: the scrape of /metrics is the benchmark's work, not the load's.
        waits = [write_waits(s.url) for s in srvs] if kind != "reference" else []
        load = max(load0, os.getloadavg()[0])
        rss = sum(rss_kib(s.pid) for s in srvs)
        for p in procs:
            p.join(10)
        if spy is not None:
            spy.wait(args.profile_seconds + 60)
    events = sum(s["events"] for s in stats)
    lat = [x for s in stats for x in s["lat"]]
    expected_deltas = sessions * messages * args.tokens * SUBSCRIBERS_PER_SESSION
    lines = [line for s in stats for line in s["losses"]]
    missing = sum(s["missing_runs"] for s in stats)
    kinds: dict[str, int] = {}
    for line in lines:
        kinds[line.split(":", 1)[0]] = kinds.get(line.split(":", 1)[0], 0) + 1
    if missing:
        kinds["run missing"] = missing
    return {
        "events": events,
        "deltas": sum(s["deltas"] for s in stats),
        "expected_deltas": expected_deltas,
        "snapshots": sum(s["snapshots"] for s in stats),
        "snapshot_chars": sum(s["snapshot_chars"] for s in stats),
        "snapshot_tokens": sum(s["snapshot_tokens"] for s in stats),
        "checked": sum(s["checked"] for s in stats),
        "expected_checked": sessions * messages * SUBSCRIBERS_PER_SESSION,
        "losses": len(lines) + missing,
        "loss_kinds": kinds,
        "loss_lines": lines,
        "send_errors": sum(s["send_errors"] for s in stats),
        "subscription_errors": sum(s.get("subscription_errors", 0) for s in stats),
        "first_error": next((s["first_error"] for s in stats if "first_error" in s), None),
        "p50": pct(lat, 50),
        "p99": pct(lat, 99),
        "cpu_us": (cpu1 - cpu0) * 1e6 / max(events, 1),
        **{f"{k}_us": (infra1[k] - infra0[k]) * 1e6 / max(events, 1) for k in infra},
        "rate": events / elapsed,
        "span": elapsed,
        "rss_mib": rss / 1024,
        "write_wait_ms": sum(w[0] for w in waits) * 1000 / max(sum(w[1] for w in waits), 1) if waits else None,
        "write_wait_over_100ms": sum(w[2] for w in waits) / max(sum(w[1] for w in waits), 1) if waits else None,
        "steal": steal,
        "load": load,
        "split": splits,
        "answers": sessions * messages,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, nargs="+", default=[50, 100, 200])
    ap.add_argument("--seconds", type=float, default=20, help="how long each user keeps sending")
    ap.add_argument("--send-every", type=float, default=4.0, help="seconds between a user's messages (±25%%)")
    ap.add_argument("--tokens", type=int, default=60, help="tokens per answer")
    ap.add_argument(
        "--history",
        type=int,
        default=0,
        help="messages each chatsync session holds before the load (one-token questions and answers)",
    )
    ap.add_argument(
        "--users",
        choices=("per-session", "one"),
        default="per-session",
        help="each session its own user (default), or one user owning every session",
    )
    ap.add_argument("--pace", type=float, default=30, help="tokens per second of the model")
    ap.add_argument("--procs", type=int, default=2, help="load generator processes")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--p99-ms", type=float, default=50)
    ap.add_argument(
        "--server",
        nargs="+",
        choices=("chatsync", "before", "reference"),
        default=["chatsync"],
        help="servers to run, interleaved run by run (before: the checkout at --before-root)",
    )
    ap.add_argument("--before-root", default=os.environ.get("CHATSYNC_BENCH_BEFORE_ROOT"))
    ap.add_argument("--provider", choices=("stamp", "openai"), default="stamp")
    ap.add_argument("--replicas", type=int, default=1, help=">1: that many servers on a private PostgreSQL + Redis")
    ap.add_argument("--profile", metavar="DIR", help="py-spy each chatsync server's first run into DIR")
    ap.add_argument("--profile-seconds", type=int, default=30)
    ap.add_argument(
        "--cpu-split",
        action="store_true",
        help="print where chatsync's CPU went per answer, by part of the run path (bench/cpu_split.py; the timing "
        "adds to the CPU it measures: leave it out of the runs whose CPU per event is reported)",
    )
    ap.add_argument(
        "--pin",
        action="store_true",
        help="every server on the first core and the load generators on the others, as clients on other machines "
        "would be (one replica only)",
    )
    ap.add_argument("--print-losses", type=int, default=50, help="losses printed per run, each with its kind")
    ap.add_argument(
        "--log-deliveries",
        metavar="DIR",
        help="keep each chatsync server's log in DIR with a line per catch-up and per stream-snapshot sent "
        "(CHATSYNC_LOG_DEBUG=server.sync.delivery); the lines of a session with a loss are printed",
    )
    args = ap.parse_args()
    if "before" in args.server and not args.before_root:
        ap.error("--server before needs --before-root (or CHATSYNC_BENCH_BEFORE_ROOT)")
    if args.pin and (args.replicas > 1 or len(os.sched_getaffinity(0)) < 2):
        ap.error("--pin needs one replica and at least two cores")
    where = "1 process, SQLite" if args.replicas == 1 else f"{args.replicas} replicas, PostgreSQL + Redis"
    print(
        f"capacity: {' / '.join(args.server)} ({where}, provider {args.provider}), sessions {args.sessions} x "
        f"{SUBSCRIBERS_PER_SESSION} subscribers on {args.procs} processes, a send every {args.send_every:g} s for "
        f"{args.seconds:g} s, {args.tokens} tokens at {args.pace:g}/s per answer, {args.runs} runs interleaved"
        + (f", chats of {args.history} messages before the load" if args.history else "")
        + (f"; servers on CPU {sorted(SERVER_CPUS)}, load generators on CPUs {sorted(load_cpus())}" if args.pin else "")
        + f"; interpreter {interpreter()}"
    )
    best: dict[str, int | None] = dict.fromkeys(args.server)
    for sessions in args.sessions:
        runs: dict[str, list[dict]] = {kind: [] for kind in args.server}
        for n in range(args.runs):
            # Each run in a rotated order (the first server of one run goes last in the next), so that no server
            # always goes first: in sets run in one fixed order, the first server of each round read up to 5-8% more
            # CPU per event than the one after it (docs/performance.md).
            shift = n % len(args.server)
            for kind in args.server[shift:] + args.server[:shift]:
                profile = None
                if args.profile and not runs[kind] and kind != "reference":
                    os.makedirs(args.profile, exist_ok=True)
                    profile = os.path.join(args.profile, f"{kind}-S{sessions}-{args.provider}.txt")
                log_path = None
                if args.log_deliveries and kind != "reference":
                    os.makedirs(args.log_deliveries, exist_ok=True)
                    log_path = os.path.join(args.log_deliveries, f"{kind}-S{sessions}-{n + 1}.log")
                r = one_run(args, sessions, kind, profile, log_path)
                runs[kind].append(r)
                infra = "".join(f" {k}={r[k + '_us']:.1f}us/event" for k in ("postgres", "redis") if k + "_us" in r)
                kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["loss_kinds"].items())) or "none"
                print(
                    f"  S={sessions} {kind}: events={r['events']} deltas={r['deltas']}/{r['expected_deltas']} "
                    f"snapshots={r['snapshots']} (carrying {r['snapshot_tokens']} deltas, {r['snapshot_chars']} chars) "
                    f"answers checked={r['checked']}/{r['expected_checked']} "
                    f"losses={r['losses']} ({kinds}) send errors={r['send_errors']} "
                    f"subscription errors={r['subscription_errors']} {r['rate']:.0f} events/s "
                    f"last answer at {r['span']:.1f}s p50={r['p50']:.2f}ms p99={r['p99']:.2f}ms "
                    f"cpu={r['cpu_us']:.1f}us/event{infra} rss={r['rss_mib']:.0f}MiB "
                    f"steal={r['steal'] * 100:.1f}% load={r['load']:.1f}"
                    + (
                        f" write wait mean={r['write_wait_ms']:.1f}ms"
                        f" over 100ms={r['write_wait_over_100ms'] * 100:.0f}%"
                        if r["write_wait_ms"] is not None
                        else ""
                    )
                    + (" (profiled)" if profile else "")
                    + (f" first send error: {r['first_error']}" if r["first_error"] else ""),
                    flush=True,
                )
                if r["split"]:
                    cpu_split.report(r["split"][0], r["split"][1], r["answers"], lambda line: print(line, flush=True))
                for line in r["loss_lines"][: args.print_losses]:
                    print(f"    loss: {line}", flush=True)
                if len(r["loss_lines"]) > args.print_losses:
                    print(f"    ... and {len(r['loss_lines']) - args.print_losses} more", flush=True)
                if log_path and r["loss_lines"]:
                    lost_in = {line.split("session ", 1)[1].split()[0] for line in r["loss_lines"]}
                    with open(log_path, errors="replace") as f:
                        said = [line.rstrip() for line in f if any(f"session {sid} " in line for sid in lost_in)]
                    print(f"    the server's delivery lines for those sessions ({log_path}):", flush=True)
                    for line in said[: args.print_losses]:
                        print(f"      {line}", flush=True)
        ref_span = statistics.median(r["span"] for r in runs["reference"]) if "reference" in runs else None
        ref_cpu = statistics.median(r["cpu_us"] for r in runs["reference"]) if "reference" in runs else None
        for kind, rs in runs.items():
            lost = sum(r["losses"] for r in rs)
            cpu_med = statistics.median(r["cpu_us"] for r in rs)
            infra = "".join(
                f"; {k} CPU us/event {summary([r[k + '_us'] for r in rs])}"
                for k in ("postgres", "redis")
                if k + "_us" in rs[0]
            )
            ratio = f" ({cpu_med / ref_cpu:.2f}x the reference)" if ref_cpu and kind != "reference" else ""
            span = statistics.median(r["span"] for r in rs)
            on_time = ref_span is None or span <= 1.1 * ref_span
            print(
                f"S={sessions} {kind}: events/s {summary([r['rate'] for r in rs])}; last answer s "
                f"{summary([r['span'] for r in rs])}{'' if on_time else ' (late)'}; latency p50 ms "
                f"{summary([r['p50'] for r in rs])}, p99 ms {summary([r['p99'] for r in rs])}; server CPU us/event "
                f"{summary([r['cpu_us'] for r in rs])}{ratio}{infra}; RSS MiB {summary([r['rss_mib'] for r in rs])}; "
                f"lost {lost}; steal % {summary([r['steal'] * 100 for r in rs])}; "
                f"load {summary([r['load'] for r in rs])}",
                flush=True,
            )
            if lost == 0 and on_time and statistics.median(r["p99"] for r in rs) <= args.p99_ms:
                best[kind] = sessions
    for kind, s in best.items():
        print(
            f"{kind}: largest S on schedule (last answer within 10% of the reference's) with p99 <= "
            f"{args.p99_ms:g} ms and nothing lost: {s}"
        )


if __name__ == "__main__":
    main()
