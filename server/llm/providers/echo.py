"""The built-in offline ``echo`` model: the default when no provider key is configured.

It streams back the text of the last user message word by word, at ``delay`` seconds per word (default 0.03 s, a
realistic pace; 0 for tests and benchmarks). Lines of that message that start with a directive are not echoed;
they steer the model instead, so every path of the run loop can be exercised without a key:

``/tool NAME {json}``
    Call tool NAME with the given JSON object as arguments (``{}`` when omitted). Several ``/tool`` lines make
    parallel calls in one step. The step finishes with ``tool-calls``.
``/fail [retryable] [after=N] [times=N] [MESSAGE...]``
    Fail with an ``error`` event (code ``echo_failure``; ``retryable`` sets the flag). ``after=N`` streams the
    first N words before failing (a mid-stream failure, never retried). ``times=N`` fails only the first N
    attempts of the same request, so the retry wrapper can be seen to recover (echo's default retry policy
    does not retry; pass one to the constructor).
``/length [after=N]``
    Stream the text (only its first N words with ``after=N``), then finish with ``length`` instead of ``stop``.
``/describe``
    Add what the request asked for: ``[model M; system prompt: TEXT; tools: NAME, ...]`` (``none`` for an
    absent prompt or no tools), so a client can see its session settings reached the model.

A continuation (``run.continue``, or an answer going on after a restart) streams the rest of the text the last
user message asks for after the words the answer already has, and finishes with ``stop``.

Files attached to the last user message are named in the answer (``[received NAME: TYPE, N bytes]``).

When the conversation ends with tool results (a tool round trip), the model answers with a text naming each tool
and quoting its output, and finishes with ``stop``. Usage counts are whitespace-separated words.

Example user message::

    What's the weather?
    /tool get_weather {"city": "Paris"}
    /tool get_time {}
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shlex
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ..assemble import TurnAssembler
from ..convert.history import AssistantTurn, ResultsTurn, UserTurn, normalize
from ..errors import ProviderError
from ..retry import NO_RETRY, RetryPolicy
from ..types import ChatRequest, TurnEvent
from .base import Provider

DEFAULT_DELAY = 0.03
FAILURE_CODE = "echo_failure"
_WORDS = re.compile(r"\s*\S+")


@dataclass
class Directives:
    """What the last user message asks the echo model to do."""

    text: str = ""
    tools: list[tuple[str, str]] = field(default_factory=list)  # (name, JSON arguments)
    fail: bool = False
    fail_retryable: bool = False
    fail_after: int = 0
    fail_times: int | None = None
    fail_message: str = "echo model failure requested"
    length: bool = False
    length_after: int | None = None
    describe: bool = False


def parse_directives(message: str) -> Directives:
    """Split a user message into echoed text and directives. Raises ``ValueError`` for a malformed ``/tool``."""
    out = Directives()
    kept: list[str] = []
    for line in message.splitlines():
        stripped = line.strip()
        if stripped.startswith("/tool ") or stripped == "/tool":
            rest = stripped[len("/tool") :].strip()
            name, _, args = rest.partition(" ")
            if not name:
                raise ValueError("/tool needs a tool name")
            args = args.strip() or "{}"
            if not isinstance(json.loads(args), dict):  # json.JSONDecodeError is a ValueError
                raise ValueError(f"/tool {name}: arguments must be a JSON object")
            out.tools.append((name, args))
        elif stripped.startswith("/fail") and stripped[5:6] in ("", " "):
            out.fail = True
            words = shlex.split(stripped[5:]) if stripped[5:].strip() else []
            message_words: list[str] = []
            for word in words:
                if word == "retryable":
                    out.fail_retryable = True
                elif word.startswith("after=") and word[6:].isdigit():
                    out.fail_after = int(word[6:])
                elif word.startswith("times=") and word[6:].isdigit():
                    out.fail_times = int(word[6:])
                else:
                    message_words.append(word)
            if message_words:
                out.fail_message = " ".join(message_words)
        elif stripped == "/length" or stripped.startswith("/length "):
            out.length = True
            for word in stripped[len("/length") :].split():
                if word.startswith("after=") and word[6:].isdigit():
                    out.length_after = int(word[6:])
        elif stripped == "/describe":
            out.describe = True
        else:
            kept.append(line)
    out.text = "\n".join(kept).strip()
    return out


def describe_request(request: ChatRequest) -> str:
    """The model, system prompt and tool names ``request`` carries, in one bracketed line."""
    prompt = request.options.system_prompt or "none"
    tools = ", ".join(t.name for t in request.tools) or "none"
    return f"[model {request.options.model}; system prompt: {prompt}; tools: {tools}]"


class EchoProvider(Provider):
    """The offline echo model (see the module docstring for the directive syntax)."""

    provider_id = "echo"

    def __init__(self, *, delay: float = DEFAULT_DELAY, retry_policy: RetryPolicy | None = None) -> None:
        super().__init__(retry_policy=retry_policy or NO_RETRY)
        self.delay = delay
        self._failures: dict[str, int] = {}  # request digest -> failed attempts so far (for `times=N`)

    async def _pause(self) -> None:
        if self.delay > 0:
            await asyncio.sleep(self.delay)

    async def _attempt(self, request: ChatRequest) -> AsyncIterator[TurnEvent]:
        turns = normalize(request.messages)
        last = next((t for t in reversed(turns) if isinstance(t, (UserTurn, ResultsTurn))), None)
        asm = TurnAssembler(self.provider_id)
        if isinstance(last, ResultsTurn):
            directives = Directives(text=" ".join(f"Tool {r.call.name} returned: {r.content}" for r in last.results))
        else:
            try:
                directives = parse_directives(last.text if last else "")
            except ValueError as exc:
                raise ProviderError("invalid_request", f"echo directive error: {exc}") from exc
            if isinstance(last, UserTurn) and last.attachments:
                # Say what arrived, so a client can see its files reached the model.
                seen = " ".join(f"[received {a.name}: {a.media_type}, {len(a.data)} bytes]" for a in last.attachments)
                directives.text = f"{directives.text} {seen}".strip()
            if directives.describe:
                directives.text = f"{directives.text} {describe_request(request)}".strip()
        if directives.fail and self._should_fail(request, directives):
            fail_at = directives.fail_after
        else:
            fail_at = None
        words = _WORDS.findall(directives.text)
        last_turn = turns[-1] if turns else None
        prefix = last_turn.text if request.options.continuation and isinstance(last_turn, AssistantTurn) else None
        if prefix is not None:
            # Going on: the words after those the answer has, then a normal stop.
            done = directives.text[: len(prefix)] == prefix
            words = _WORDS.findall(directives.text[len(prefix) :]) if done else words
            directives.length, directives.tools = False, []
        elif directives.length and directives.length_after is not None:
            words = words[: directives.length_after]
        for i, word in enumerate(words):
            if fail_at is not None and i >= fail_at:
                break
            await self._pause()
            for event in asm.text(word):
                yield event
        if fail_at is not None:
            raise ProviderError(FAILURE_CODE, directives.fail_message, retryable=directives.fail_retryable)
        for index, (name, args) in enumerate(directives.tools):
            await self._pause()
            call_id = f"call_{uuid.uuid4().hex[:24]}"
            for event in asm.tool_call(index, id=call_id, name=name, arguments=args):
                yield event
        asm.finish_with("length" if directives.length else "stop")
        prompt_words = sum(len(m.content.split()) for m in request.messages)
        asm.set_usage(prompt_words, len(words))
        for event in asm.end():
            yield event

    def _should_fail(self, request: ChatRequest, directives: Directives) -> bool:
        if directives.fail_times is None:
            return True
        # The conversation as a provider reads it: an empty failed answer left in the history changes nothing,
        # so answering the same history again (a retry) counts as the same request.
        seen = request.model_dump_json(exclude={"messages"}) + repr(normalize(request.messages))
        key = hashlib.sha256(seen.encode()).hexdigest()
        failed = self._failures.get(key, 0)
        if failed >= directives.fail_times:
            self._failures.pop(key, None)
            return False
        self._failures[key] = failed + 1
        return True
