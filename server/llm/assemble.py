"""Shared stream assembly: what every provider parser does the same way.

Parsers feed provider chunks in as text fragments and tool-call fragments keyed by the provider's own key (OpenAI
``index``, Anthropic block ``index``, a running counter for Gemini/Ollama whose calls arrive whole). The assembler

- emits ``text-delta`` / ``tool-call-start`` / ``tool-call-delta`` live;
- buffers argument fragments that arrive before the call's name (some servers send the name late);
- finalises calls only when the step ends: a buffer that parses early may still be a prefix ("1" of "12");
- derives ``tool-calls`` from the presence of completed calls (a named ``tool_choice`` yields ``stop``) and
  downgrades to ``length``/``error`` when an argument buffer does not parse (vLLM truncation); in that case no
  call of the step is emitted, so nothing half-formed is executed;
- reports a stream that ended without a finish reason as an error.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable
from dataclasses import dataclass, field

from .errors import ErrorCode, ProviderError
from .types import (
    Finished,
    FinishReason,
    TextDelta,
    TextDone,
    ToolCallDelta,
    ToolCallEvent,
    ToolCallStart,
    TurnEvent,
    Usage,
)


@dataclass
class _PartialCall:
    key: Hashable
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # fragments seen before the name, not yet announced
    started: bool = False
    signature: str | None = None


def valid_arguments(text: str) -> bool:
    """True when ``text`` is a JSON object (the only arguments shape every provider accepts)."""
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


class TurnAssembler:
    """Accumulates one step's stream and produces the canonical events."""

    def __init__(self, provider_id: str) -> None:
        self.provider_id = provider_id
        self.text_parts: list[str] = []
        self.calls: dict[Hashable, _PartialCall] = {}
        self.usage = Usage()
        self.finish: FinishReason | None = None

    def text(self, delta: str) -> list[TurnEvent]:
        """A text fragment."""
        if not delta:
            return []
        self.text_parts.append(delta)
        return [TextDelta(delta=delta)]

    def tool_call(
        self,
        key: Hashable,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str | None = None,
        signature: str | None = None,
    ) -> list[TurnEvent]:
        """A (fragment of a) tool call; ``arguments`` fragments are concatenated in arrival order."""
        call = self.calls.get(key)
        if call is None:
            call = self.calls[key] = _PartialCall(key=key)
        call.id = call.id or id
        call.name = call.name or name
        call.signature = call.signature or signature
        events: list[TurnEvent] = []
        if arguments:
            call.arguments.append(arguments)
            call.pending.append(arguments)
        if not call.started and call.name:
            call.started = True
            events.append(ToolCallStart(call_id=self._call_id(call), name=call.name, index=self._index(call)))
        if call.started and call.pending:
            events.extend(ToolCallDelta(call_id=self._call_id(call), delta=d) for d in call.pending)
            call.pending.clear()
        return events

    def set_usage(self, input_tokens: int | None = None, output_tokens: int | None = None) -> None:
        """Replace (not add) the counts: every provider reports cumulative numbers."""
        self.usage = Usage(
            input_tokens=self.usage.input_tokens if input_tokens is None else input_tokens,
            output_tokens=self.usage.output_tokens if output_tokens is None else output_tokens,
        )

    def finish_with(self, reason: FinishReason) -> None:
        """Record the mapped finish reason (the last one wins)."""
        self.finish = reason

    def _index(self, call: _PartialCall) -> int:
        return list(self.calls).index(call.key)

    def _call_id(self, call: _PartialCall) -> str:
        if call.id is None:
            # Gemini often omits ids; generate one that is stable for the same step content so a replayed
            # stream produces the same id (vercel generates one too).
            digest = hashlib.sha1(f"{self._index(call)}:{call.name}".encode()).hexdigest()[:12]
            call.id = f"call_{digest}"
        return call.id

    def end(self) -> list[TurnEvent]:
        """The closing events: ``text-done``, finalised ``tool-call`` events, ``finished``.

        Raises ``ProviderError(missing_finish_reason)`` when the provider never said why it stopped.
        """
        if self.finish is None:
            raise ProviderError(
                ErrorCode.MISSING_FINISH_REASON, "Response stream ended without a finish reason.", retryable=True
            )
        events: list[TurnEvent] = []
        text = "".join(self.text_parts)
        if text:
            events.append(TextDone(text=text))
        calls = [c for c in self.calls.values() if c.name]
        finish = self.finish
        finals = [(c, "".join(c.arguments).strip() or "{}") for c in calls]
        if any(not valid_arguments(args) for _, args in finals):
            # A call cut off mid-arguments must never run; the step is reported as truncated or failed instead.
            finish = "length" if finish == "length" else "error"
        else:
            for call, args in finals:
                events.append(
                    ToolCallEvent(
                        id=self._call_id(call),
                        name=call.name or "",
                        arguments=args,
                        signature=call.signature,
                        signature_provider=self.provider_id if call.signature else None,
                    )
                )
            if finals and finish == "stop":
                finish = "tool-calls"
            if not finals and finish == "tool-calls":
                # Told "tool_calls" but no call arrived: nothing to run, the model is done.
                finish = "stop"
        events.append(Finished(finish_reason=finish, usage=self.usage))
        return events
