"""The names and schemas of MCP tools as each provider takes them (docs/tools.md "Names and schemas").

A tool ``read`` of server ``fs`` is offered as ``fs__read``. Providers restrict function names: OpenAI (and the
compatible servers), Anthropic and Gemini take at most 64 characters of letters, digits, ``_`` and ``-`` (Gemini
also ``.`` and ``:``, and wants a letter or ``_`` first). Only a name that breaks its provider's rule is changed:
other characters become ``_``, and a name still too long keeps its start and gets ``_`` and 8 hex digits of the
SHA-256 of the full name — the same name every time, and different for different tools.

Schemas: an MCP tool's ``inputSchema`` is a JSON schema whose top level is an object. What a provider refuses is
taken out the same way every time: ``$schema``/``$id`` everywhere, a top level that is not a plain object (made
one), and for Gemini every keyword outside the subset its ``parametersJsonSchema`` documents. A schema larger than
``MAX_SCHEMA_CHARS`` is replaced by an open object (the model still gets the description).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

SEPARATOR = "__"
MAX_SCHEMA_CHARS = 32_000
MAX_DESCRIPTION_CHARS = 4096
OPEN_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class NameRule:
    """What a provider allows in a function name: the characters, the length, and the first character."""

    allowed: re.Pattern[str]  # one allowed character
    max_length: int | None
    first: re.Pattern[str] | None = None  # what the first character must be


_COMMON = NameRule(re.compile(r"[A-Za-z0-9_-]"), 64)
RULES: dict[str, NameRule] = {
    "openai": _COMMON,
    "compatible": _COMMON,
    "anthropic": _COMMON,
    "google": NameRule(re.compile(r"[A-Za-z0-9_.:-]"), 64, re.compile(r"[A-Za-z_]")),
    # Ollama and the echo model take any name; the stored name is the same for every provider a session moves to
    # only if it is valid everywhere, so they follow the common rule too.
    "ollama": _COMMON,
    "echo": _COMMON,
}


def exposed_name(server: str, tool: str, target: str) -> str:
    """``<server>__<tool>``, changed only where ``target``'s rule requires (see the module docstring)."""
    full = f"{server}{SEPARATOR}{tool}"
    rule = RULES.get(target, _COMMON)
    name = "".join(ch if rule.allowed.fullmatch(ch) else "_" for ch in full)
    if rule.first is not None and not rule.first.fullmatch(name[:1]):
        name = "_" + name
    if name == full and (rule.max_length is None or len(name) <= rule.max_length):
        return name
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    if rule.max_length is not None and len(name) + 9 > rule.max_length:
        name = name[: rule.max_length - 9]
    return f"{name}_{digest}"


# The JSON schema keywords Gemini's `parametersJsonSchema` documents; anything else is dropped for it.
_GOOGLE_KEYWORDS = frozenset(
    {
        "$id",
        "$defs",
        "$ref",
        "$anchor",
        "type",
        "format",
        "title",
        "description",
        "enum",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "oneOf",
        "properties",
        "additionalProperties",
        "required",
        "propertyOrdering",
    }
)
# Keywords whose value is a map of schemas, a schema, or a list of schemas.
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def _clean(node: Any, target: str) -> Any:
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("$schema",) or (key == "$id" and target != "google"):
            continue
        if target == "google" and key not in _GOOGLE_KEYWORDS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _clean(v, target) for k, v in value.items()}
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            out[key] = _clean(value, target)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_clean(v, target) for v in value]
        elif key == "enum" and target == "google" and isinstance(value, list):
            out[key] = [v for v in value if isinstance(v, str | int | float) and not isinstance(v, bool)]
        else:
            out[key] = value
    return out


def provider_schema(schema: Any, target: str) -> dict[str, Any]:
    """The arguments schema of an MCP tool as ``target`` accepts it (see the module docstring)."""
    if not isinstance(schema, dict):
        return dict(OPEN_OBJECT)
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError):
        return dict(OPEN_OBJECT)
    if size > MAX_SCHEMA_CHARS:
        return dict(OPEN_OBJECT)
    cleaned: dict[str, Any] = _clean(schema, target)
    # Every provider wants a plain object at the top: no top-level anyOf/oneOf/allOf/enum/not.
    if cleaned.get("type") != "object" or any(k in cleaned for k in ("anyOf", "oneOf", "allOf", "not", "enum")):
        return dict(OPEN_OBJECT)
    if not isinstance(cleaned.get("properties"), dict):
        cleaned["properties"] = {}
    return cleaned


def description(text: str | None, server: str) -> str:
    """A tool's description, bounded, saying which server it comes from (it is the server's text, untrusted)."""
    body = (text or "").strip()
    prefix = f"[MCP server {server}] "
    return (prefix + body)[:MAX_DESCRIPTION_CHARS]
