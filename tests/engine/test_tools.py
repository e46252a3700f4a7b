"""Tools: server tools (parallel / sequential), client tools round trip, approvals from any client."""

from __future__ import annotations

import asyncio
import json

import pytest
from engine_helpers import idle, subscribe

from chatsync_client import TrpcError
from server.tools import ToolError, ToolResult, calculate


def tool(name, executor="server", approval=False):
    return {
        "name": name,
        "description": name,
        "parameters": {"type": "object", "properties": {}},
        "executor": executor,
        "requiresApproval": approval,
    }


async def test_client_tool_round_trip(engine):
    async with engine.client() as a, engine.client() as b:
        s = await a.mutation("session.create", {"tools": [tool("get_weather", "client")]})
        st = await subscribe(a, s["id"])
        res = await a.mutation(
            "message.send", {"sessionId": s["id"], "content": 'Weather?\n/tool get_weather {"city": "Paris"}'}
        )
        ready = await st.until(lambda e: e["type"] == "tool-call-ready")
        assert ready["name"] == "get_weather" and json.loads(ready["arguments"]) == {"city": "Paris"}
        assert ready["executor"] == "client" and ready["requiresApproval"] is False
        await st.until(lambda e: e["type"] == "session-updated" and e["session"]["status"] == "requires-action")
        snap = await b.query("session.get", {"sessionId": s["id"]})
        assert snap["session"]["status"] == "requires-action"
        assert snap["run"]["id"] == res["runId"] and snap["run"]["status"] == "requires-action"
        assert [c["callId"] for c in snap["run"]["pendingToolCalls"]] == [ready["callId"]]
        call_msg = snap["messages"][-1]
        assert call_msg["finishReason"] == "tool-calls" and call_msg["toolCalls"][0]["id"] == ready["callId"]
        out = await b.mutation(
            "tool.submitOutputs",
            {"sessionId": s["id"], "toolOutputs": [{"callId": ready["callId"], "output": "sunny"}]},
        )
        assert out["resumed"] is True and out["messages"][0]["role"] == "tool"
        assert out["messages"][0]["toolCallId"] == ready["callId"]
        with pytest.raises(TrpcError) as err:  # a second output for the same call
            await a.mutation(
                "tool.submitOutputs",
                {"sessionId": s["id"], "toolOutputs": [{"callId": ready["callId"], "output": "rainy"}]},
            )
        assert err.value.code == "CONFLICT"
        await st.until(lambda e: e["type"] == "run-finished")
        snap = await idle(a, s["id"])
        assert [m["role"] for m in snap["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert snap["messages"][-1]["content"] == "Tool get_weather returned: sunny"
        assert len(st.of("run-started")) == 1  # the same run resumed
        result = st.of("tool-call-result")[0]
        assert result == {**result, "callId": ready["callId"], "output": "sunny", "isError": False}


async def test_approval_first_answer_wins(engine):
    clients = [engine.client() for _ in range(3)]
    for c in clients:
        await c.connect()
    try:
        a, b, c = clients
        s = await a.mutation("session.create", {"tools": [tool("calculator", approval=True)]})
        st = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": '/tool calculator {"expression": "6*7"}'})
        requested = await st.until(lambda e: e["type"] == "tool-approval-requested")
        await st.until(lambda e: e["type"] == "session-updated" and e["session"]["status"] == "requires-action")
        snap = await c.query("session.get", {"sessionId": s["id"]})
        assert [p["callId"] for p in snap["run"]["pendingApprovals"]] == [requested["callId"]]
        assert (
            await b.mutation("tool.approve", {"sessionId": s["id"], "callId": requested["callId"], "approved": True})
        ) == {"resolved": True}
        with pytest.raises(TrpcError) as err:
            await c.mutation("tool.approve", {"sessionId": s["id"], "callId": requested["callId"], "approved": False})
        assert err.value.code == "CONFLICT"
        await st.until(lambda e: e["type"] == "run-finished")
        resolved = st.of("tool-approval-resolved")
        assert [(e["callId"], e["approved"]) for e in resolved] == [(requested["callId"], True)]
        snap = await idle(a, s["id"])
        assert [m["content"] for m in snap["messages"] if m["role"] == "tool"] == ["42"]
        assert snap["messages"][-1]["content"] == "Tool calculator returned: 42"
    finally:
        for cl in clients:
            await cl.close()


async def test_denied_call_gets_a_result_saying_so(engine):
    async with engine.client() as a:
        s = await a.mutation("session.create", {"tools": [tool("calculator", approval=True)]})
        st = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": '/tool calculator {"expression": "1"}'})
        requested = await st.until(lambda e: e["type"] == "tool-approval-requested")
        await a.mutation(
            "tool.approve",
            {"sessionId": s["id"], "callId": requested["callId"], "approved": False, "reason": "not now"},
        )
        await st.until(lambda e: e["type"] == "run-finished")
        result = st.of("tool-call-result")[0]
        assert result["isError"] is True and "denied" in result["output"] and "not now" in result["output"]
        assert result["outcome"] == "denied"
        snap = await idle(a, s["id"])
        assert "denied" in snap["messages"][-1]["content"]
        assert [m["outcome"] for m in snap["messages"] if m["role"] == "tool"] == ["denied"]


@pytest.mark.parametrize("mode,expected", [("parallel", ["fast", "slow"]), ("sequential", ["slow", "fast"])])
async def test_tool_modes_are_observable_in_event_order(engine, mode, expected):
    async def wait(args):
        await asyncio.sleep(args["seconds"])
        return args["tag"]

    engine.services.tools.register("wait", wait)
    async with engine.client() as a:
        s = await a.mutation("session.create", {"tools": [tool("wait")], "toolMode": mode})
        st = await subscribe(a, s["id"])
        await a.mutation(
            "message.send",
            {
                "sessionId": s["id"],
                "content": '/tool wait {"seconds": 0.3, "tag": "slow"}\n/tool wait {"seconds": 0, "tag": "fast"}',
            },
        )
        await st.until(lambda e: e["type"] == "run-finished")
        ready = [e["callId"] for e in st.of("tool-call-ready")]
        results = st.of("tool-call-result")
        assert [r["output"] for r in results] == expected
        assert {r["callId"] for r in results} == set(ready) and len(ready) == 2
        # all calls were stored and announced before any of them ran
        types = [e["type"] for e in st.events]
        assert max(i for i, t in enumerate(types) if t == "tool-call-ready") < types.index("tool-call-result")
        snap = await idle(a, s["id"])
        # history pairs results with calls whatever order they finished in
        assert snap["messages"][-1]["content"] == "Tool wait returned: slow Tool wait returned: fast"


async def test_builtin_tools_and_unknown_tools(engine):
    async with engine.client() as a:
        s = await a.mutation("session.create", {"tools": [tool("current_time"), tool("calculator")]})
        st = await subscribe(a, s["id"])
        await a.mutation(
            "message.send",
            {
                "sessionId": s["id"],
                "content": '/tool current_time {}\n/tool calculator {"expression": "2**10"}\n/tool rm_rf {}',
            },
        )
        await st.until(lambda e: e["type"] == "run-finished")
        results = {r["callId"]: r for r in st.of("tool-call-result")}
        calls = {e["name"]: e["callId"] for e in st.of("tool-call-ready")}
        assert results[calls["calculator"]]["output"] == "1024"
        assert results[calls["current_time"]]["output"][:2] == "20"
        unknown = results[calls["rm_rf"]]
        assert unknown["isError"] is True and "Unknown tool" in unknown["output"]
        assert [results[calls[n]]["outcome"] for n in ("current_time", "calculator", "rm_rf")] == [
            "ok",
            "ok",
            "unknown-tool",
        ]


async def test_every_result_says_how_its_call_ended(engine):
    """A tool's failure, a call of a tool the server does not have, a client's error output and a call whose
    run was stopped are told apart by ``outcome``, in the event and in ``session.get`` (``isError`` follows)."""
    async with engine.client() as a:
        tools = [tool("calculator"), tool("ghost"), tool("ask", "client"), tool("never", "client")]
        s = await a.mutation("session.create", {"tools": tools})
        st = await subscribe(a, s["id"])
        content = '/tool calculator {"expression": "1/0"}\n/tool ghost {}\n/tool ask {}'
        await a.mutation("message.send", {"sessionId": s["id"], "content": content})
        await st.until(lambda e: e["type"] == "session-updated" and e["session"]["status"] == "requires-action")
        ask = next(e["callId"] for e in st.of("tool-call-ready") if e["name"] == "ask")
        outputs = [{"callId": ask, "output": "no such file", "isError": True}]
        await a.mutation("tool.submitOutputs", {"sessionId": s["id"], "toolOutputs": outputs})
        await st.until(lambda e: e["type"] == "run-finished")
        await idle(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": "/tool never {}"})
        await st.until(lambda e: e["type"] == "tool-call-ready" and e["name"] == "never")
        await st.until_type("session-updated", count=len(st.of("session-updated")) + 1)
        while (await a.query("session.get", {"sessionId": s["id"]}))["session"]["status"] != "requires-action":
            await st.until_type("session-updated", count=len(st.of("session-updated")) + 1)
        await a.mutation("run.abort", {"sessionId": s["id"]})
        await st.until(lambda e: e["type"] == "run-aborted")
        snap = await idle(a, s["id"])
        names = {e["callId"]: e["name"] for e in st.of("tool-call-ready")}
        events = {names[e["callId"]]: (e["outcome"], e["isError"]) for e in st.of("tool-call-result")}
        assert events == {
            "calculator": ("error", True),
            "ghost": ("unknown-tool", True),
            "ask": ("error", True),
            "never": ("cancelled", True),
        }
        stored = {m["toolCallId"]: m for m in snap["messages"] if m["role"] == "tool"}
        assert {names[cid]: m["outcome"] for cid, m in stored.items()} == {n: o for n, (o, _) in events.items()}
        assert "division by zero" in stored[next(c for c, n in names.items() if n == "calculator")]["content"]
        # every other message carries no outcome
        assert {m["outcome"] for m in snap["messages"] if m["role"] != "tool"} == {None}
        # the cancelled call is closed: a late output is refused and nothing more is stored
        never = next(c for c, n in names.items() if n == "never")
        with pytest.raises(TrpcError) as late:
            await a.mutation(
                "tool.submitOutputs", {"sessionId": s["id"], "toolOutputs": [{"callId": never, "output": "x"}]}
            )
        assert late.value.code == "CONFLICT"
        assert (await a.query("session.get", {"sessionId": s["id"]}))["messages"] == snap["messages"]


def test_a_result_is_an_error_for_every_outcome_but_ok():
    assert ToolResult("x").outcome == "ok" and ToolResult("x").is_error is False
    assert ToolResult("x", True).outcome == "error"
    assert ToolResult("x", outcome="denied").is_error is True
    assert ToolResult("x", True, "unknown-tool").outcome == "unknown-tool"


async def test_submit_outputs_errors(engine):
    async with engine.client() as a:
        s = await a.mutation("session.create", {"tools": [tool("calculator"), tool("ask", "client", True)]})
        st = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": "/tool ask {}"})
        ready = await st.until(lambda e: e["type"] == "tool-call-ready")
        for call_id, code in (("nope", "NOT_FOUND"), (ready["callId"], "PRECONDITION_FAILED")):
            with pytest.raises(TrpcError) as err:
                await a.mutation(
                    "tool.submitOutputs", {"sessionId": s["id"], "toolOutputs": [{"callId": call_id, "output": "x"}]}
                )
            assert err.value.code == code
        await a.mutation("tool.approve", {"sessionId": s["id"], "callId": ready["callId"], "approved": True})
        snap = await a.query("session.get", {"sessionId": s["id"]})
        assert snap["run"]["status"] == "requires-action"  # approved, now waiting for the client's output
        out = await a.mutation(
            "tool.submitOutputs",
            {"sessionId": s["id"], "toolOutputs": [{"callId": ready["callId"], "output": "oops", "isError": True}]},
        )
        assert out["resumed"] is True
        await st.until(lambda e: e["type"] == "run-finished")


def test_calculator_never_evaluates_code():
    assert calculate("(1 + 2) * 3 - 4 / 2") == 7
    assert calculate("-2 ** 2") == -4 and calculate("7 // 2 % 3") == 0
    for bad in ("__import__('os').system('true')", "x + 1", "(1).real", "[1][0]", "9 ** 9 ** 9", "1/0", "1e308*10"):
        with pytest.raises(ToolError):
            calculate(bad)
