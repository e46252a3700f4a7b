"""Server-sent events as the provider APIs stream them: each event's ``data`` parsed as one JSON object.

The adapters read an SDK's raw response through this instead of its typed stream objects: building those cost
more CPU per token than the rest of a turn (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson


async def sse_json(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of a server-sent event stream's ``data`` fields, one per event, until ``[DONE]``.

    Per the SSE format: an event ends at a blank line, its ``data:`` lines are joined with newlines, a line
    starting with ``:`` is a comment, one space after the colon is not part of the value; other fields
    (``event:``, ``id:``, ``retry:``) carry nothing the adapters use (an Anthropic event's name is its data's
    ``type`` too). ``[DONE]``, Chat Completions' last event, ends the stream."""
    data: list[str] = []
    async for line in lines:
        if line:
            if line.startswith("data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(" ") else value)
            continue
        if not data:
            continue
        payload, data = "\n".join(data), []
        if payload.startswith("[DONE]"):
            return
        chunk = orjson.loads(payload)
        if isinstance(chunk, dict):
            yield chunk
    if data and not data[0].startswith("[DONE]"):  # the last event, when the stream ended without a blank line
        chunk = orjson.loads("\n".join(data))
        if isinstance(chunk, dict):
            yield chunk
