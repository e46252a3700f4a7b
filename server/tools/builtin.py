"""Two harmless example tools: ``current_time`` and ``calculator``.

The calculator walks a parsed expression and allows numbers, ``+ - * / // % **``, unary signs and parentheses —
no names, calls or attributes, so there is nothing to inject. Exponents and results are bounded so a request
like ``9**9**9`` is refused instead of burning CPU.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .registry import ToolError, ToolRegistry

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e300

_BINARY: dict[type[ast.operator], Callable[[float, float], object]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def calculate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely; raises ``ToolError`` for anything else."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolError(f"exponent larger than {MAX_EXPONENT}")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
        except OverflowError:
            raise ToolError("result too large") from None
        if not isinstance(value, int | float) or abs(value) > MAX_MAGNITUDE:  # complex: a negative's root
            raise ToolError("result too large or not a real number")
        return value
    raise ToolError(f"unsupported element: {type(node).__name__}")


def _calculator(args: dict[str, Any]) -> str:
    expression = args.get("expression")
    if not isinstance(expression, str):
        raise ToolError('missing "expression" (a string)')
    return str(calculate(expression))


def _current_time(args: dict[str, Any]) -> str:
    name = args.get("timezone") or "UTC"
    try:
        zone = UTC if name == "UTC" else ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown time zone {name!r}") from None
    return datetime.now(zone).isoformat(timespec="seconds")


def register_builtins(registry: ToolRegistry) -> None:
    registry.register(
        "current_time",
        _current_time,
        description="The current date and time (ISO 8601) in a time zone (default UTC).",
        parameters={"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA name"}}},
    )
    registry.register(
        "calculator",
        _calculator,
        description="Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses.",
        parameters={"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    )
