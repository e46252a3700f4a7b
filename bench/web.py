"""The web app in headless Chromium: opening a long session, streaming into it, and the JavaScript it ships.

    .venv/bin/python bench/web.py [--messages 1000] [--open-runs 5] [--stream-runs 3] [--words 2000]

Starts a server with the echo model at 4 ms a word (about 200 tokens/s with its overhead), fills one session
with ``--messages`` messages (half questions with a little markdown, half their answers), then in Chromium
(Debian's, through playwright-core; client_js/browser/app_bench.mjs):

* open: from navigation until the newest answer shows and the main thread is free again (interactive), and until
  every message `session.get` returned (the newest 200) is in the log;
* stream: one ``--words``-word answer arriving at 200 tokens/s in that session (paragraphs of 40 words and a
  fenced Python block of 8 lines every 200 words), with every main-thread task over 50 ms the browser reports
  (Long Tasks API);
* size: the built JavaScript the first load fetches, the CSS, and the JavaScript loaded only on demand (the
  syntax highlighter), raw and gzipped (level 9).

Prints the median and spread over runs. Needs the app built (bash scripts/setup.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, run_server, summary
from chatsync_client import TrpcClient

DIST = os.path.join(ROOT, "server", "web", "dist", "assets")
SCRIPT = os.path.join(ROOT, "client_js", "browser", "app_bench.mjs")


def question(i: int) -> str:
    return (
        f"Question {i}: how does **item {i}** compare with `item_{i + 1}`?\n\n"
        f"- first point about {i}\n- second point, with a [link](https://example.com/{i})"
    )


async def fill(url: str, token: str, exchanges: int) -> str:
    """A session with ``exchanges`` questions and answers: all queued at once, sent one after the other."""
    async with TrpcClient(url, token) as c:
        s = await c.mutation("session.create", {"title": "a long chat", "queuePaused": True})
        await asyncio.gather(
            *(
                c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": question(i)})
                for i in range(exchanges)
            )
        )
        await c.mutation("message.resumeQueue", {"sessionId": s["id"]})
        while True:
            snap = await c.query("session.get", {"sessionId": s["id"], "messageLimit": 1})
            if (
                not snap["queue"]
                and snap["session"]["status"] == "idle"
                and (snap["messagesBefore"] or 0) >= 2 * exchanges
            ):
                return s["id"]  # the newest message's ordinal: every answer is in
            await asyncio.sleep(0.5)


def sizes() -> tuple[int, int, int, int, int, int]:
    """JavaScript the first load fetches (the scripts index.html names), raw and gzipped; CSS; and the
    JavaScript loaded only on demand (the syntax highlighter), raw and gzipped."""
    with open(os.path.join(DIST, "..", "index.html")) as f:
        first = {os.path.basename(name) for name in re.findall(r'src="/assets/([^"]+\.js)"', f.read())}
    scripts = sorted(glob.glob(os.path.join(DIST, "*.js")))
    js = b"".join(open(p, "rb").read() for p in scripts if os.path.basename(p) in first)
    later = b"".join(open(p, "rb").read() for p in scripts if os.path.basename(p) not in first)
    css = b"".join(open(p, "rb").read() for p in sorted(glob.glob(os.path.join(DIST, "*.css"))))
    js_gz, css_gz, later_gz = (len(gzip.compress(b, 9)) for b in (js, css, later))
    return len(js), js_gz, len(css), css_gz, len(later), later_gz


def prepared(db: str, messages: int) -> tuple[str | None, str | None]:
    """The session and token of an earlier fill of ``db`` (``--db``), when it has as many messages."""
    try:
        with open(db + ".bench.json") as f:
            meta = json.load(f)
    except OSError:
        return None, None
    return (meta["session"], meta["token"]) if meta["messages"] == messages else (None, None)


def browse(db: str, sid: str, token: str, args: argparse.Namespace) -> subprocess.CompletedProcess[str]:
    # On a copy: the streaming runs add answers, and a kept --db must stay as filled.
    work = tempfile.mkdtemp()
    shutil.copy(db, os.path.join(work, "web.db"))
    with run_server(f"sqlite+aiosqlite:///{work}/web.db", token=token, CHATSYNC_ECHO_DELAY="0.004") as server:
        env = {
            **os.environ,
            "CHATSYNC_URL": server.url,
            "CHATSYNC_TOKEN": token,
            "BENCH_SESSION": sid,
            "BENCH_MESSAGES": str(args.messages),
            "BENCH_OPEN_RUNS": str(args.open_runs),
            "BENCH_STREAM_RUNS": str(args.stream_runs),
            "BENCH_STREAM_WORDS": str(args.words),
        }
        done = subprocess.run(
            ["node", SCRIPT], cwd=os.path.join(ROOT, "client_js"), env=env, capture_output=True, text=True, timeout=1800
        )
    shutil.rmtree(work, ignore_errors=True)
    if done.returncode != 0:
        sys.exit(f"app_bench.mjs failed:\n{done.stderr[-4000:]}")
    return done


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--open-runs", type=int, default=5)
    ap.add_argument("--stream-runs", type=int, default=3)
    ap.add_argument("--words", type=int, default=2000)
    ap.add_argument("--db", help="keep the filled database here and reuse it next time (default: a temporary one)")
    args = ap.parse_args()
    if not glob.glob(os.path.join(DIST, "*.js")):
        sys.exit("bench/web.py: the app is not built (bash scripts/setup.sh)")
    js, js_gz, css, css_gz, later, later_gz = sizes()
    print(
        f"size: JavaScript of the first load {js / 1024:.1f} KiB, gzipped {js_gz / 1024:.1f} KiB; CSS "
        f"{css / 1024:.1f} KiB, gzipped {css_gz / 1024:.1f} KiB; loaded on demand (highlighting) "
        f"{later / 1024:.1f} KiB, gzipped {later_gz / 1024:.1f} KiB"
    )
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or os.path.join(tmp, "web.db")
        sid, token = prepared(db, args.messages)
        if sid is None:
            # Filled with an instant echo model; the browser runs below get one at 200 tokens/s.
            with run_server(
                f"sqlite+aiosqlite:///{db}", CHATSYNC_ECHO_DELAY="0", CHATSYNC_MAX_QUEUE_LENGTH=str(args.messages)
            ) as filler:
                t0 = time.monotonic()
                sid, token = asyncio.run(fill(filler.url, filler.token, args.messages // 2)), filler.token
                print(f"filled a session with {args.messages} messages in {time.monotonic() - t0:.1f} s")
            with open(db + ".bench.json", "w") as f:
                json.dump({"session": sid, "token": token, "messages": args.messages}, f)
        done = browse(db, sid, token, args)
    runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    opens = [r for r in runs if r["kind"] == "open"]
    streams = [r for r in runs if r["kind"] == "stream"]
    print(
        f"open a {args.messages}-message session: interactive {summary([r['interactiveMs'] for r in opens])} ms, "
        f"the newest 200 messages in the log {summary([r['completeMs'] for r in opens])} ms; "
        f"tasks over 50 ms while opening: {[round(t) for r in opens for t in r['longTasks']]} ms"
    )
    rates = [r["tokens"] / r["seconds"] for r in streams]
    longest = [max(r["longTasks"], default=0.0) for r in streams]
    print(
        f"stream {args.words} tokens into it: {summary(rates)} tokens/s; tasks over 50 ms: "
        f"{sum(len(r['longTasks']) for r in streams)} in {len(streams)} runs "
        f"(longest {max(longest):.0f} ms)"
        if longest
        else "no streaming runs"
    )
    if opens:
        print(f"  interactive per run (ms): {[round(r['interactiveMs']) for r in opens]}")
    for r in streams:
        print(
            f"  streaming run: {r['tokens'] / r['seconds']:.0f} tokens/s, tasks over 50 ms "
            f"{[round(t) for t in r['longTasks']]} at {r.get('longTaskAt')} ms of {r['seconds'] * 1000:.0f}"
        )


if __name__ == "__main__":
    main()
