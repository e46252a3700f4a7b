"""Server tools: Python callables the model may call when a session declares them with ``executor: "server"``.

The registry is per process (``Services.tools``); the two built-ins are harmless examples:
``current_time`` and ``calculator`` (arithmetic by walking the AST, never ``eval``).
"""

from .builtin import calculate, register_builtins
from .registry import ToolError, ToolRegistry, ToolResult

__all__ = ["ToolError", "ToolRegistry", "ToolResult", "calculate", "register_builtins"]
