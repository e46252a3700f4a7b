"""``mcp.servers``: the MCP servers the caller may enable on a session, with their tools (docs/tools.md)."""

from __future__ import annotations

from ..domain import outputs
from ..rpc.context import Context
from ..rpc.registry import Router


def register(router: Router) -> None:
    @router.query("mcp.servers")
    async def servers(ctx: Context, _inp: None) -> outputs.McpServers:
        """``[{name, transport, approval, description, toolPolicies?, tools: [{name, description, policy}],
        error?}]``: never a command line, URL, header or environment variable (they may hold secrets)."""
        user = ctx.require_user()
        return {"servers": await ctx.services.mcp.catalog(user.id, user.name)}
