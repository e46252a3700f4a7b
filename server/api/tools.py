"""``tool.submitOutputs``, ``tool.approve``, and ``tool.builtins`` (the server's own tools a session can declare)."""

from __future__ import annotations

from ..domain import outputs
from ..rpc.context import Context
from ..rpc.registry import Router
from ..services.requests import request_key
from . import inputs


def register(router: Router) -> None:
    @router.mutation("tool.submitOutputs", inputs.SubmitOutputs)
    async def submit_outputs(ctx: Context, inp: inputs.SubmitOutputs) -> outputs.OutputsSubmitted:
        given = [{"callId": o.call_id, "output": o.output, "isError": o.is_error} for o in inp.tool_outputs]
        user = ctx.require_user()
        key = request_key(user.id, "tool.submitOutputs", inp)
        return await ctx.services.runs.submit_outputs(user, inp.session_id, given, key)

    @router.mutation("tool.approve", inputs.Approve)
    async def approve(ctx: Context, inp: inputs.Approve) -> outputs.Resolved:
        user = ctx.require_user()
        key = request_key(user.id, "tool.approve", inp)
        runs = ctx.services.runs
        return await runs.approve(user, inp.session_id, inp.call_id, inp.approved, inp.reason, key, ctx.device_name)

    @router.query("tool.builtins")
    async def builtins(ctx: Context, _inp: None) -> list[outputs.ToolDefinitionInfo]:
        """The definitions of the tools this server runs itself, ready to put in ``session.tools``."""
        ctx.require_user()
        registry = ctx.services.tools
        return [tool.definition() for name in registry.names() if (tool := registry.get(name)) is not None]
