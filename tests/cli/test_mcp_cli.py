"""`chatsync mcp list|add|remove` and the MCP configuration file: its shape, its errors, its secrets."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys

import pytest
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from server.tools.mcp import McpConfigError, policy_for, results
from server.tools.mcp.config import load, parse
from server.tools.mcp.names import exposed_name, provider_schema


def run(args, path):
    env = {**os.environ, "CHATSYNC_MCP_SERVERS": str(path)}
    return subprocess.run(
        [sys.executable, "-m", "server.cli", "mcp", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_add_list_remove(tmp_path):
    path = tmp_path / "conf" / "mcp.json"
    out = run(["add", "files", "--approval", "auto", "--env", "TOKEN=env-secret", "--", "prog", "--flag"], path)
    assert out.returncode == 0, out.stderr
    out = run(
        ["add", "web", "--url", "https://mcp.example/mcp", "--bearer-token", "tok-secret", "--users", "alice,bob"],
        path,
    )
    assert out.returncode == 0, out.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds secrets
    data = json.loads(path.read_text())
    assert data["servers"]["files"] == {
        "command": ["prog", "--flag"],
        "env": {"TOKEN": "env-secret"},
        "users": ["*"],
        "approval": "auto",
    }
    assert data["servers"]["web"]["bearerToken"] == "tok-secret" and data["servers"]["web"]["users"] == ["alice", "bob"]
    listed = run(["list", "--json"], path)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["files"]["transport"] == "stdio" and rows["web"]["transport"] == "http"
    assert rows["web"]["users"] == ["alice", "bob"] and rows["files"]["approval"] == "auto"
    for text in (listed.stdout, run(["list"], path).stdout):
        assert "secret" not in text and "mcp.example" not in text and "prog" not in text
    assert run(["remove", "files"], path).returncode == 0
    assert set(json.loads(path.read_text())["servers"]) == {"web"}
    missing = run(["remove", "files"], path)
    assert missing.returncode == 1 and "no MCP server named 'files'" in missing.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "bad__name", "--", "prog"], "never two '_'"),
        (["add", "both", "--url", "http://x/mcp", "--", "prog"], 'either "command"'),
        (["add", "none"], 'either "command"'),
        (["add", "ftp", "--url", "ftp://x/mcp"], "http:// or https://"),
        (["add", "env", "--env", "NOVALUE", "--", "prog"], "NAME=VALUE"),
    ],
)
def test_bad_entries_are_refused_and_change_nothing(tmp_path, args, message):
    path = tmp_path / "mcp.json"
    assert run(["add", "keep", "--", "prog"], path).returncode == 0
    before = path.read_text()
    out = run(args, path)
    assert out.returncode == 1 and message in out.stderr
    assert path.read_text() == before


def test_a_bad_file_stops_start_up_with_its_problem(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"servers": {"x": {"url": "http://h/mcp", "approval": "sometimes"}}}))
    with pytest.raises(McpConfigError, match="approval"):
        load(str(path))
    path.write_text("{not json")
    with pytest.raises(McpConfigError, match="not readable JSON"):
        load(str(path))
    assert load(str(tmp_path / "absent.json")).servers == {}


def test_policies_the_operators_deny_is_final():
    config = parse(
        {
            "servers": {
                "s": {"command": ["p"], "approval": "ask", "tools": {"rm": "deny", "ls": "auto"}},
                "off": {"command": ["p"], "approval": "deny"},
            }
        }
    )
    s, off = config.servers["s"], config.servers["off"]
    assert policy_for(s, None, "cat") == "ask" and policy_for(s, None, "ls") == "auto"
    assert policy_for(s, {"approval": "auto"}, "cat") == "auto"
    assert policy_for(s, {"approval": "auto", "tools": {"cat": "ask"}}, "cat") == "ask"
    assert policy_for(s, {"approval": "auto", "tools": {"rm": "auto"}}, "rm") == "deny"
    assert policy_for(off, {"approval": "auto"}, "cat") == "deny"


def test_names_change_only_where_a_provider_requires_and_the_same_way_every_time():
    assert exposed_name("fs", "read_file", "openai") == "fs__read_file"
    assert exposed_name("fs", "read.file", "google") == "fs__read.file"  # Gemini takes dots
    dotted = exposed_name("fs", "read.file", "anthropic")
    assert dotted.startswith("fs__read_file_") and len(dotted) == len("fs__read_file_") + 8
    assert dotted == exposed_name("fs", "read.file", "anthropic")
    assert dotted != exposed_name("fs", "read_file.", "anthropic")  # different tools, different names
    long_a, long_b = (exposed_name("server", "t" * 100 + end, "openai") for end in "ab")
    assert len(long_a) == 64 and long_a != long_b and long_a.startswith("server__ttt")
    assert exposed_name("9s", "x", "google").startswith("_9s__x")  # Gemini wants a letter or _ first
    assert exposed_name("9s", "x", "openai") == "9s__x"


def test_schemas_are_made_acceptable_per_provider():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"n": {"type": "integer", "exclusiveMinimum": 0, "examples": [1]}, "e": {"enum": ["a", None]}},
        "required": ["n"],
    }
    openai = provider_schema(schema, "openai")
    assert "$schema" not in openai and openai["properties"]["n"]["exclusiveMinimum"] == 0
    google = provider_schema(schema, "google")
    assert google["properties"]["n"] == {"type": "integer"} and google["properties"]["e"] == {"enum": ["a"]}
    assert provider_schema({"anyOf": [{"type": "object"}]}, "anthropic") == {"type": "object", "properties": {}}
    assert provider_schema({"type": "object"}, "openai") == {"type": "object", "properties": {}}
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(400)}}
    assert provider_schema(huge, "openai") == {"type": "object", "properties": {}}


def test_results_are_bounded_and_images_kept_apart():
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 100).decode()
    big = base64.b64encode(b"\0" * (results.MAX_IMAGE_BYTES + 1)).decode()
    result = CallToolResult(
        content=[
            TextContent(type="text", text="first"),
            ImageContent(type="image", data=png, mime_type="image/png"),
            ImageContent(type="image", data=png, mime_type="image/svg+xml"),
            ImageContent(type="image", data=big, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///notes.txt", text="the notes")),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(uri="file:///a.bin", blob="AAAA", mime_type="application/x-bin"),
            ),
            ResourceLink(type="resource_link", name="report", uri="https://example.com/r"),
        ],
        is_error=False,
    )
    text, images, is_error = results.convert(result)
    assert [(i["name"], i["mediaType"], i["size"]) for i in images] == [("image-1.png", "image/png", 108)]
    assert text.startswith("first\n\n[resource file:///notes.txt]\nthe notes")
    assert "image/svg+xml" in text and "larger than" in text and "file:///a.bin" in text and "report" in text
    assert not is_error
    many = CallToolResult(content=[ImageContent(type="image", data=png, mime_type="image/png")] * 6)
    text, images, _ = results.convert(many)
    assert len(images) == results.MAX_IMAGES and text.count("left out") == 2
    long = CallToolResult(content=[TextContent(type="text", text="x" * (results.MAX_TEXT_CHARS + 10))], is_error=True)
    text, _, is_error = results.convert(long)
    assert is_error and len(text) < results.MAX_TEXT_CHARS + 100 and text.endswith("characters]")
    structured = CallToolResult(content=[], structured_content={"a": 1})
    assert results.convert(structured)[0] == '{"a": 1}'


def test_errors_lose_the_servers_secrets():
    config = parse(
        {
            "servers": {
                "web": {"url": "https://mcp.example/mcp?key=abcd1234", "bearerToken": "tok-123456"},
                "cli": {"command": ["prog", "--api-key", "k3y-value"], "env": {"TOKEN": "env-value-1"}},
            }
        }
    )
    web, cli = config.servers["web"], config.servers["cli"]
    said = "401 for url 'https://mcp.example/mcp?key=abcd1234' with Bearer tok-123456"
    assert web.redact(said) == "401 for url '[redacted]' with Bearer [redacted]"
    said = "ran prog --api-key k3y-value with env-value-1"  # every argument of the command line may be one
    assert cli.redact(said) == "ran prog [redacted] [redacted] with [redacted]"
