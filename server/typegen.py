"""Emit ``client_js/src/router.gen.ts``: the ``AppRouter`` type of the procedures this server registers.

``createTRPCClient<AppRouter>`` from ``@trpc/client`` then checks every path, input and output at compile
time. The type is built only from the registry and the pydantic models, so a procedure the server adds is in
the next run with no step by hand:

* **inputs** come from each procedure's ``input_model`` (its JSON schema by alias, i.e. camelCase, as the
  wire has it; a field with a default is optional);
* **outputs** come from :data:`OUTPUTS`, a table from path to a wire model of ``server.domain.models`` or a
  TypeScript type written here. Handlers declare no output type, and the table keeps it that way: it lives
  beside the generator rather than in ``server/api``. A path missing from it is typed ``unknown`` and
  named on stderr;
* **events** are the TypeScript types in :data:`EVENT_TYPES`, one per event type; the generator refuses to
  run when ``server.domain.events`` knows a type this table does not, so the union cannot fall behind.

The file imports only *types* from ``@trpc/server`` (``import type``), so no server code reaches a bundle.

    .venv/bin/python -m server.typegen            # write the file
    .venv/bin/python -m server.typegen --check    # exit 1 when the checked-in file is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .domain import models
from .domain.events import DURABLE_EVENT_TYPES, EPHEMERAL_EVENT_TYPES

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "client_js" / "src" / "router.gen.ts"

# Wire models emitted as they serialise (every field present). Models added to
# ``server.domain.models`` are picked up by name when they are ``WireModel``s and not inputs.
_SKIP_MODELS = {"WireModel", "StrictInput"}

# Shapes the server builds as dicts (``session.get``'s run, the results of runs), hand-written here, one
# declaration per blank-line-separated block. A wire model of the same name, once there is one, replaces it.
EXTRA_TYPES = """\
export type TitleSource = Session["titleSource"];
export type SessionStatus = Session["status"];
/** How a tool call ended (a `tool` message's `outcome`, `tool-call-result`'s). */
export type ToolOutcome = NonNullable<Message["outcome"]>;

/** A tool call the current run is waiting on (`session.get`'s `run.pendingToolCalls`). */
export type PendingToolCall = {
  callId: string;
  name: string;
  /** The call's arguments as JSON text. */
  arguments: string;
  executor: "client" | "server";
  requiresApproval: boolean;
  approval: "none" | "pending" | "approved" | "denied";
};

/** Who answered an approval (`tool-approval-resolved`); `deviceName` is null for a token that is no device. */
export type DecidedBy = { userId: string; userName: string; deviceName: string | null };

/** A call waiting for `tool.approve`. */
export type PendingApproval = { callId: string; name: string; arguments: string };

/** `session.get`'s `run`: the run in progress, or `null`. */
export type RunState = {
  id: string;
  status: string;
  /** The partial answer being streamed, with its length in code points. */
  streaming: { messageId: string; offset: number; text: string } | null;
  pendingToolCalls: PendingToolCall[];
  pendingApprovals: PendingApproval[];
};

/** What `session.get` returns: everything needed to follow the session from `lastEventId` on. */
export type SessionState = Omit<SessionSnapshot, "run"> & { run: RunState | null };

/** What `message.send` did with the message (the call's or the session's busy policy decides). */
export type SendResult =
  | { status: "started"; message: Message; runId: string }
  | { status: "queued"; queued: QueuedMessage }
  | { status: "steered"; message: Message; runId: string };

/** A page of `session.list`. `feedEventId` is where `session.feed` should start to miss nothing. */
export type SessionPage = { items: (Session & SessionMarks)[]; nextCursor: string | null; feedEventId: string };

/** What a session list shows beside the session: its queue's length, and whether it is unread (an answer, a
 * failure or an approval request its owner has not looked at: `attention` says which). */
export type SessionMarks = {
  queueLength?: number;
  unread?: boolean;
  attention?: "answer" | "failure" | "approval" | null;
};

/** A page of `message.list`; `nextCursor` is the `before` of the previous page. */
export type MessagePage = { items: Message[]; nextCursor: number | null };

/** A session as the live list (`session.feed`) carries it. */
export type SessionSummary = Pick<
  Session,
  "id" | "title" | "titleSource" | "status" | "provider" | "model" | "queuePaused" | "createdAt" | "updatedAt"
  | "pinned" | "archived"
> & SessionMarks;

/** What `session-updated` carries: every field of the session except the large ones (tools, system prompt,
 * defaults, metadata), which are there only when they changed. Merge it into the session you have. */
export type SessionChanges = Omit<Session, "tools" | "systemPrompt" | "defaults" | "metadata">
  & Partial<Pick<Session, "tools" | "systemPrompt" | "defaults" | "metadata">>;

/** An MCP server the caller may enable on a session (`mcp.servers`), with its tools and their default policies. */
export type McpPolicy = "ask" | "auto" | "deny";
export type McpServerInfo = {
  name: string; transport: "stdio" | "http"; approval: McpPolicy; description: string;
  toolPolicies?: Record<string, McpPolicy>;
  tools: { name: string; description: string; policy: McpPolicy }[]; error?: string;
};

/** A device signed in with a token of the caller's. */
export type Device = { id: string; name: string; createdAt: number; lastUsedAt: number | null; current: boolean };

/** A sign-in link of the caller's that is waiting to be used: the name the new device gets (`deviceName`), and
 * the device that made it (`madeBy`; null when made on the server's command line). */
export type PendingLink = {
  id: string; deviceName: string | null; createdAt: number; expiresAt: number;
  madeBy: { id: string; name: string; current: boolean } | null;
};

/** A client that has a session open (`presence.watch`); `current` is the watcher's own. */
export type PresenceDevice = {
  deviceId: string | null; deviceName: string; visible: boolean; focused: boolean; typing: boolean; current: boolean;
};

/** A session's unsent composer text, per user (`draft.*`); `version` 0 is "no draft yet". */
export type Draft = {
  sessionId: string; text: string; attachments: FileInfo[]; version: number;
  deviceId: string | null; deviceName: string | null; updatedAt: number | null;
};

/** An uploaded file as a message or a draft carries it. */
export type FileInfo = { fileId: string; name: string; mediaType: string; size: number };

/** `draft.save` / `draft.clear`: `saved` false when the draft had moved on (then `draft` is the newer one). */
export type DraftWrite = { saved: boolean; draft: Draft };

/** What `presence.watch` gives: the draft, the set of clients, and each change of either. */
export type PresenceItem =
  | { type: "presence"; sessionId: string; devices: PresenceDevice[] }
  | { type: "draft"; sessionId: string; draft: Draft };

/** A provider this server knows (`provider.list`): whether it can be used (else `reason` says why: no key), the
 * models it knows, and whether the model is typed (`freeText`: an OpenAI-compatible server, Ollama). */
export type ProviderInfo = {
  id: string; label: string; available: boolean; reason: string | null; models: string[]; freeText: boolean;
};

/** A tool the server runs itself (`tool.builtins`), as a session declares it in `tools`. */
export type ToolDefinitionInfo = {
  name: string; description: string; parameters: Record<string, unknown>; executor: "client" | "server";
  requiresApproval: boolean;
};

export type PushEvent = "approval-needed" | "answer-finished" | "run-failed";

