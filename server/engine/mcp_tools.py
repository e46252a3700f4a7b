"""MCP tools in the run loop (docs/tools.md): offered with each step, run by the run's owner.

* :func:`context` (in a step's transaction) reads what the offer needs — the owner, the session's enabled
  servers and settings, the provider —; :func:`offer` (outside it, abortable: it may connect) lists the tools
  under the provider's names and rules, for the request and for the registration of the step's calls (``ask``
  tools are registered as needing approval, like any ``requiresApproval`` tool).
* :func:`execute` runs an open server call: a built-in tool of the registry, else an MCP tool found by its name
  among the session's offered tools (looked up again, so a run resumed in another process finds it too), else
  the registry's "no such tool" result. Progress notifications go out as ephemeral ``tool-call-progress``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, select

from ..domain import events
from ..llm import ToolDefinition
from ..store import repo
from ..store.models import User
from ..store.prepared import Executor
from ..store.session_row import SessionFields
from ..tools import ToolResult
from ..tools.mcp import OfferedTool

if TYPE_CHECKING:
    from .run_context import RunContext


_USER_NAME = select(User.name).where(User.id == bindparam("uid"))


@dataclass(frozen=True)
class McpContext:
    """What offering a session's MCP tools needs, read in the step's transaction: the owner, the
    servers the session enables with its per-tool choices, and the provider whose naming rules apply."""

    user_id: str
    user_name: str
    servers: list[str]
    choices: dict[str, Any]
    provider: str


async def context(db: Executor, session: SessionFields) -> McpContext | None:
    """What :func:`offer` needs, or None when the session enables no MCP server."""
    if not session.mcp_servers:
        return None
    found = (await db.execute(_USER_NAME, {"uid": session.owner_id})).first()
    name = str(found[0]) if found is not None else ""
    servers, choices = list(session.mcp_servers), dict(session.mcp_tools or {})
    return McpContext(session.owner_id, name, servers, choices, session.provider)


async def offer(run: RunContext, ctx: McpContext | None) -> list[OfferedTool]:
    if ctx is None or run.mcp is None:
        return []
    try:
        target = run.provider(ctx.provider).input_target
    except Exception:  # the provider cannot be built: the step fails with its error anyway
        target = ctx.provider
    return await run.mcp.offered(ctx.user_id, ctx.user_name, ctx.servers, ctx.choices, target)


def definitions(offered: list[OfferedTool]) -> tuple[ToolDefinition, ...]:
    return tuple(ToolDefinition(name=t.name, description=t.description, parameters=t.parameters) for t in offered)


async def execute(run: RunContext, session_id: str, call: Any) -> ToolResult:
    timeout = run.settings.tool_timeout_seconds
    if run.tools.get(call.name) is not None or run.mcp is None:
        return await run.tools.execute(call.name, call.arguments, timeout=timeout)
    async with run.db.read() as s:
        session = await repo.get_session(s, session_id)
        ctx = await context(s, session) if session is not None else None
    found = next((t for t in await offer(run, ctx) if t.name == call.name), None)
    if found is None or ctx is None:
        return await run.tools.execute(call.name, call.arguments, timeout=timeout)

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        await run.publish_ephemeral(
            session_id, events.tool_call_progress(session_id, call.id, progress, total, message)
        )

    return await run.mcp.execute(ctx.user_id, found.server, found.tool, call.arguments, progress)
