"""MCP tools in runs, against real MCP servers built with the SDK (``mcp_test_server.py``) over stdio and
Streamable HTTP: names, results (text, structured, image), progress, approvals from another device, timeouts,
Stop, a crashing server, a changed tool list, who may use which server, and secrets kept from clients. The SDK
is loaded only once a session to an MCP server is opened, not with the server."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import FAST, idle, subscribe, wait_for
from mcp_kit import ENV_SECRET, TOKEN_SECRET, http_server, log_lines, stdio, write_config
from mcp_test_server import LONG_NAME
from test_llm_convert_properties import check_anthropic, check_google, check_ollama, check_openai

from chatsync_client import TrpcError
from server.engine.history import build_request
from server.engine.mcp_tools import definitions as mcp_definitions
from server.llm import ModelInputs
from server.llm.convert import (
    COMPATIBLE,
    OPENAI,
    to_anthropic_request,
    to_google_request,
    to_ollama_request,
    to_openai_request,
)
from server.services.transitions import DENIED_RESULT
from server.store import repo
from server.store.models import User
from server.tools.mcp import names
from server.tools.mcp.names import exposed_name


def test_the_server_imports_without_the_mcp_sdk() -> None:
    """What ``chatsync serve`` imports does not load the SDK (about half of that import time otherwise): the
    sessions to MCP servers load it when the first one opens (the tests below)."""
    code = "import sys, server.cli, server.app, server.serve; print('mcp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.fixture
def mcp_log(tmp_path: Path) -> Path:
    return tmp_path / "mcp-calls.log"


@pytest.fixture
def mcp_url(mcp_log: Path) -> Iterator[str]:
    with http_server(mcp_log) as url:
        yield url


@pytest.fixture
async def mcp_engine(server_factory: Callable[..., Any], sqlite_url: str, tmp_path: Path, mcp_log: Path, mcp_url: str):
    servers = {
        "local": stdio(mcp_log, approval="auto"),
        "remote": {"url": mcp_url, "bearerToken": TOKEN_SECRET, "approval": "auto"},
        "askme": stdio(mcp_log, approval="ask"),
        "slow": stdio(mcp_log, approval="auto", timeoutSeconds=2),
        "bobs": stdio(mcp_log, users=["bob"], approval="auto"),
        "single": stdio(mcp_log, approval="auto", maxConcurrency=1),
        "down": {"url": "http://127.0.0.1:9/mcp", "approval": "auto"},
    }
    path = write_config(tmp_path / "mcp.json", servers)
    return await server_factory(sqlite_url, users=("alice", "bob"), mcp_servers=path, **FAST)


def tool_messages(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The session's tool messages by the name of their call (the latest call of each name)."""
    names = {c["id"]: c["name"] for m in snap["messages"] for c in m.get("toolCalls") or ()}
    return {names[m["toolCallId"]]: m for m in snap["messages"] if m["role"] == "tool"}


def results(st: Any) -> dict[str, dict[str, Any]]:
    """``tool-call-result`` events by the name of their call (the latest call of each name)."""
    names = {e["callId"]: e["name"] for e in st.of("tool-call-ready")}
    return {names[e["callId"]]: e for e in st.of("tool-call-result")}


async def send(client: Any, session_id: str, content: str) -> Any:
    return await client.mutation("message.send", {"sessionId": session_id, "content": content})


