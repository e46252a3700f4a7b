"""Tools from MCP servers (docs/tools.md): the operator's configuration, the sessions to the servers, and the
names, schemas, policies and results of their tools as chatsync's runs use them."""

from .config import McpConfig, McpConfigError, ServerConfig
from .connections import McpUnavailable
from .tools import McpTools, OfferedTool, load, policy_for

__all__ = [
    "McpConfig",
    "McpConfigError",
    "McpTools",
    "McpUnavailable",
    "OfferedTool",
    "ServerConfig",
    "load",
    "policy_for",
]
