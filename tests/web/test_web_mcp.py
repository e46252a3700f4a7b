"""MCP tools in the web app: each tool card names the MCP server and the tool, shows the progress the tool
reports while it runs, its text result as text (markup in it is not rendered) and an image result as an image.
The server, read by the test's own client, is the judge of what the tools returned."""

from __future__ import annotations

from web_support import MCP_SERVER, Driver, WebServer


def test_mcp_tool_cards(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "mcp", "mcpServers": [MCP_SERVER]})["id"]
    seen = browser.run("mcpCards", token=web_server.tokens["alice"], sessionId=sid, server=MCP_SERVER)
    assert seen["problems"] == [], seen["problems"]
    assert seen["servers"] == [f"MCP server: {MCP_SERVER}"] * 3
    assert seen["progress"]["max"] == "3" and seen["progress"]["value"] in ("1", "2", "3")
    assert seen["progressGone"] == 0  # the bar goes with the result
    tool = {m["toolCallId"]: m["content"] for m in api.messages(sid) if m["role"] == "tool"}
    assert seen["text"] == 'echo: <b id="injected">bold</b>' and seen["text"] in tool.values()
    assert seen["injected"] == 0
    assert seen["imageWidth"] == 2