async def test_tools_over_stdio_and_http(mcp_engine: Any, mcp_log: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with mcp_engine.client() as a:
        s = await a.mutation("session.create", {"mcpServers": ["local", "remote"]})
        assert s["mcpServers"] == ["local", "remote"]
        st = await subscribe(a, s["id"])
        await send(
            a,
            s["id"],
            '/tool local__text {"text": "hi"}\n/tool remote__structured {"city": "Oslo"}\n'
            '/tool remote__progress {"steps": 3}',
        )
        await st.until_type("run-finished")
        snap = await idle(a, s["id"])
        got = results(st)
        assert got["local__text"]["output"] == "echo: hi" and not got["local__text"]["isError"]
        assert json.loads(got["remote__structured"]["output"]) == {"city": "Oslo", "celsius": 21.5}
        assert got["remote__progress"]["output"] == "3 steps done"
        assert tool_messages(snap)["local__text"]["content"] == "echo: hi"
        # The model got every result back (the echo model quotes them).
        assert "echo: hi" in snap["messages"][-1]["content"] and "3 steps done" in snap["messages"][-1]["content"]
        progress_call = next(c for c in st.of("tool-call-ready") if c["name"] == "remote__progress")["callId"]
        progress = [e for e in st.of("tool-call-progress") if e["callId"] == progress_call]
        assert [(e["progress"], e["total"], e["message"]) for e in progress] == [
            (1, 3, "step 1"),
            (2, 3, "step 2"),
            (3, 3, "step 3"),
        ]
        ready = {e["name"]: e for e in st.of("tool-call-ready")}
        assert ready["local__text"]["executor"] == "server" and ready["local__text"]["requiresApproval"] is False
        # The image: kept on the tool message, and given to the model as an image (echo names what it received).
        await send(a, s["id"], "/tool local__image {}")
        await st.until_type("run-finished", 2)
        snap = await idle(a, s["id"])
        image = tool_messages(snap)["local__image"]
        assert [(f["name"], f["mediaType"], f["size"]) for f in image["attachments"]] == [
            ("image-1.png", "image/png", 79)
        ]
        assert "[received image-1.png: image/png, 79 bytes]" in snap["messages"][-1]["content"]
        seen = json.dumps(st.events) + json.dumps(snap) + caplog.text
        assert ENV_SECRET not in seen and TOKEN_SECRET not in seen
    calls = [line[0] for line in log_lines(mcp_log)]
    assert sorted(calls) == ["image", "progress", "structured", "text"]  # each call made once


async def test_ask_is_approved_from_another_device_and_denial_reaches_the_model(mcp_engine: Any, mcp_log: Path) -> None:
    async with mcp_engine.client() as a, mcp_engine.client() as phone:
        s = await a.mutation("session.create", {"mcpServers": ["askme"]})
        st = await subscribe(a, s["id"])
        await send(a, s["id"], '/tool askme__text {"text": "approved"}')
        ready = await st.until(lambda e: e["type"] == "tool-call-ready")
        assert ready["requiresApproval"] is True
        await st.until(lambda e: e["type"] == "tool-approval-requested")
        assert log_lines(mcp_log) == []  # nothing runs before a device says yes
        await phone.mutation("tool.approve", {"sessionId": s["id"], "callId": ready["callId"], "approved": True})
        await st.until_type("run-finished")
        snap = await idle(a, s["id"])
        assert tool_messages(snap)["askme__text"]["content"] == "echo: approved"
        # The session's own setting: auto for this server, deny for one tool (not offered, never run).
        await a.mutation(
            "session.update",
            {"sessionId": s["id"], "mcpTools": {"askme": {"approval": "auto", "tools": {"structured": "deny"}}}},
        )
        await send(a, s["id"], '/tool askme__text {"text": "auto"}\n/tool askme__structured {"city": "Rome"}')
        await st.until_type("run-finished", 2)
        await idle(a, s["id"])
        got = results(st)
        assert got["askme__text"]["output"] == "echo: auto"
        assert got["askme__structured"]["isError"] is True
        # Back to ask, and denied.
        await a.mutation("session.update", {"sessionId": s["id"], "mcpTools": {}})
        await send(a, s["id"], '/tool askme__progress {"steps": 1}')
        asked = await st.until(lambda e: e["type"] == "tool-call-ready" and e["name"] == "askme__progress")
        await st.until(lambda e: e["type"] == "tool-approval-requested" and e["callId"] == asked["callId"])
        await phone.mutation("tool.approve", {"sessionId": s["id"], "callId": asked["callId"], "approved": False})
        await st.until_type("run-finished", 3)
        snap = await idle(a, s["id"])
        denied = results(st)["askme__progress"]
        assert denied["isError"] is True and denied["output"].startswith(DENIED_RESULT)
        resolved = [e for e in st.of("tool-approval-resolved") if e["callId"] == asked["callId"]]
        assert resolved[0]["approved"] is False and resolved[0]["decidedBy"]["userName"] == "alice"
    assert [line[0] for line in log_lines(mcp_log)] == ["text", "text"]


async def test_timeout_and_stop_cancel_the_call_and_the_server_stays_up(mcp_engine: Any, mcp_log: Path) -> None:
    async with mcp_engine.client() as a:
        s = await a.mutation("session.create", {"mcpServers": ["slow", "local"]})
        st = await subscribe(a, s["id"])
        await send(a, s["id"], '/tool slow__sleep {"seconds": 60}')
        await st.until_type("run-finished", timeout=30)
        await idle(a, s["id"])
        result = results(st)["slow__sleep"]
        assert result["isError"] is True and "did not finish within 2 seconds" in result["output"]
        await wait_for(lambda: _has(mcp_log, "cancelled"))  # the server was told (MCP cancellation)
        # Stop during a call: the run is aborted at once and the call cancelled at the server.
        await send(a, s["id"], '/tool local__sleep {"seconds": 60}')
        await wait_for(lambda: _count(mcp_log, "sleep", 2), timeout=20)
        await a.mutation("run.abort", {"sessionId": s["id"]})
        await st.until_type("run-aborted")
        await wait_for(lambda: _count(mcp_log, "cancelled", 2))
        sleeper = [line[1] for line in log_lines(mcp_log) if line[0] == "sleep"][-1]
        await a.mutation("message.resumeQueue", {"sessionId": s["id"]})
        await send(a, s["id"], '/tool local__text {"text": "still here"}')
        await st.until_type("run-finished", 2)
        assert tool_messages(await idle(a, s["id"]))["local__text"]["content"] == "echo: still here"
        assert [line[1] for line in log_lines(mcp_log) if line[0] == "text"] == [sleeper]  # the same process


async def test_sessions_are_shared_per_server_and_user(mcp_engine: Any, mcp_log: Path) -> None:
    """Two chats of alice use one process of the stdio server; bob's chat gets his own."""
    for user in ("alice", "alice", "bob"):
        async with mcp_engine.client(user) as c:
            s = await c.mutation("session.create", {"mcpServers": ["local"]})
            st = await subscribe(c, s["id"])
            await send(c, s["id"], f'/tool local__text {{"text": "{user}"}}')
            await st.until_type("run-finished", timeout=30)
            assert results(st)["local__text"]["output"] == f"echo: {user}"
    pids = [line[1] for line in log_lines(mcp_log)]
    assert len(pids) == 3 and pids[0] == pids[1] != pids[2]


async def test_idle_sessions_are_closed_and_open_again_on_use(
    server_factory: Callable[..., Any], sqlite_url: str, tmp_path: Path, mcp_log: Path
) -> None:
    path = write_config(tmp_path / "mcp.json", {"local": stdio(mcp_log, approval="auto")})
    live = await server_factory(sqlite_url, mcp_servers=path, mcp_idle_seconds=0.5, **FAST)
    async with live.client() as a:
        s = await a.mutation("session.create", {"mcpServers": ["local"]})
        st = await subscribe(a, s["id"])
        await send(a, s["id"], '/tool local__text {"text": "one"}')
        await st.until_type("run-finished", timeout=30)
        first = log_lines(mcp_log)[0][1]
        await wait_for(lambda: _has(mcp_log, "exit"), timeout=20)  # the idle session was closed, its process ended
        await send(a, s["id"], '/tool local__text {"text": "two"}')
        await st.until_type("run-finished", 2, timeout=30)
        assert results(st)["local__text"]["output"] == "echo: two"
    texts = [line[1] for line in log_lines(mcp_log) if line[0] == "text"]
    assert texts[0] == first != texts[1]


async def test_calls_to_a_server_are_bounded(mcp_engine: Any, mcp_log: Path) -> None:
    """``maxConcurrency: 1``: two parallel calls of one step run one after the other."""
    async with mcp_engine.client() as a:
        s = await a.mutation("session.create", {"mcpServers": ["single"]})
        st = await subscribe(a, s["id"])
        await send(a, s["id"], '/tool single__sleep {"seconds": 0.3}\n/tool single__sleep {"seconds": 0.3}')
        await st.until_type("run-finished", timeout=30)
        assert [r["output"] for r in st.of("tool-call-result")] == ["slept", "slept"]
    assert [line[0] for line in log_lines(mcp_log)] == ["sleep", "slept", "sleep", "slept"]


async def test_a_crashing_server_gives_an_error_result_and_is_restarted(mcp_engine: Any, mcp_log: Path) -> None:
    async with mcp_engine.client() as a:
        s = await a.mutation("session.create", {"mcpServers": ["local"]})
        st = await subscribe(a, s["id"])
        await send(a, s["id"], "/tool local__crash {}")
        await st.until_type("run-finished", timeout=20)
        snap = await idle(a, s["id"])
        crashed = results(st)["local__crash"]
        assert crashed["isError"] is True and "stopped during the call" in crashed["output"]
        assert snap["messages"][-1]["role"] == "assistant"  # the model answered the error: the history is valid
        await send(a, s["id"], '/tool local__text {"text": "again"}')
        await st.until_type("run-finished", 2, timeout=20)
        assert tool_messages(await idle(a, s["id"]))["local__text"]["content"] == "echo: again"
        pids = {line[0]: line[1] for line in log_lines(mcp_log)}
        assert pids["crash"] != pids["text"]  # a new process


async def test_list_changed_refreshes_the_tools(mcp_engine: Any) -> None:
    async with mcp_engine.client() as a:
        s = await a.mutation("session.create", {"mcpServers": ["remote"]})
        st = await subscribe(a, s["id"])
        await send(a, s["id"], "/tool remote__fresh {}")
        await st.until_type("run-finished")
        await idle(a, s["id"])
        assert results(st)["remote__fresh"]["isError"] is True  # not there yet
        await send(a, s["id"], "/tool remote__grow {}")
        await st.until_type("run-finished", 2)
        await idle(a, s["id"])

        async def listed() -> bool:
            servers = (await a.query("mcp.servers"))["servers"]
            remote = next(x for x in servers if x["name"] == "remote")
            return "fresh" in [t["name"] for t in remote["tools"]]

        await wait_for(listed)
        await send(a, s["id"], "/tool remote__fresh {}")
        await st.until_type("run-finished", 3)
        snap = await idle(a, s["id"])
        assert [m["content"] for m in snap["messages"] if m["role"] == "tool"][-1] == "fresh!"


async def test_a_down_server_never_holds_up_the_run(mcp_engine: Any) -> None:
    async with mcp_engine.client() as a:
        s = await a.mutation("session.create", {"mcpServers": ["down"]})
        st = await subscribe(a, s["id"])
        await send(a, s["id"], '/tool down__text {"text": "x"}')
        await st.until_type("run-finished", timeout=20)
        await idle(a, s["id"])
        assert results(st)["down__text"]["isError"] is True
        servers = (await a.query("mcp.servers"))["servers"]
        down = next(x for x in servers if x["name"] == "down")
        assert down["tools"] == [] and "not reachable" in down["error"]


async def test_users_see_only_their_servers_and_no_secrets(mcp_engine: Any) -> None:
    async with mcp_engine.client() as a, mcp_engine.client("bob") as b:
        reply = await a.query("mcp.servers")
        names = {x["name"] for x in reply["servers"]}
        assert names == {"local", "remote", "askme", "slow", "down", "single"}
        text = json.dumps(reply)
        assert ENV_SECRET not in text and TOKEN_SECRET not in text and "127.0.0.1" not in text
        assert "command" not in text and "headers" not in text
        local = next(x for x in reply["servers"] if x["name"] == "local")
        assert {t["name"] for t in local["tools"]} >= {"text", "image", "structured", "progress", "sleep"}
        assert local["transport"] == "stdio" and local["approval"] == "auto"
        assert "bobs" in {x["name"] for x in (await b.query("mcp.servers"))["servers"]}
        with pytest.raises(TrpcError) as err:
            await a.mutation("session.create", {"mcpServers": ["bobs"]})
        assert err.value.code == "BAD_REQUEST" and "bobs" in err.value.message
        s = await a.mutation("session.create", {"mcpServers": ["local"]})
        with pytest.raises(TrpcError) as err:
            await a.mutation("session.update", {"sessionId": s["id"], "mcpTools": {"nope": {"approval": "auto"}}})
        assert err.value.code == "BAD_REQUEST"
        with pytest.raises(TrpcError) as err:
            await a.mutation("session.update", {"sessionId": s["id"], "mcpTools": {"local": {"approval": "maybe"}}})
        assert err.value.code == "BAD_REQUEST"
        snap = await a.query("session.get", {"sessionId": s["id"]})
        assert snap["session"]["mcpServers"] == ["local"] and snap["session"]["mcpTools"] == {}


async def _has(log: Path, what: str) -> bool:
    return any(line[0] == what for line in log_lines(log))


async def _count(log: Path, what: str, n: int) -> bool:
    return sum(line[0] == what for line in log_lines(log)) >= n


NAME_RULES = {
    "openai": re.compile(r"^[A-Za-z0-9_-]{1,64}$"),
    "anthropic": re.compile(r"^[A-Za-z0-9_-]{1,64}$"),
    "google": re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$"),
    "ollama": re.compile(r"^[A-Za-z0-9_-]{1,64}$"),
}
GOOGLE_KEYWORDS = set(names._GOOGLE_KEYWORDS)


def _google_keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in a schema (property names excluded)."""
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        if key in ("properties", "$defs") and isinstance(value, dict):
            for sub in value.values():
                found |= _google_keywords(sub)
        elif isinstance(value, dict):
            found |= _google_keywords(value)
        elif isinstance(value, list):
            for sub in value:
                found |= _google_keywords(sub)
    return found


async def test_requests_with_mcp_tools_and_results_are_valid_for_every_target(mcp_engine: Any) -> None:
    """The stored history of MCP calls (a long dotted tool name, an image result) and the offered tools, turned
    into each provider's request as the run loop does: names within each provider's rule, schemas each accepts,
    the pairing rules of every target, and the image given as an image."""
    long_name = exposed_name("local", LONG_NAME, "echo")
    assert long_name != f"local__{LONG_NAME}" and NAME_RULES["openai"].match(long_name)
    async with mcp_engine.client() as a:
        s = await a.mutation("session.create", {"mcpServers": ["local"]})
        st = await subscribe(a, s["id"])
        await send(a, s["id"], f'/tool {long_name} {{"count": 3}}\n/tool local__image {{}}')
        await st.until_type("run-finished")
        await idle(a, s["id"])
        assert results(st)[long_name]["output"] == "3 records"
    services = mcp_engine.services
    async with services.db.read() as db:
        session = await repo.get_session(db, s["id"])
        rows = await repo.list_messages(db, s["id"])
        user = await db.get(User, session.owner_id)
    request = build_request(session, rows, inputs=ModelInputs(images=True))  # a model that takes images
    for target, convert in (
        ("openai", lambda r: to_openai_request(r, OPENAI)),
        ("compatible", lambda r: to_openai_request(r, COMPATIBLE)),
        ("anthropic", to_anthropic_request),
        ("google", to_google_request),
        ("ollama", to_ollama_request),
    ):
        offered = await services.mcp.offered(user.id, user.name, ["local"], {}, target)
        assert {t.tool for t in offered} >= {LONG_NAME, "image", "text"}
        body = convert(request.model_copy(update={"tools": mcp_definitions(offered)}))
        rule = NAME_RULES.get(target, NAME_RULES["openai"])
        if target in ("openai", "compatible"):
            check_openai(body["messages"], compatible=target == "compatible", mistral_ids=False)
            declared = [(t["function"]["name"], t["function"]["parameters"]) for t in body["tools"]]
            assert any(p["type"] == "image_url" for m in body["messages"] for p in _parts(m))
        elif target == "anthropic":
            check_anthropic(body)
            declared = [(t["name"], t["input_schema"]) for t in body["tools"]]
            assert any(p.get("type") == "image" for m in body["messages"] for p in _parts(m))
        elif target == "google":
            check_google(body)
            fns = body["config"]["tools"][0]["function_declarations"]
            declared = [(f["name"], f["parameters_json_schema"]) for f in fns]
            for _name, schema in declared:
                assert _google_keywords(schema) <= GOOGLE_KEYWORDS
            assert "inline_data" in repr(body["contents"])
        else:
            check_ollama(body["messages"])
            declared = [(t["function"]["name"], t["function"]["parameters"]) for t in body["tools"]]
        for name, schema in declared:
            assert rule.match(name), (target, name)
            assert schema["type"] == "object" and isinstance(schema["properties"], dict), (target, name)
            assert "$schema" not in json.dumps(schema)
        assert len({n for n, _ in declared}) == len(declared)


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []
