"""Emit ``client_js/src/router.gen.ts``: the ``AppRouter`` type of the procedures this server registers, the session
event union, and the WebSocket close codes.

``createTRPCClient<AppRouter>`` from ``@trpc/client`` then checks every path, input and output at compile
time. Everything in the file comes from Python, so what the server adds is in the next run with no step by hand:

* **inputs** come from each procedure's ``input_model`` (its JSON schema by alias, i.e. camelCase, as the
  wire has it; a field with a default is optional);
* **outputs** come from each handler's return annotation (``Subscription[X]``: the items ``X``): a wire model
  of ``server.domain.models``, a typed dict of ``server.domain.outputs``, or anything pydantic can describe, as
  it serialises (a ``NotRequired`` key is optional, every other key present). A handler that returns ``Any`` or
  says nothing is typed ``unknown`` and named on stderr (``tests/test_typegen.py`` fails on it);
* **events** are ``server.domain.events.EVENT_FIELDS`` (one typed dict of fields per event type, which must name
  every type of the log and of the stream) and ``FEED_EVENT_FIELDS``;
* **close codes** are the constants of ``server.domain.close_codes``, with their docstrings.

The file imports only *types* from ``@trpc/server`` (``import type``), so no server code reaches a bundle.

    .venv/bin/python scripts/typegen.py            # write the file
    .venv/bin/python scripts/typegen.py --check    # exit 1 when the checked-in file is stale
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter
from typing_extensions import TypeAliasType, is_typeddict

from server.domain import close_codes, events, models, outputs
from server.domain.events import DURABLE_EVENT_TYPES, EPHEMERAL_EVENT_TYPES
from server.rpc.registry import Subscription

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "client_js" / "src" / "router.gen.ts"

# Wire models emitted as they serialise. Models added to ``server.domain.models`` are picked up by name when
# they are ``WireModel``s and not inputs.
_SKIP_MODELS = {"WireModel", "StrictInput"}

# Literal types the clients name (the schemas spell them out where they are used).
NAMED_LITERALS: dict[str, Any] = {
    "TitleSource": models.TitleSource,
    "SessionStatus": models.SessionStatus,
    "ToolOutcome": models.ToolOutcome,
    "BusyPolicy": models.BusyPolicy,
    "McpPolicy": models.McpPolicy,
    "PushEvent": outputs.PushEvent,
}

# Named in Python as plain dicts; the event section below spells them out.
_EVENT_ITEMS = {"SessionEventItem", "FeedEventItem"}


# --- JSON schema -> TypeScript ------------------------------------------------------------------------------


def _ident(name: str) -> str:
    return name if name.isidentifier() else json.dumps(name)


def _literal(value: Any) -> str:
    return json.dumps(value)


def _paren(ts: str) -> str:
    return f"({ts})" if ("|" in ts or "&" in ts) and not ts.startswith("{") else ts


def _jsdoc(text: str, pad: str = "") -> str:
    lines = text.strip().replace("``", "`").replace("*/", "*\\/").splitlines()
    if len(lines) == 1:
        return f"{pad}/** {lines[0]} */\n"
    return f"{pad}/**\n" + "".join(f"{pad} * {line.strip()}\n".replace(" \n", "\n") for line in lines) + f"{pad} */\n"


class _Emitter:
    """Turns JSON schemas into TypeScript, collecting every ``$defs`` entry as a named type."""

    def __init__(self) -> None:
        self.named: dict[str, str] = {}  # type name -> TypeScript declaration body
        self.docs: dict[str, str] = {}  # type name -> its docstring
        self._building: set[str] = set()  # $defs being converted: a model that contains itself refers by name

    def define(self, name: str, body: str, doc: str | None = None) -> str:
        old = self.named.get(name)
        if old is not None and old != body:
            # The same model as an input and as an output differ (optional vs present): keep both.
            return self.define(name + "Out", body, doc)
        self.named[name] = body
        if doc:
            self.docs[name] = doc
        return name

    def schema(self, schema: dict[str, Any], defs: dict[str, Any], *, output: bool) -> str:
        if "$ref" in schema:
            name: str = schema["$ref"].rsplit("/", 1)[-1]
            if name in self._building or name in _EVENT_ITEMS:
                return name
            self._building.add(name)
            try:
                target = defs[name]
                return self.define(name, self.schema(target, defs, output=output), target.get("description"))
            finally:
                self._building.discard(name)
        if "const" in schema:
            return _literal(schema["const"])
        if "enum" in schema:
            return " | ".join(_literal(v) for v in schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                parts = [self.schema(s, defs, output=output) for s in schema[key]]
                return " | ".join(dict.fromkeys(parts))
        if "allOf" in schema:
            return " & ".join(self.schema(s, defs, output=output) for s in schema["allOf"])
        kind = schema.get("type")
        if isinstance(kind, list):
            return " | ".join(self.schema({**schema, "type": k}, defs, output=output) for k in kind)
        if kind == "string":
            return "string"
        if kind in ("integer", "number"):
            return "number"
        if kind == "boolean":
            return "boolean"
        if kind == "null":
            return "null"
        if kind == "array":
            items = schema.get("items")
            return f"{_paren(self.schema(items, defs, output=output))}[]" if items else "unknown[]"
        if kind == "object":
            return self.object(schema, defs, output=output)
        return "unknown"

    def fields(self, schema: dict[str, Any], defs: dict[str, Any], *, output: bool) -> list[str]:
        """An object schema's properties as TypeScript members (with their JSDoc), one line each. In an input a
        field that is not required is optional; in an output, one the schema says may be left out."""
        props: dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        lines = []
        for name, sub in props.items():
            doc = _doc(sub)
            if doc:
                lines.append(f"/** {doc} */")
            optional = "" if name in required else "?"
            lines.append(f"{_ident(name)}{optional}: {self.schema(sub, defs, output=output)};")
        return lines

    def object(self, schema: dict[str, Any], defs: dict[str, Any], *, output: bool) -> str:
        extra = schema.get("additionalProperties")
        if not schema.get("properties"):
            if isinstance(extra, dict):
                return f"Record<string, {self.schema(extra, defs, output=output)}>"
            return "Record<string, unknown>"
        return "{\n" + "\n".join("  " + line for line in self.fields(schema, defs, output=output)) + "\n}"

    def type_(self, tp: Any, *, output: bool = True) -> str:
        """A Python type (a model, a typed dict, a named alias, or anything pydantic describes) in TypeScript;
        models, typed dicts and aliases by their name."""
        if tp is None or tp is type(None):
            return "null"
        if isinstance(tp, TypeAliasType):  # a named alias is a named type
            name: str = tp.__name__
            return name if name in _EVENT_ITEMS else self.define(name, self.type_(tp.__value__, output=output))
        schema = _schema(tp, output=output)
        defs = schema.pop("$defs", {})
        named = isinstance(tp, type) and (issubclass(tp, BaseModel) or is_typeddict(tp))
        if named and "$ref" not in schema:
            return self.define(tp.__name__, self.schema(schema, defs, output=output), schema.get("description"))
        return self.schema(schema, defs, output=output)


def _schema(tp: Any, *, output: bool) -> dict[str, Any]:
    mode: typing.Literal["serialization", "validation"] = "serialization" if output else "validation"
    return TypeAdapter(tp).json_schema(by_alias=True, mode=mode, ref_template="#/$defs/{model}")


def _doc(schema: dict[str, Any]) -> str:
    """A short JSDoc for a field: its description, limits and default, so they show in completion."""
    parts = []
    if schema.get("description"):
        parts.append(str(schema["description"]))
    for key, label in (
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minimum", "min"),
        ("maximum", "max"),
        ("maxItems", "max items"),
        ("pattern", "pattern"),
    ):
        for src in [schema, *(s for s in schema.get("anyOf", []) if isinstance(s, dict))]:
            if key in src:
                parts.append(f"{label} {src[key]}")
                break
    if "default" in schema and schema["default"] is not None:
        parts.append(f"@default {json.dumps(schema['default'])}")
    return "; ".join(parts).replace("*/", "*\\/")


def _all_optional(model: type[BaseModel]) -> bool:
    return not any(f.is_required() for f in model.model_fields.values())


def _wire_models() -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    for name in sorted(vars(models)):
        obj = getattr(models, name)
        if (
            isinstance(obj, type)
            and issubclass(obj, models.WireModel)
            and obj.__module__ == models.__name__
            and name not in _SKIP_MODELS
            and not issubclass(obj, models.StrictInput)
        ):
            found.append(obj)
    return found


def _pascal(path: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in path.replace("-", ".").split("."))


def output_type(handler: Any) -> Any:
    """What a handler returns, from its annotation: for ``Subscription[X]``, ``X``; ``Any`` when it does not say."""
    hint = typing.get_type_hints(handler, include_extras=True).get("return", Any)
    if typing.get_origin(hint) is Subscription:
        (hint,) = typing.get_args(hint)
    return hint


# --- the file -----------------------------------------------------------------------------------------------

HEADER = """\
// Generated by `python scripts/typegen.py` from the server's procedure registry, handlers, events and close codes.
// Do not edit: run the generator again (tests/test_typegen.py fails while this file is stale).
/* eslint-disable */
import type {
  TRPCBuiltRouter,
  TRPCDefaultErrorShape,
  TRPCMutationProcedure,
  TRPCQueryProcedure,
  TRPCSubscriptionProcedure,
} from "@trpc/server";
"""


def _check_events() -> None:
    known = set(DURABLE_EVENT_TYPES) | set(EPHEMERAL_EVENT_TYPES)
    missing = sorted(known - set(events.EVENT_FIELDS))
    if missing:
        raise SystemExit(
            f"typegen: no fields for event(s) {', '.join(missing)}: add them to EVENT_FIELDS in server/domain/events.py"
        )


def _event_type(em: _Emitter, type_: str, fields: Any) -> str:
    """``{ type: "..."; sessionId: string; <the typed dict's fields> }`` on one line."""
    schema = _schema(fields, output=True)
    defs = schema.pop("$defs", {})
    members = [f'type: "{type_}";', *([] if "sessionId" in schema.get("properties", {}) else ["sessionId: string;"])]
    members += [m for m in em.fields(schema, defs, output=True) if not m.startswith("/**")]
    return "{ " + " ".join(members) + " }"


def _event_section(em: _Emitter) -> str:
    out = ['// --- events (docs/api.md "Events"; server/domain/events.py) ---', ""]
    names = []
    for type_, fields in events.EVENT_FIELDS.items():
        name = _pascal(type_) + "Event"
        names.append((type_, name))
        out.append(f"export type {name} = {_event_type(em, type_, fields)};")
    out.append("")
    durable = [n for t, n in names if t in DURABLE_EVENT_TYPES]
    ephemeral = [n for t, n in names if t in EPHEMERAL_EVENT_TYPES]
    out.append("/** Events written to the session's log: tracked by their own seq, delivered once each, in order. */")
    out.append("export type DurableEvent =\n  | " + "\n  | ".join(durable) + ";")
    out.append("/** Streaming previews, tracked with the id of the last durable event; positioned by offset. */")
    out.append("export type StreamEvent =\n  | " + "\n  | ".join(ephemeral) + ";")
    out.append("export type SessionEvent = DurableEvent | StreamEvent;")
    out.append('export type SessionEventType = SessionEvent["type"];')
    out.append("")
    resync = em.type_(events.ResyncRequired)
    out.append("/** What `@trpc/client` hands to `onData` for a tracked item. */")
    out.append("export type Tracked<T> = { id: string; data: T };")
    out.append(f"export type SessionEventItem = Tracked<SessionEvent> | {resync};")
    out.append("")
    feed = [_event_type(em, t, f) for t, f in events.FEED_EVENT_FIELDS.items()]
    out.append("/** A change in the caller's sessions (`session.feed`). */")
    out.append("export type FeedEvent =\n  | " + "\n  | ".join(feed) + ";")
    out.append(f"export type FeedEventItem = Tracked<FeedEvent> | {resync};")
    out.append("")
    out.append("/** Event types written to the log (the rest are streaming previews). */")
    out.append(
        'export const DURABLE_EVENT_TYPES: readonly DurableEvent["type"][] = '
        + json.dumps(sorted(DURABLE_EVENT_TYPES))
        + ";"
    )
    out.append(
        'export const STREAM_EVENT_TYPES: readonly StreamEvent["type"][] = '
        + json.dumps(sorted(EPHEMERAL_EVENT_TYPES))
        + ";"
    )
    return "\n".join(out) + "\n"


def _close_codes_section() -> str:
    """Every integer constant of ``server.domain.close_codes``, with the docstring below it, in its order."""
    tree = ast.parse(inspect.getsource(close_codes))
    out = ["// --- WebSocket close codes (server/domain/close_codes.py) ---", ""]
    module_doc = ast.get_docstring(tree)
    if module_doc:
        out.append(_jsdoc(module_doc).rstrip("\n"))
    body = tree.body
    for i, node in enumerate(body):
        if not isinstance(node, ast.Assign):
            continue
        doc = None
        after = body[i + 1] if i + 1 < len(body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            doc = after.value.value
        for target in node.targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            for name in names:
                assert isinstance(name, ast.Name)
                value = getattr(close_codes, name.id)
                if isinstance(value, int):
                    if doc:
                        out.append(_jsdoc(doc).rstrip("\n"))
                    out.append(f"export const {name.id} = {value};")
    return "\n".join(out) + "\n"


def _literals_section() -> str:
    out = []
    for name, tp in NAMED_LITERALS.items():
        out.append(f"export type {name} = {' | '.join(_literal(v) for v in typing.get_args(tp))};")
    return "\n".join(out) + "\n"


def _tree(paths: Iterable[tuple[str, str]]) -> str:
    """Nest ``a.b.c -> procedure type`` into a TypeScript object type."""
    root: dict[str, Any] = {}
    for path, proc in paths:
        node = root
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = proc

    def render(node: dict[str, Any], depth: int) -> str:
        pad = "  " * depth
        lines = []
        for key in sorted(node):
            value = node[key]
            text = render(value, depth + 1) if isinstance(value, dict) else value
            lines.append(f"{pad}  {_ident(key)}: {text};")
        return "{\n" + "\n".join(lines) + f"\n{pad}}}"

    return render(root, 1)


def generate(router: Any | None = None) -> tuple[str, list[str]]:
    """The file's text, and the registered paths whose handler declares no output type (typed ``unknown``)."""
    if router is None:
        from server.api import build_router

        router = build_router()
    _check_events()
    em = _Emitter()
    for model in _wire_models():
        em.type_(model)

    procs = sorted(router.procedures.values(), key=lambda p: p.path)
    entries: list[tuple[str, str]] = []
    flat: list[str] = []
    untyped: list[str] = []
    for proc in procs:
        if proc.input_model is None:
            input_ts = "void"
        else:
            schema = _schema(proc.input_model, output=False)
            defs = schema.pop("$defs", {})
            input_ts = em.define(proc.input_model.__name__ + "Input", em.schema(schema, defs, output=False))
            if _all_optional(proc.input_model):
                input_ts += " | undefined"  # tRPC then lets the call leave the input out
        out = output_type(proc.handler)
        if out is Any or isinstance(out, typing.TypeVar):
            untyped.append(proc.path)
            output_ts = "unknown"
        else:
            output_ts = em.type_(out)
        if proc.kind == "subscription":
            proc_ts = (
                f"TRPCSubscriptionProcedure<{{ input: {input_ts}; "
                f"output: AsyncIterable<{output_ts}, void, any>; meta: object }}>"
            )
        else:
            kind = "Query" if proc.kind == "query" else "Mutation"
            proc_ts = f"TRPC{kind}Procedure<{{ input: {input_ts}; output: {output_ts}; meta: object }}>"
        entries.append((proc.path, proc_ts))
        flat.append(f'  "{proc.path}": {{ kind: "{proc.kind}"; input: {input_ts}; output: {output_ts} }};')
    event_section = _event_section(em)

    parts = [HEADER, "\n// --- named literal types ---\n\n", _literals_section()]
    parts.append(
        "\n// --- wire models and outputs (server/domain/models.py, outputs.py) and procedure inputs "
        "(server/api/inputs.py) ---\n\n"
    )
    for name, body in sorted(em.named.items()):
        doc = em.docs.get(name)
        parts.append((_jsdoc(doc) if doc else "") + f"export type {name} = {body};\n")
    parts.append("\n" + event_section + "\n" + _close_codes_section())
    parts.append(
        "\n// --- procedures ---\n\n/** Every procedure by path: its kind, input and output. */\n"
        + "export interface Procedures {\n"
        + "\n".join(flat)
        + "\n}\nexport type ProcedurePath = keyof Procedures;\n"
    )
    parts.append(
        "\n/** The router type for `createTRPCClient<AppRouter>` (no transformer; tRPC's default error shape). */\n"
        "export type AppRouter = TRPCBuiltRouter<\n"
        "  { ctx: object; meta: object; errorShape: TRPCDefaultErrorShape; transformer: false },\n"
        f"  {_tree(entries)}\n>;\n"
    )
    return "".join(parts), untyped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/typegen.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the checked-in file is stale")
    parser.add_argument("--out", type=Path, default=TARGET, help=f"default: {TARGET.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text, untyped = generate()
    if untyped:
        print(
            f"typegen: no output type for {', '.join(untyped)} (typed unknown: annotate the handler)",
            file=sys.stderr,
        )
    if args.check:
        current = args.out.read_text() if args.out.exists() else None
        if current != text:
            print(f"typegen: {args.out} is stale; run .venv/bin/python scripts/typegen.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