/** A device's Web Push subscription (`push.subscriptions`). */
export type PushSubscriptionInfo = {
  endpoint: string; deviceId: string; deviceName: string; events: PushEvent[]; current: boolean;
};
"""

# One TypeScript type per event (docs/api.md "Events", docs/runs.md). Every event also has `sessionId`.
EVENT_TYPES: dict[str, str] = {
    "queue-message-added": "{ message: QueuedMessage }",
    "queue-message-removed": '{ messageId: string; reason: "sent" | "dequeued" | "removed" | (string & {}) }',
    "queue-cleared": "{}",
    "queue-message-updated": "{ message: QueuedMessage }",
    "queue-reordered": "{ order: string[] }",
    "queue-paused": "{}",
    "queue-resumed": "{}",
    "message-created": "{ message: Message }",
    "message-completed": "{ message: Message }",
    "message-continued": "{ message: Message }",
    "branch-changed": "{ parentId: string | null; path: Message[] }",
    "run-resumed": "{ runId: string; messageId: string }",
    "run-started": '{ runId: string; trigger: "message" | "queue" | "instructions" | "edit" | "regenerate"'
    ' | "continue" | (string & {});'
    " clientRequestId?: string | null }",
    "run-finished": "{ runId: string; finishReason: string; usage: Record<string, unknown> | null }",
    "run-failed": "{ runId: string; error: { code: string; message: string; retryable: boolean } }",
    "run-aborted": "{ runId: string }",
    "tool-call-ready": '{ callId: string; name: string; arguments: string; executor: "client" | "server";'
    " requiresApproval: boolean }",
    "tool-approval-requested": "{ callId: string }",
    "tool-approval-resolved": "{ callId: string; approved: boolean; decidedBy?: DecidedBy; decidedAt?: number }",
    "tool-call-result": "{ callId: string; output: string; isError: boolean; outcome: ToolOutcome }",
    "session-updated": "{ session: SessionChanges }",
    "title-changed": "{ title: string; source: TitleSource }",
    "session-deleted": "{}",
    "text-delta": "{ messageId: string; offset: number; delta: string }",
    "tool-call-start": "{ messageId: string; callId: string; name: string; index: number }",
    "tool-call-delta": "{ messageId: string; callId: string; offset: number; delta: string }",
    "stream-snapshot": "{ messageId: string; offset: number; text: string }",
    "tool-call-progress": "{ callId: string; progress: number; total?: number; message?: string }",
}

# What each procedure returns: a wire model, or a TypeScript type over the names this file defines.
# Paths not (yet) registered are left out of the router; they are here so they are typed when they land.
OUTPUTS: dict[str, type[BaseModel] | str] = {
    "session.create": models.Session,
    "session.list": "SessionPage",
    "session.get": "SessionState",
    "session.update": models.Session,
    "session.delete": "null",
    "session.setTitle": models.Session,
    "session.clearTitle": models.Session,
    "session.regenerateTitle": models.Session,
    "session.switchContext": models.Session,
    "session.events": "SessionEventItem",
    "session.feed": "FeedEventItem",
    "message.list": "MessagePage",
    "message.enqueueMessage": models.QueuedMessage,
    "message.dequeueMessage": "QueuedMessage | null",
    "message.clearQueue": "null",
    "message.removeQueuedMessage": "null",
    "message.getQueuedMessages": "QueuedMessage[]",
    "message.updateQueuedMessage": models.QueuedMessage,
    "message.pauseQueue": "null",
    "message.moveQueuedMessage": "QueuedMessage[]",
    "message.send": "SendResult",
    "message.addInstructions": "{ messages: Message[]; runId: string | null }",
    "message.resumeQueue": "{ runId: string | null }",
    "message.sendQueuedNow": '{ mode: "interrupt" | "steer" | "next"; runId: string | null }',
    "tool.submitOutputs": "{ messages: Message[]; resumed: boolean }",
    "tool.approve": "{ resolved: true }",
    "run.abort": "{ aborted: boolean }",
    "run.regenerate": "{ runId: string; parentId: string | null; provider: string; model: string }",
    "run.continue": "{ runId: string; messageId: string }",
    "message.edit": '{ status: "started"; message: Message; runId: string }',
    "session.switchBranch": "{ changed: boolean; leafId: string | null }",
    "session.fork": "Session",
    "tool.builtins": "ToolDefinitionInfo[]",
    "provider.list": "ProviderInfo[]",
    "auth.me": (
        "{ user: { id: string; name: string; role: string }; deviceId: string | null; deviceName: string | null }"
    ),
    "auth.createLink": "{ id: string; url: string; code: string; expiresAt: number }",
    "auth.links": "PendingLink[]",
    "auth.revokeLink": "null",
    "mcp.servers": "{ servers: McpServerInfo[] }",
    "auth.devices": "Device[]",
    "auth.revokeDevice": "null",
    "auth.renameDevice": "Device",
    "auth.watchDevices": "{ devices: Device[]; links: PendingLink[] }",
    # Devices that know about each other (docs/devices.md).
    "presence.update": "{ ttlSeconds: number; heartbeatSeconds: number }",
    "presence.leave": "null",
    "presence.watch": "PresenceItem",
    "draft.get": "Draft",
    "draft.save": "DraftWrite",
    "draft.clear": "DraftWrite",
    "session.markRead": "null",
    "push.publicKey": "string",
    "push.subscriptions": "PushSubscriptionInfo[]",
    "push.subscribe": "{ endpoint: string; deviceId: string; events: PushEvent[] }",
    "push.unsubscribe": "null",
    "push.decide": "{ resolved: true }",
}


# --- JSON schema -> TypeScript ------------------------------------------------------------------------------


def _ident(name: str) -> str:
    return name if name.isidentifier() else json.dumps(name)


def _literal(value: Any) -> str:
    return json.dumps(value)


def _paren(ts: str) -> str:
    return f"({ts})" if ("|" in ts or "&" in ts) and not ts.startswith("{") else ts


class _Emitter:
    """Turns JSON schemas into TypeScript, collecting every ``$defs`` entry as a named type."""

    def __init__(self) -> None:
        self.named: dict[str, str] = {}  # type name -> TypeScript declaration body
        self._building: set[str] = set()  # $defs being converted: a model that contains itself refers by name

    def define(self, name: str, body: str) -> str:
        old = self.named.get(name)
        if old is not None and old != body:
            # The same model as an input and as an output differ (optional vs present): keep both.
            return self.define(name + "Out", body)
        self.named[name] = body
        return name

    def schema(self, schema: dict[str, Any], defs: dict[str, Any], *, output: bool) -> str:
        if "$ref" in schema:
            name: str = schema["$ref"].rsplit("/", 1)[-1]
            if name in self._building:
                return name
            self._building.add(name)
            try:
                return self.define(name, self.schema(defs[name], defs, output=output))
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

    def object(self, schema: dict[str, Any], defs: dict[str, Any], *, output: bool) -> str:
        props: dict[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        if not props:
            if isinstance(extra, dict):
                return f"Record<string, {self.schema(extra, defs, output=output)}>"
            return "Record<string, unknown>"
        required = set(schema.get("required") or [])
        lines = []
        for name, sub in props.items():
            doc = _doc(sub)
            if doc:
                lines.append(f"  /** {doc} */")
            optional = "" if output or name in required else "?"
            lines.append(f"  {_ident(name)}{optional}: {self.schema(sub, defs, output=output)};")
        return "{\n" + "\n".join(lines) + "\n}"


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


def _model_ts(em: _Emitter, model: type[BaseModel], *, output: bool) -> str:
    schema = model.model_json_schema(
        by_alias=True, mode="serialization" if output else "validation", ref_template="#/$defs/{model}"
    )
    defs = schema.pop("$defs", {})
    return em.schema(schema, defs, output=output)


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


# --- the file -----------------------------------------------------------------------------------------------

HEADER = """\
// Generated by `python -m server.typegen` from the server's procedure registry and wire models.
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


