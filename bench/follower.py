"""A benchmark subscriber's copy of one session, kept the way the TypeScript client keeps it, and checked.

The load generators of ``bench/capacity.py`` are raw WebSocket clients; each of their subscribers feeds every
``session.events`` item it gets to a :class:`Follower`, which applies it as ``client_js/src/reducers``
(``session.ts``, ``messages.ts``, ``text.ts``) does:

* a durable event carries its seq as the tracked id: one at or below the last applied seq is a repeat and is
  ignored, one past the next seq is a gap (the TypeScript client reads ``session.get`` again);
* a streaming message's text grows by the part of a ``text-delta`` past its current end; a delta past the end
  is held until the text reaches it; a delta for a message not created yet is held for when it is;
* a ``stream-snapshot`` of a message held as streaming replaces its text (then held deltas are placed); one of
  a message not held, or no longer streaming, is ignored;
* ``message-completed`` settles the text; later stream events for the message are ignored.

What a subscriber is promised (docs/sync.md, ``server/sync/delivery.py``): every durable event after its position
exactly once and in order, and every character of a streaming answer exactly once, in the snapshot or as a
delta. A :class:`Loss` is recorded when that promise is broken in a way the subscriber can see:

``id repeat`` / ``id gap``
    a durable event at or below the last seq applied, or past the next one;
``offset gap`` / ``offset repeat``
    a text delta that starts past the end of the text held, or lies wholly inside it;
``snapshot``
    a snapshot the client cannot use or that contradicts it: of a message it does not hold yet (the
    TypeScript client drops it), behind the text it holds, not agreeing with it, or whose offset is not its
    text's length;
``final text mismatch``
    when the message completes, the text assembled from snapshots and deltas (with nothing still held) is not
    the completed message's text; or that text is not what the model produced (``tokens`` stamped tokens, each
    digits and a space: ``bench/streaming.py``'s ``stamp`` provider).

Offsets count code points, as Python's ``len`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STREAM_TYPES = frozenset({"text-delta", "tool-call-start", "tool-call-delta", "stream-snapshot", "tool-call-progress"})


@dataclass(slots=True)
class Loss:
    kind: str
    session: str
    subscriber: int
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: session {self.session} subscriber {self.subscriber}: {self.detail}"


@dataclass(slots=True)
class _Message:
    streaming: bool
    text: str = ""
    created: bool = True  # False: only deltas seen so far (held until it is created)
    held: list[tuple[int, str]] = field(default_factory=list)


def model_text_ok(text: str, tokens: int) -> bool:
    """``text`` is what the ``stamp`` provider produces for ``tokens`` tokens."""
    parts = text.split(" ")
    return len(parts) == tokens + 1 and parts[-1] == "" and all(p.isdigit() for p in parts[:-1])


class Follower:
    """One subscriber's view of one session. ``last_seq``: the seq the subscription starts after (None: take the
    first durable event's). ``creates_messages``: False for a server that streams deltas with no
    ``message-created``/``message-completed`` around them (the bare reference broadcast); a message is then
    taken as created empty by its first delta and checked when its run finishes."""

    __slots__ = (
        "checked",
        "creates_messages",
        "deltas",
        "last_seq",
        "losses",
        "messages",
        "runs",
        "session",
        "snapshot_chars",
        "snapshot_tokens",
        "snapshots",
        "subscriber",
        "tokens",
    )

    def __init__(
        self, session: str, subscriber: int, tokens: int, last_seq: int | None = None, creates_messages: bool = True
    ) -> None:
        self.session, self.subscriber, self.tokens = session, subscriber, tokens
        self.last_seq = last_seq
        self.creates_messages = creates_messages
        self.messages: dict[str, _Message] = {}
        self.losses: list[Loss] = []
        self.deltas = 0  # text deltas received
        self.snapshots = 0  # stream-snapshots received
        self.snapshot_chars = 0  # characters the snapshots added to the text held
        self.snapshot_tokens = 0  # stamped tokens among them (each ends with a space): deltas not sent as deltas
        self.checked = 0  # answers whose final text was compared
        self.runs = 0  # run-finished seen

    def _loss(self, kind: str, detail: str) -> None:
        self.losses.append(Loss(kind, self.session, self.subscriber, detail))

    def apply(self, event_id: str | None, ev: dict[str, Any]) -> None:
        """One item of ``session.events``: its tracked id (None when untracked) and its event."""
        etype = ev["type"]
        if etype == "text-delta":
            self._delta(ev["messageId"], int(ev["offset"]), ev["delta"])
        elif etype == "stream-snapshot":
            self._snapshot(ev["messageId"], int(ev["offset"]), ev["text"])
        elif etype in STREAM_TYPES:
            pass  # tool-call previews: no text
        else:
            if event_id is not None:
                seq = int(event_id)
                if self.last_seq is not None:
                    if seq <= self.last_seq:
                        self._loss("id repeat", f"seq {seq} after {self.last_seq} ({etype})")
                        return  # ignored, as the TypeScript client ignores it
                    if seq != self.last_seq + 1:
                        self._loss("id gap", f"seq {seq} after {self.last_seq}: {self.last_seq + 1}..{seq - 1} missing")
                self.last_seq = seq
            self._durable(etype, ev)

    # --- durable events ----------------------------------------------------------------------------------

    def _durable(self, etype: str, ev: dict[str, Any]) -> None:
        if etype in ("message-created", "message-continued"):
            m = ev["message"]
            old = self.messages.get(m["id"])
            held = old.held if old is not None else []
            new = self.messages[m["id"]] = _Message(m["status"] == "streaming", m["content"])
            if new.streaming and held:
                self._place(m["id"], new, held)
        elif etype == "message-completed":
            m = ev["message"]
            msg = self.messages.get(m["id"])
            final = m["content"]
            if msg is not None and msg.streaming and m["role"] == "assistant":
                self._check(m["id"], msg, final)
            if m["role"] == "assistant" and m["status"] == "complete" and not model_text_ok(final, self.tokens):
                self._loss("final text mismatch", f"message {m['id']}: completed text is not the model's ({final!r})")
            self.messages[m["id"]] = _Message(False, final)
        elif etype == "run-finished":
            self.runs += 1
            if not self.creates_messages:
                for mid, msg in self.messages.items():
                    if msg.streaming:
                        self._check(mid, msg, None)
                        msg.streaming = False

    def _check(self, mid: str, msg: _Message, final: str | None) -> None:
        self.checked += 1
        ok = model_text_ok(msg.text, self.tokens) if final is None else msg.text == final
        if ok and not msg.held:
            return
        n = (
            len(msg.text)
            if final is None
            else next((i for i, (a, b) in enumerate(zip(msg.text, final)) if a != b), min(len(msg.text), len(final)))
        )
        self._loss(
            "final text mismatch",
            f"message {mid}: assembled {len(msg.text)} chars, final {'?' if final is None else len(final)}, "
            f"first difference at {n}, deltas still held at offsets {[o for o, _ in msg.held]}",
        )

    # --- stream events ------------------------------------------------------------------------------------

    def _delta(self, mid: str, offset: int, delta: str) -> None:
        self.deltas += 1
        msg = self.messages.get(mid)
        if msg is None:
            if self.creates_messages:  # not created yet as far as we know: kept for when it is
                self.messages[mid] = _Message(True, "", created=False, held=[(offset, delta)])
                return
            msg = self.messages[mid] = _Message(True, "")
        elif not msg.created:
            msg.held.append((offset, delta))
            return
        if not msg.streaming:
            return  # completed: its final text is authoritative
        length = len(msg.text)
        if offset + len(delta) <= length:
            self._loss("offset repeat", f"message {mid}: delta {offset}..{offset + len(delta)} with {length} held")
            return
        if offset > length:
            self._loss("offset gap", f"message {mid}: delta at {offset} with {length} held")
        self._place(mid, msg, [(offset, delta)])

    def _snapshot(self, mid: str, offset: int, text: str) -> None:
        self.snapshots += 1
        msg = self.messages.get(mid)
        if msg is None or not msg.created:
            self._loss("snapshot", f"message {mid}: snapshot at {offset} of a message not created yet (dropped)")
            return
        if not msg.streaming:
            return  # ignored, as the TypeScript client ignores it
        held = len(msg.text)
        if offset != len(text):
            self._loss("snapshot", f"message {mid}: offset {offset} for {len(text)} chars of text")
        if len(text) < held:
            self._loss("snapshot", f"message {mid}: snapshot at {len(text)} behind the {held} chars held")
        elif not text.startswith(msg.text):
            self._loss("snapshot", f"message {mid}: snapshot at {len(text)} disagrees with the {held} chars held")
        if len(text) > held:
            self.snapshot_chars += len(text) - held
            self.snapshot_tokens += text.count(" ", held)
        held_deltas, msg.held = msg.held, []
        msg.text = text
        self._place(mid, msg, held_deltas)

    def _place(self, mid: str, msg: _Message, incoming: list[tuple[int, str]]) -> None:
        """``text.ts``'s ``assemble``: append the part of each piece past the end; hold the ones past it."""
        pending = [*msg.held, *incoming]
        text, length = msg.text, len(msg.text)
        parts = [text]
        progressed = True
        while progressed and pending:
            progressed = False
            rest = []
            for offset, delta in pending:
                end = offset + len(delta)
                if end <= length:
                    continue
                if offset > length:
                    rest.append((offset, delta))
                    continue
                parts.append(delta[length - offset :])
                length = end
                progressed = True
            pending = rest
        msg.text = "".join(parts) if len(parts) > 1 else text
        msg.held = pending
