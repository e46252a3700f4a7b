"""MCP tools for the run loop: which a session offers its model, under which policy, and running one call.

One :class:`McpTools` per process (``Services.mcp``). Policies (docs/tools.md): the operator's ``deny`` — for
the server or one tool — is final; otherwise the session's setting for the tool, else the session's setting for
the server, else the operator's setting for the tool, else the operator's default. ``deny`` tools are not
offered; ``ask`` tools wait for a device's approval (``requiresApproval``); ``auto`` tools just run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import metrics
from ...domain.outputs import McpServerInfo
from ...protocol.errors import RpcError
from ..registry import ToolResult, parse_arguments
from . import results
from .config import McpConfig, Policy, ServerConfig
from .connections import Connection, McpUnavailable
from .names import SEPARATOR, description, exposed_name, provider_schema

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT as ProgressFn  # the SDK only where a session opens (connections)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OfferedTool:
    """An MCP tool as a session's model sees it."""

    name: str  # the exposed name
    server: str
    tool: str
    description: str
    parameters: dict[str, Any]
    policy: Policy

    def definition(self) -> dict[str, Any]:
        """A ``ToolDefinition`` (``domain.models``) for the run loop's registration of calls."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "executor": "server",
            "requiresApproval": self.policy == "ask",
            "mcp": {"server": self.server, "tool": self.tool},
        }


def policy_for(cfg: ServerConfig, choice: dict[str, Any] | None, tool: str) -> Policy:
    if cfg.approval == "deny" or cfg.tools.get(tool) == "deny":
        return "deny"
    choice = choice or {}
    chosen: Any = (choice.get("tools") or {}).get(tool) or choice.get("approval")
    if chosen in ("ask", "auto", "deny"):
        return chosen  # type: ignore[no-any-return]
    return cfg.tools.get(tool, cfg.approval)


class McpTools:
    """The process's MCP tools: which a session offers its model under which policy, and running a call."""

    def __init__(
        self, config: McpConfig, *, call_timeout: float, max_concurrency: int, idle_seconds: float = 600.0
    ) -> None:
        self.config = config
        self.call_timeout = call_timeout
        self.max_concurrency = max_concurrency
        self.idle_seconds = idle_seconds
        self._connections: dict[tuple[str, str], Connection] = {}
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._closed = False
        self._reaper: asyncio.Task[None] | None = None

    # --- who may use what ----------------------------------------------------------------------------------

    def visible(self, user_id: str, user_name: str) -> dict[str, ServerConfig]:
        return self.config.visible_to(user_id, user_name)

    def check_choice(self, user: Any, servers: list[str] | None, choices: dict[str, Any] | None) -> None:
        """``BAD_REQUEST`` unless every server named is configured and allowed for ``user``."""
        names = [*(servers or ()), *(choices or {})]
        if not names:
            return
        visible = self.visible(str(user.id), str(user.name))
        unknown = sorted({n for n in names if n not in visible})
        if unknown:
            raise RpcError("BAD_REQUEST", f"no MCP server named {', '.join(map(repr, unknown))} is available to you")

    # --- connections ---------------------------------------------------------------------------------------

    def connection(self, server: str, user_id: str) -> Connection:
        key = (server, user_id)
        conn = self._connections.get(key)
        if conn is None:
            if self._closed:
                raise McpUnavailable("The server is shutting down.")
            conn = self._connections[key] = Connection(server, self.config.servers[server])
            if self._reaper is None or self._reaper.done():
                self._reaper = asyncio.create_task(self._reap_idle(), name="mcp-idle")
        return conn

    async def _reap_idle(self) -> None:
        """Close the sessions no run used for ``idle_seconds`` (they open again on the next use)."""
        while self._connections and not self._closed:
            await asyncio.sleep(min(self.idle_seconds / 4, 30.0))
            for key in [key for key, conn in self._connections.items() if conn.idle_for() >= self.idle_seconds]:
                conn = self._connections[key]
                if conn.idle_for() < self.idle_seconds:  # used while an earlier one was being closed
                    continue
                del self._connections[key]
                log.info("MCP server %s: closing a session idle for %.0f s", key[0], conn.idle_for())
                await conn.close()

    def _slot(self, server: str) -> asyncio.Semaphore:
        slot = self._slots.get(server)
        if slot is None:
            limit = self.config.servers[server].max_concurrency or self.max_concurrency
            slot = self._slots[server] = asyncio.Semaphore(limit)
        return slot

    async def close(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            with suppress(asyncio.CancelledError):
                await self._reaper
        conns = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    # --- listing ---------------------------------------------------------------------------------------------

    async def catalog(self, user_id: str, user_name: str) -> list[McpServerInfo]:
        """The servers ``user`` may enable, each with its tools (or why they could not be listed)."""

        async def one(name: str, cfg: ServerConfig) -> McpServerInfo:
            entry: McpServerInfo = {
                "name": name,
                "transport": cfg.transport,
                "approval": cfg.approval,
                "description": cfg.description,
                "tools": [],
            }
            if cfg.tools:
                entry["toolPolicies"] = dict(cfg.tools)
            try:
                tools = await self.connection(name, user_id).tools()
            except McpUnavailable as exc:
                entry["error"] = str(exc)
                return entry
            entry["tools"] = [
                {
                    "name": t.name[:128],
                    "description": (t.description or "")[:1000],
                    "policy": policy_for(cfg, None, t.name),
                }
                for t in tools
            ]
            return entry

        visible = self.visible(user_id, user_name)
        return list(await asyncio.gather(*(one(n, c) for n, c in visible.items())))

    async def offered(
        self,
        user_id: str,
        user_name: str,
        servers: list[str] | None,
        choices: dict[str, Any] | None,
        target: str,
    ) -> list[OfferedTool]:
        """The tools of the session's enabled servers its model is offered, named and shaped for ``target``.
        A server that cannot be reached offers nothing this time (its calls get an error result)."""
        visible = self.visible(user_id, user_name)
        enabled = [s for s in dict.fromkeys(servers or ()) if s in visible]

        async def tools_of(server: str) -> list[OfferedTool]:
            cfg, choice = visible[server], (choices or {}).get(server) or {}
            try:
                tools = await self.connection(server, user_id).tools()
            except McpUnavailable:
                log.warning("MCP server %s: no tools offered (not reachable)", server)
                return []
            only = choice.get("only")
            out = []
            for t in tools:
                if only is not None and t.name not in only:
                    continue
                policy = policy_for(cfg, choice, t.name)
                if policy == "deny":
                    continue
                out.append(
                    OfferedTool(
                        name=exposed_name(server, t.name, target),
                        server=server,
                        tool=t.name,
                        description=description(t.description, server),
                        parameters=provider_schema(t.input_schema, target),
                        policy=policy,
                    )
                )
            return out

        offered: list[OfferedTool] = []
        for group in await asyncio.gather(*(tools_of(s) for s in enabled)):
            offered.extend(group)
        return offered

    # --- calling ---------------------------------------------------------------------------------------------

    async def execute(
        self, user_id: str, server: str, tool: str, arguments: str, progress: ProgressFn | None = None
    ) -> ToolResult:
        """Run one call. Never raises (except cancellation): a down server, a timeout or a bad answer is an
        error result the model reads. Timed by server (``mcp:<server>``) and outcome."""
        started = time.perf_counter()
        result = await self._execute(user_id, server, tool, arguments, progress)
        label = f"mcp:{server}" if server in self.config.servers else "unknown"
        metrics.TOOL_DURATION.labels(label, result.outcome).observe(time.perf_counter() - started)
        return result

    async def _execute(
        self, user_id: str, server: str, tool: str, arguments: str, progress: ProgressFn | None
    ) -> ToolResult:
        cfg = self.config.servers.get(server)
        if cfg is None:
            return ToolResult(f"The MCP server {server!r} is no longer configured.", True)
        args = parse_arguments(arguments)
        if isinstance(args, ToolResult):
            return args
        timeout = cfg.timeout_seconds or self.call_timeout
        try:
            async with asyncio.timeout(timeout), self._slot(server):
                raw = await self.connection(server, user_id).call(tool, args, progress)
        except TimeoutError:
            name = f"{server}{SEPARATOR}{tool}"
            return ToolResult(f"The MCP tool {name} did not finish within {timeout:g} seconds.", True)
        except McpUnavailable as exc:
            return ToolResult(str(exc), True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an MCP error answer, or a result that does not parse
            message = cfg.redact(str(getattr(exc, "message", "") or exc))[:2000]
            return ToolResult(f"The MCP tool failed: {message}", True)
        text, images, is_error = results.convert(raw)
        return ToolResult(text, is_error, attachments=tuple(images))


def load(settings: Any) -> McpTools:
    """The process's MCP tools from ``CHATSYNC_MCP_SERVERS`` (a bad file stops start-up, naming the problem)."""
    from .config import load as load_config

    return McpTools(
        load_config(settings.mcp_servers),
        call_timeout=settings.mcp_call_timeout_seconds,
        max_concurrency=settings.mcp_max_concurrent_calls,
        idle_seconds=settings.mcp_idle_seconds,
    )


def split_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of an unshortened ``<server>__<tool>`` name."""
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None