def _extra_types(generated: set[str]) -> str:
    """:data:`EXTRA_TYPES` without the ones a wire model now defines (the model's schema wins)."""
    blocks = EXTRA_TYPES.strip().split("\n\n")  # one declaration (with its comment) per block
    kept = []
    for block in blocks:
        names = set(re.findall(r"export type (\w+)", block))
        if not names & generated:
            kept.append(block)
    return "\n\n".join(kept) + "\n"


def _check_events() -> None:
    known = set(DURABLE_EVENT_TYPES) | set(EPHEMERAL_EVENT_TYPES)
    missing = sorted(known - set(EVENT_TYPES))
    if missing:
        raise SystemExit(
            f"server.typegen: no TypeScript type for event(s) {', '.join(missing)}: "
            "add them to EVENT_TYPES in server/typegen.py"
        )


def _event_section() -> str:
    out = ["// --- events (docs/api.md \"Events\") ---", ""]
    names = []
    for type_, fields in EVENT_TYPES.items():
        name = _pascal(type_) + "Event"
        names.append((type_, name))
        body = fields.strip()
        inner = body[1:-1].strip().rstrip(";")
        extra = f" {inner};" if inner else ""
        out.append(f'export type {name} = {{ type: "{type_}"; sessionId: string;{extra} }};')
    out.append("")
    durable = [n for t, n in names if t in DURABLE_EVENT_TYPES]
    ephemeral = [n for t, n in names if t in EPHEMERAL_EVENT_TYPES]
    out.append("/** Events written to the session's log: tracked by their own seq, delivered once each, in order. */")
    out.append("export type DurableEvent =\n  | " + "\n  | ".join(durable) + ";")
    out.append("/** Streaming previews, tracked with the id of the last durable event; positioned by offset. */")
    out.append("export type StreamEvent =\n  | " + "\n  | ".join(ephemeral) + ";")
    out.append("export type SessionEvent = DurableEvent | StreamEvent;")
    out.append("export type SessionEventType = SessionEvent[\"type\"];")
    out.append("")
    out.append("/** Sent untracked when the position asked for left the log; the subscription then ends. */")
    out.append('export type ResyncRequired = { type: "resync-required"; sessionId?: string; lastEventId: string };')
    out.append("")
    out.append("/** What `@trpc/client` hands to `onData` for a tracked item. */")
    out.append("export type Tracked<T> = { id: string; data: T };")
    out.append("export type SessionEventItem = Tracked<SessionEvent> | ResyncRequired;")
    out.append("")
    out.append(
        "export type FeedEvent =\n"
        '  | { type: "session-created"; session: SessionSummary }\n'
        '  | { type: "session-updated"; session: SessionSummary }\n'
        '  | { type: "session-deleted"; sessionId: string };'
    )
    out.append("export type FeedEventItem = Tracked<FeedEvent> | ResyncRequired;")
    out.append("")
    out.append("/** Event types written to the log (the rest are streaming previews). */")
    out.append(
        "export const DURABLE_EVENT_TYPES: readonly DurableEvent[\"type\"][] = "
        + json.dumps(sorted(DURABLE_EVENT_TYPES))
        + ";"
    )
    out.append(
        "export const STREAM_EVENT_TYPES: readonly StreamEvent[\"type\"][] = "
        + json.dumps(sorted(EPHEMERAL_EVENT_TYPES))
        + ";"
    )
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
    """The file's text, and the registered paths that have no output type (typed ``unknown``)."""
    if router is None:
        from .api import build_router

        router = build_router()
    _check_events()
    em = _Emitter()
    for model in _wire_models():
        em.define(model.__name__, _model_ts(em, model, output=True))

    procs = sorted(router.procedures.values(), key=lambda p: p.path)
    entries: list[tuple[str, str]] = []
    flat: list[str] = []
    untyped: list[str] = []
    for proc in procs:
        if proc.input_model is None:
            input_ts = "void"
        else:
            input_ts = em.define(proc.input_model.__name__ + "Input", _model_ts(em, proc.input_model, output=False))
            if _all_optional(proc.input_model):
                input_ts += " | undefined"  # tRPC then lets the call leave the input out
        out = OUTPUTS.get(proc.path)
        if out is None:
            untyped.append(proc.path)
            output_ts = "unknown"
        elif isinstance(out, str):
            output_ts = out
        else:
            output_ts = em.define(out.__name__, _model_ts(em, out, output=True))
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

    parts = [HEADER, "// --- wire models (server/domain/models.py) and procedure inputs (server/api/inputs.py) ---\n"]
    parts.extend(f"export type {name} = {body};\n" for name, body in sorted(em.named.items()))
    parts.append("\n" + _extra_types(set(em.named)) + "\n" + _event_section())
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
    parser = argparse.ArgumentParser(prog="python -m server.typegen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the checked-in file is stale")
    parser.add_argument("--out", type=Path, default=TARGET, help=f"default: {TARGET.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text, untyped = generate()
    if untyped:
        print(f"server.typegen: no output type for {', '.join(untyped)} (typed unknown; see OUTPUTS)", file=sys.stderr)
    if args.check:
        current = args.out.read_text() if args.out.exists() else None
        if current != text:
            print(f"server.typegen: {args.out} is stale; run .venv/bin/python -m server.typegen", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
