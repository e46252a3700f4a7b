"""The operator's MCP server configuration: the JSON file ``CHATSYNC_MCP_SERVERS`` names (docs/tools.md).

Shape::

    {"servers": {
        "<name>": {
            "command": ["prog", "arg", ...], "env": {...}, "cwd": "/dir"      # a stdio server, or
            "url": "http://host/mcp", "headers": {...}, "bearerToken": "..."  # a Streamable HTTP server
            "users": ["*"] | ["alice", ...],          # who may use it (user names or ids; "*": everyone)
            "approval": "ask" | "auto" | "deny",      # the default policy of its tools
            "tools": {"<tool>": "ask" | "auto" | "deny"},  # per tool, over the default
            "timeoutSeconds": 30, "maxConcurrency": 4, "description": "..."
        }}}

``env``, ``headers``, ``bearerToken`` and the command's arguments may hold secrets: they are read here and by the
connection that uses them, and nowhere else — :meth:`ServerConfig.public` is what clients, logs and events get.
The operator's ``deny`` is final: no session setting turns it into ``ask`` or ``auto``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

Policy = Literal["ask", "auto", "deny"]
POLICIES: tuple[Policy, ...] = ("ask", "auto", "deny")
# A server's name is the first half of its tools' names (`<server>__<tool>`): letters, digits, `-` and single `_`.
SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$")
MAX_SERVERS = 64


class McpConfigError(ValueError):
    """The file cannot be used; the message names the server and the key."""


class ServerConfig(BaseModel):
    """One MCP server: a command (stdio) or a URL (Streamable HTTP), who may use it, and its approval policy."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    command: list[str] | None = Field(default=None, min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token: str | None = Field(default=None, alias="bearerToken")
    users: list[str] = Field(default_factory=lambda: ["*"])
    approval: Policy = "ask"
    tools: dict[str, Policy] = Field(default_factory=dict)
    timeout_seconds: float | None = Field(default=None, alias="timeoutSeconds", gt=0, le=24 * 3600)
    max_concurrency: int | None = Field(default=None, alias="maxConcurrency", ge=1, le=256)
    description: str = Field(default="", max_length=2000)

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError('give either "command" (a stdio server) or "url" (a Streamable HTTP server)')
        if self.command is None and (self.env or self.cwd):
            raise ValueError('"env" and "cwd" are for stdio servers ("command")')
        if self.url is None and (self.headers or self.bearer_token):
            raise ValueError('"headers" and "bearerToken" are for HTTP servers ("url")')
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def allows(self, user_id: str, user_name: str) -> bool:
        return "*" in self.users or user_id in self.users or user_name in self.users

    def http_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.bearer_token:
            headers["Authorization"] = f"Bearer {self.bearer_token}"
        return headers

    def secrets(self) -> list[str]:
        """Every value of this entry that may be a secret (longest first)."""
        values = [*self.env.values(), *self.headers.values(), *(self.command or [])[1:], self.bearer_token, self.url]
        return sorted({v for v in values if v and len(v) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        """``text`` (an error from the server or the SDK) without any of this entry's secrets in it."""
        for secret in self.secrets():
            text = text.replace(secret, "[redacted]")
        return text

    def public(self, name: str) -> dict[str, Any]:
        """What a user or a log may see: never the command line, env, URL or headers (they may hold secrets)."""
        out: dict[str, Any] = {
            "name": name,
            "transport": self.transport,
            "approval": self.approval,
            "description": self.description,
        }
        if self.tools:
            out["toolPolicies"] = dict(self.tools)
        return out

    def file_entry(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_defaults=True, exclude_none=True) | {
            "users": self.users,
            "approval": self.approval,
        }


class McpConfig(BaseModel):
    """The operator's MCP servers by name (the file ``CHATSYNC_MCP_SERVERS`` names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, ServerConfig] = Field(default_factory=dict)

    @field_validator("servers")
    @classmethod
    def _names(cls, value: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        if len(value) > MAX_SERVERS:
            raise ValueError(f"at most {MAX_SERVERS} servers")
        for name in value:
            if not SERVER_NAME.match(name):
                raise ValueError(
                    f"server name {name!r}: 1-32 letters, digits, '-' or '_' (never two '_' in a row), "
                    "starting with a letter or digit"
                )
        return value

    def visible_to(self, user_id: str, user_name: str) -> dict[str, ServerConfig]:
        return {name: cfg for name, cfg in self.servers.items() if cfg.allows(user_id, user_name)}


def parse(data: Any, where: str = "the MCP configuration") -> McpConfig:
    try:
        return McpConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            loc = ".".join(str(part) for part in err["loc"])
            problems.append(f"{loc}: {err['msg']}" if loc else err["msg"])
        raise McpConfigError(f"{where}: " + "; ".join(problems)) from None


def load(path: str | None) -> McpConfig:
    """The configuration in ``path`` (``None``: no servers; a missing file: no servers yet)."""
    if not path:
        return McpConfig()
    file = Path(path)
    if not file.exists():
        return McpConfig()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise McpConfigError(f"{path}: not readable JSON ({exc})") from None
    return parse(data, path)


def save(path: str, config: McpConfig) -> None:
    """Write ``config`` to ``path`` atomically, readable by its owner only (it may hold secrets)."""
    body = {"servers": {name: cfg.file_entry() for name, cfg in config.servers.items()}}
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".mcp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(body, out, indent=2)
            out.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def with_server(config: McpConfig, name: str, entry: dict[str, Any]) -> McpConfig:
    servers = {n: c.file_entry() for n, c in config.servers.items()}
    servers[name] = entry
    return parse({"servers": servers}, f"server {name!r}")


def without_server(config: McpConfig, name: str) -> McpConfig:
    if name not in config.servers:
        raise McpConfigError(f"no MCP server named {name!r}")
    return McpConfig(servers={n: c for n, c in config.servers.items() if n != name})
