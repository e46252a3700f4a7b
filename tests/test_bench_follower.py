"""The capacity benchmark's subscriber copy (``bench/follower.py``) applies items as the TypeScript client does and
counts as lost only what breaks the protocol's promise: a snapshot that carried the first part of an answer is
not a loss, a snapshot the client has to drop is."""

from __future__ import annotations

from typing import Any

import pytest

from bench.follower import Follower

pytestmark = pytest.mark.fast

TOKENS = ["1764150000000000001 ", "1764150000000000002 ", "1764150000000000003 "]
FINAL = "".join(TOKENS)


def created(mid: str) -> dict[str, Any]:
    message = {"id": mid, "role": "assistant", "content": "", "status": "streaming"}
    return {"type": "message-created", "message": message}


def completed(mid: str, content: str = FINAL) -> dict[str, Any]:
    message = {"id": mid, "role": "assistant", "content": content, "status": "complete"}
    return {"type": "message-completed", "message": message}


def delta(mid: str, i: int) -> dict[str, Any]:
    return {"type": "text-delta", "messageId": mid, "offset": sum(map(len, TOKENS[:i])), "delta": TOKENS[i]}


def snapshot(mid: str, n: int) -> dict[str, Any]:
    text = "".join(TOKENS[:n])
    return {"type": "stream-snapshot", "messageId": mid, "offset": len(text), "text": text}


def kinds(f: Follower) -> list[str]:
    return [loss.kind for loss in f.losses]


def test_a_snapshot_then_the_rest_as_deltas_is_the_whole_answer() -> None:
    f = Follower("s", 1, len(TOKENS), last_seq=4)
    for eid, ev in [("5", created("m")), ("5", snapshot("m", 2)), ("5", delta("m", 2)), ("6", completed("m"))]:
        f.apply(eid, ev)
    assert (f.losses, f.deltas, f.snapshots, f.checked) == ([], 1, 1, 1)
    assert (f.snapshot_chars, f.snapshot_tokens) == (len(TOKENS[0]) + len(TOKENS[1]), 2)


def test_a_delta_the_snapshot_covered_is_a_repeat() -> None:
    f = Follower("s", 1, len(TOKENS), last_seq=4)
    for eid, ev in [("5", created("m")), ("5", snapshot("m", 2)), ("5", delta("m", 1)), ("5", delta("m", 2))]:
        f.apply(eid, ev)
    f.apply("6", completed("m"))
    assert [loss.kind for loss in f.losses] == ["offset repeat"]


def test_a_snapshot_ahead_of_its_message_is_dropped_and_the_answer_is_wrong_until_it_completes() -> None:
    f = Follower("s", 2, len(TOKENS), last_seq=4)
    f.apply("4", snapshot("m", 2))
    f.apply("5", created("m"))
    f.apply("5", delta("m", 2))
    f.apply("6", completed("m"))
    assert kinds(f) == ["snapshot", "offset gap", "final text mismatch"]
    assert "held at offsets [" + str(len(TOKENS[0]) * 2) + "]" in str(f.losses[-1])


def test_event_ids_skipped_or_repeated_are_losses() -> None:
    f = Follower("s", 0, len(TOKENS), last_seq=4)
    f.apply("6", {"type": "queue-cleared"})
    f.apply("6", {"type": "queue-cleared"})
    assert kinds(f) == ["id gap", "id repeat"]


def test_a_completed_text_that_is_not_the_models_is_a_loss() -> None:
    f = Follower("s", 0, len(TOKENS), last_seq=0)
    f.apply("1", created("m"))
    for i in range(3):
        f.apply("1", delta("m", i))
    f.apply("2", completed("m", FINAL[:-1]))
    assert kinds(f) == ["final text mismatch", "final text mismatch"]


def test_without_message_events_an_answer_is_checked_when_its_run_finishes() -> None:
    f = Follower("s", 0, len(TOKENS), creates_messages=False)
    for i in (0, 2):
        f.apply("0", delta("m", i))
    f.apply("1", {"type": "run-finished", "runId": "m"})
    assert kinds(f) == ["offset gap", "final text mismatch"]
    assert f.runs == 1
