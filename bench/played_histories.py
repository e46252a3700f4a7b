"""Played-out histories (tests/llm/played.py) converted for every target, at scale.

    .venv/bin/python bench/played_histories.py [--histories 100000] [--seed 1]

Prints how many sessions were played, how many requests were built and checked against every target's rules,
and how long it took. Any invalid request stops it with the history's number (replayable with that seed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "llm")]

import test_played_histories  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--histories", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        sessions, checked = test_played_histories.play_on_every_core(tmp, args.histories, args.seed)
        took = time.perf_counter() - t0
    print(
        f"{sessions} histories played (trees forking with p={test_played_histories.BRANCHING}, "
        f"{os.cpu_count()} processes), {checked} requests checked against 6 targets each "
        f"(openai, compatible, strict template, anthropic, google, ollama), 0 invalid, in {took:.0f} s "
        f"({sessions / took:.0f} histories/s)"
    )


if __name__ == "__main__":
    main()
