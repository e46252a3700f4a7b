"""The server tool registry and the one place that runs a tool and turns anything it does into a result."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .. import metrics
from ..domain.models import ToolOutcome
from ..domain.outputs import ToolDefinitionInfo

log = logging.getLogger(__name__)

ToolFn = Callable[[dict[str, Any]], Any | Awaitable[Any]]


class ToolError(Exception):
    """Raised by a tool for a failure the model should read (its message becomes the error result)."""


@dataclass(frozen=True)
class ToolResult:
    """What a tool call gave: the output the model reads, whether it is an error, how it ended, and images."""

    output: str
    is_error: bool = False
    # How the call ended; ``is_error`` is what a model is told, true for every outcome but ``ok``.
    outcome: ToolOutcome = "ok"
    # Images the tool returned (MCP tools): ``{name, mediaType, size, data}`` with base64 ``data``, kept on the
    # tool message and given to the model as a user's images are.
    attachments: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.is_error and self.outcome == "ok":
            object.__setattr__(self, "outcome", "error")
        elif not self.is_error and self.outcome != "ok":
            object.__setattr__(self, "is_error", True)


def parse_arguments(arguments: str) -> dict[str, Any] | ToolResult:
    """A call's JSON arguments as an object, or the error result the model gets for them."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return ToolResult("The arguments are not valid JSON.", True)
    if not isinstance(args, dict):
        return ToolResult("The arguments must be a JSON object.", True)
    return args


@dataclass
class ServerTool:
    """A tool the server runs itself: its name, function, description and parameter schema."""

    name: str
    fn: ToolFn
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def definition(self) -> ToolDefinitionInfo:
        """A ``ToolDefinition`` (``domain.models``) a client can put in ``session.tools``."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "executor": "server",
            "requiresApproval": False,
        }


class ToolRegistry:
    """The server's built-in tools by name; :meth:`execute` runs one and turns anything it does into a result."""

    def __init__(self) -> None:
        self._tools: dict[str, ServerTool] = {}

    def register(
        self, name: str, fn: ToolFn, *, description: str = "", parameters: dict[str, Any] | None = None
    ) -> None:
        """Add (or replace) a tool. ``fn`` takes the parsed arguments object; sync or async."""
        self._tools[name] = ServerTool(name, fn, description, parameters or {"type": "object", "properties": {}})

    def get(self, name: str) -> ServerTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    async def execute(self, name: str, arguments: str, *, timeout: float) -> ToolResult:
        """Run tool ``name`` with JSON ``arguments``. Never raises (except cancellation): every failure is an
        error result the model can read, so one bad tool cannot fail the run. Timed by tool and outcome."""
        started = time.perf_counter()
        result = await self._execute(name, arguments, timeout)
        label = name if name in self._tools else "unknown"  # a model's made-up name is no label value
        metrics.TOOL_DURATION.labels(label, result.outcome).observe(time.perf_counter() - started)
        return result

    async def _execute(self, name: str, arguments: str, timeout: float) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(f"No server tool named {name!r} is registered.", True, "unknown-tool")
        args = parse_arguments(arguments)
        if isinstance(args, ToolResult):
            return args
        try:
            async with asyncio.timeout(timeout):
                value = tool.fn(args)
                if inspect.isawaitable(value):
                    value = await value
        except ToolError as exc:
            return ToolResult(str(exc), True)
        except TimeoutError:
            return ToolResult(f"The tool did not finish within {timeout:g} seconds.", True)
        except Exception as exc:  # a bug in a tool is reported to the model, and logged for us
            log.warning("server tool %s failed", name, exc_info=True)
            return ToolResult(f"The tool failed: {type(exc).__name__}: {exc}", True)
        return ToolResult(value if isinstance(value, str) else json.dumps(value))
