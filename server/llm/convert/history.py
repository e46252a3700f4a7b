"""Provider-neutral repair of the canonical history.

``normalize`` turns any stored history — interrupted streams, crashes between a call and its result, results that
arrived after queued user messages, trimmed windows, ids reused or missing — into a sequence of turns where every
assistant turn with calls is *immediately* followed by one ``ResultsTurn`` holding exactly one result per call, in
call order. Every target renderer starts from this, so the pairing rules live in one place.

Rules, in the order a message is met:

- a ``tool`` message whose ``tool_call_id`` matches a still-open call of the latest assistant turn is that call's
  result (first match wins; a second result for the same call is an orphan);
- any other ``tool`` message is an orphan and is dropped (pydantic-ai ``_drop_orphaned_tool_results``);
- user/system messages met while calls are open are held back and placed after the results (invariant 5: nothing
  goes between a call turn and its results; a queued message goes after them);
- the calls are closed by the next assistant message or the end of the history; calls still without a result get a
  synthesised "interrupted" result (pydantic-ai ``_repair_dangling_tool_calls``);
- calls get a non-empty id unique in the conversation: a missing id becomes ``call_<msg>_<n>`` and a reused id gets a
  ``_<n>`` suffix, both derived from positions only, so conversion stays deterministic;
- assistant messages with neither text nor calls are dropped (OpenAI rejects ``content: null``).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..types import Attachment, ChatRequest, Message, ToolCall
from .slices import Sliced, at_once, sharing_loop

INTERRUPTED_RESULT = "The tool call was interrupted before a result was produced."
# A non-empty user turn where a target requires one (a history that starts with the assistant, or is empty).
ANCHOR_TEXT = "(conversation continues)"
# A model turn between tool results and user text, for targets that require strict alternation.
AFTER_RESULTS_TEXT = "(The answer to these results was interrupted.)"


@dataclass(frozen=True)
class SystemTurn:
    """A system instruction at its position in the conversation."""

    text: str


@dataclass(frozen=True)
class UserTurn:
    """One user message (never empty: text, attachments or both)."""

    text: str
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class AssistantTurn:
    """Assistant text and/or tool calls (ids already unique and non-empty)."""

    text: str
    calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    """The result paired with ``call`` (``synthetic`` when the history had none)."""

    call: ToolCall
    content: str
    is_error: bool = False
    synthetic: bool = False


@dataclass(frozen=True)
class ResultsTurn:
    """All results of the preceding ``AssistantTurn``, in call order."""

    results: tuple[ToolResult, ...]


Turn = SystemTurn | UserTurn | AssistantTurn | ResultsTurn


class _Normalizer:
    def __init__(self) -> None:
        self.out: list[Turn] = []
        self.held: list[Turn] = []
        self.open_calls: list[ToolCall] = []  # calls of the latest assistant turn, in order
        self.original_ids: list[str] = []  # the stored id of each open call (what results refer to)
        self.results: dict[int, ToolResult] = {}  # position in open_calls -> result
        self.seen_ids: set[str] = set()
        self.seen_order: list[str] = []  # seen_ids in the order they were given

    def _unique_id(self, raw: str, msg_index: int, call_index: int) -> str:
        base = raw.strip() or f"call_{msg_index}_{call_index}"
        candidate, n = base, 1
        while candidate in self.seen_ids:
            n += 1
            candidate = f"{base}_{n}"
        self.seen_ids.add(candidate)
        self.seen_order.append(candidate)
        return candidate

    def close_calls(self) -> None:
        """End the open tool-call turn: its results (a synthesised "interrupted" for each call without one),
        then the turns held behind it."""
        if self.open_calls:
            results = tuple(
                self.results.get(i) or ToolResult(call=call, content=INTERRUPTED_RESULT, is_error=True, synthetic=True)
                for i, call in enumerate(self.open_calls)
            )
            self.out.append(ResultsTurn(results=results))
        self.out.extend(self.held)
        self.open_calls, self.original_ids, self.results, self.held = [], [], {}, []

    def _emit(self, turn: Turn) -> None:
        (self.held if self.open_calls else self.out).append(turn)

    def add(self, index: int, msg: Message) -> None:
        if msg.role == "tool":
            for pos, original in enumerate(self.original_ids):
                if original == msg.tool_call_id and pos not in self.results:
                    self.results[pos] = ToolResult(
                        call=self.open_calls[pos], content=msg.content, is_error=msg.is_error
                    )
                    break
            # else: orphan (unknown id, already answered, or its call's turn is closed) -> dropped
            return
        if msg.role == "assistant":
            self.close_calls()
            calls = tuple(
                call.model_copy(update={"id": self._unique_id(call.id, index, n)})
                for n, call in enumerate(msg.tool_calls)
            )
            # Whitespace-only text counts as empty: Anthropic rejects blank text blocks.
            text = msg.content if msg.content.strip() else ""
            if not text and not calls:
                return
            self.out.append(AssistantTurn(text=text, calls=calls))
            self.open_calls = list(calls)
            self.original_ids = [c.id for c in msg.tool_calls]
            return
        if msg.role == "user" and msg.attachments:
            # Files alone are a message; blank text next to them is dropped (empty text blocks are refused).
            self._emit(UserTurn(msg.content if msg.content.strip() else "", msg.attachments))
            return
        if not msg.content.strip():
            return  # an empty user/system message carries nothing and is invalid for several providers
        self._emit(SystemTurn(msg.content) if msg.role == "system" else UserTurn(msg.content))


class _Resumable(NamedTuple):
    """Where normalizing some messages stood after the first ``len(messages)`` of them, with no call open: the
    turns so far and the call ids given. Everything the rest of a normalization depends on (the turns already
    made are never changed)."""

    messages: tuple[Message, ...]
    turns: tuple[Turn, ...]
    seen_ids: frozenset[str]


class ResumePoint:
    """Where the last normalization of messages beginning with ``first`` can be resumed, for as long as its
    owner holds it (:func:`resume_point`).

    A conversation's requests grow by a few messages a step and share their messages' objects
    (``engine.history.Conversations``, which holds one of these with each conversation it keeps), so a request's
    normalization resumes where the one before stopped: the messages before are compared (whole tuples, in C;
    identical objects compare at once) and only the new ones are added. The point lives exactly as long as its
    owner keeps the conversation: nothing here holds it."""

    __slots__ = ("__weakref__", "first", "state")

    def __init__(self, first: Message) -> None:
        self.first = first  # held, so that no other object can have its id while the point is registered
        self.state: _Resumable | None = None


_POINTS: dict[int, weakref.ref[ResumePoint]] = {}


def _registered(first: Message) -> ResumePoint | None:
    """The point someone holds for the object ``first``, if any (it holds ``first``: its id is no other's)."""
    found = _POINTS.get(id(first))
    return None if found is None else found()


def resume_point(first: Message) -> ResumePoint:
    """The point normalizations of messages beginning with the object ``first`` resume from (a new one, or the
    one registered for it while someone holds that). Registered by ``first``'s identity, weakly."""
    key = id(first)
    point = _registered(first)
    if point is None:
        point = ResumePoint(first)

        def gone(ref: weakref.ref[ResumePoint], key: int = key) -> None:
            if _POINTS.get(key) is ref:
                del _POINTS[key]

        _POINTS[key] = weakref.ref(point, gone)
    return point


def normalize(messages: Sequence[Message]) -> list[Turn]:
    """Repair ``messages`` into a pairing-valid turn sequence (see the module docstring for the rules).

    Where someone holds a :class:`ResumePoint` for the first message, the normalization resumes from it and
    leaves its own point there: the result is the same, and a step of a long chat adds only its new messages."""
    return at_once(_normalizing(tuple(messages)))


async def normalize_ahead(messages: Sequence[Message]) -> ResumePoint | None:
    """Normalize ``messages`` ahead of the provider's adapter, ``NORMALIZE_SLICE`` messages at a time with a turn
    of the event loop between, when the adapter's :func:`normalize` would otherwise add that many or more in one
    stretch (a long conversation's first step after a restart, or one no cache holds). Returns the point the
    adapter's normalization then resumes from: the caller holds it until the request is sent (nothing else may)."""
    messages = tuple(messages)
    if len(messages) < NORMALIZE_SLICE:
        return None
    point = resume_point(messages[0])
    done = point.state
    if (
        done is not None
        and len(messages) - len(done.messages) < NORMALIZE_SLICE
        and messages[: len(done.messages)] == done.messages
    ):
        return point  # the adapter's normalization has little left to add
    await sharing_loop(_normalizing(messages))
    return point


def _normalizing(messages: tuple[Message, ...]) -> Sliced[list[Turn]]:
    """:func:`normalize`, pausing (a ``yield``) after every ``NORMALIZE_SLICE`` messages it adds."""
    norm = _Normalizer()
    start = 0
    point = _registered(messages[0]) if messages else None
    resumed = None if point is None else point.state
    if resumed is not None and messages[: len(resumed.messages)] == resumed.messages:
        start = len(resumed.messages)
        norm.out, norm.seen_ids, norm.seen_order = list(resumed.turns), set(resumed.seen_ids), list(resumed.seen_ids)
    at = None  # (messages added, turns, call ids) after the last message with no call open after it
    for index in range(start, len(messages)):
        norm.add(index, messages[index])
        if not norm.open_calls:
            at = (index + 1, len(norm.out), len(norm.seen_order))
        if not (index - start + 1) % NORMALIZE_SLICE:
            yield
    if point is not None and at is not None:
        added, turns, ids = at
        point.state = _Resumable(messages[:added], tuple(norm.out[:turns]), frozenset(norm.seen_order[:ids]))
    norm.close_calls()
    return norm.out


# Messages normalized between two turns of the event loop by :func:`normalize_ahead`.
NORMALIZE_SLICE = 256


CONTINUE_TEXT = "Continue your previous answer exactly where it stopped, without repeating any of it."


def request_turns(request: ChatRequest, *, prefill: bool) -> list[Turn]:
    """``normalize(request.messages)``, and for a continuation (``options.continuation``) whose history ends with
    the answer's text: on a target without assistant prefill, a user turn after it asking to go on."""
    turns = normalize(request.messages)
    if request.options.continuation and not prefill and turns and isinstance(turns[-1], AssistantTurn):
        turns.append(UserTurn(CONTINUE_TEXT))
    return turns


def split_leading_system(turns: Sequence[Turn], system_prompt: str | None) -> tuple[list[str], list[Turn]]:
    """The system texts before the first non-system turn (request prompt first) and the remaining turns."""
    texts = [system_prompt] if system_prompt else []
    i = 0
    while i < len(turns):
        turn = turns[i]
        if not isinstance(turn, SystemTurn):
            break
        texts.append(turn.text)
        i += 1
    return texts, list(turns[i:])


def wrap_system(text: str) -> str:
    """A non-leading system instruction as user text, for targets without inline system messages."""
    return f"<system>\n{text}\n</system>"
