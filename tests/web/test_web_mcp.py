"""MCP tools in the web app: "Session settings" lists the MCP servers the user may use with their tools, and
enables one with "Auto" (its tools then run without asking); each tool card names the MCP server and the tool,
shows the progress the tool reports while it runs, its text result as text (markup in it is not rendered) and
an image result as an image. The server, read by the test's own client, is the judge."""

from __future__ import annotations

from typing import Any

from web_support import MCP_SERVER, Driver, WebServer


def test_mcp_tool_cards(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "mcp"})["id"]

    def check(label: str, data: dict[str, Any]) -> None:
        assert label == "saved"
        assert {"text", "image", "structured", "progress", "sleep"} <= set(data["listedTools"])
        assert data["policyBefore"] == "ask"  # the operator's default
        session = api.query("session.get", {"sessionId": sid})["session"]
        assert session["mcpServers"] == [MCP_SERVER] and session["mcpTools"][MCP_SERVER]["approval"] == "auto"

    seen = browser.run("mcpCards", check, token=web_server.tokens["alice"], sessionId=sid, server=MCP_SERVER)
    assert seen["problems"] == [], seen["problems"]
    assert seen["servers"] == [f"MCP server: {MCP_SERVER}"] * 3
    assert seen["progress"]["max"] == "3" and seen["progress"]["value"] in ("1", "2", "3")
    assert seen["progressGone"] == 0  # the bar goes with the result
    tool = {m["toolCallId"]: m["content"] for m in api.messages(sid) if m["role"] == "tool"}
    assert seen["text"] == 'echo: <b id="injected">bold</b>' and seen["text"] in tool.values()
    assert seen["injected"] == 0
    assert seen["imageWidth"] == 2
