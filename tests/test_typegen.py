"""``scripts/typegen.py``: the checked-in ``client_js/src/router.gen.ts`` matches the registry, every procedure's
output in it comes from its handler's return annotation, and the ``AppRouter`` it declares is accepted by
``createTRPCClient`` from the real ``@trpc/client`` and rejects wrong calls.

The type check runs TypeScript's ``tsc --noEmit`` over a small file that uses the typed client; lines marked
``// @ts-expect-error`` must be errors, so a router type that let anything through (``any``) fails the check.
Node missing is a failure, never a skip.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, TypeAdapter
from typing_extensions import TypeAliasType, is_typeddict

from scripts import typegen
from server.api import build_router
from server.api.inputs import SessionRef
from server.domain import close_codes, events, outputs

ROOT = Path(__file__).resolve().parent.parent
CLIENT_JS = ROOT / "client_js"
TSC = CLIENT_JS / "node_modules" / ".bin" / "tsc"


def test_checked_in_router_type_is_current() -> None:
    text, _ = typegen.generate()
    assert typegen.TARGET.read_text() == text, (
        "client_js/src/router.gen.ts is stale: run .venv/bin/python scripts/typegen.py"
    )


def test_check_flag_fails_on_a_stale_file_and_passes_on_a_fresh_one(tmp_path: Path) -> None:
    out = tmp_path / "router.gen.ts"
    out.write_text("// stale\n")
    assert typegen.main(["--check", "--out", str(out)]) == 1
    assert typegen.main(["--out", str(out)]) == 0
    assert typegen.main(["--check", "--out", str(out)]) == 0


class _Shout(SessionRef):
    volume: int = Field(default=3, ge=1, le=11)


def test_a_new_procedure_is_picked_up_without_a_step_by_hand() -> None:
    router = build_router()

    @router.mutation("session.shout", _Shout)
    async def shout(ctx: object, inp: _Shout) -> outputs.Aborted:  # pragma: no cover - never called
        return {"aborted": False}

    text, untyped = typegen.generate(router)
    assert '"session.shout": { kind: "mutation"; input: _ShoutInput; output: Aborted }' in text
    assert "shout: TRPCMutationProcedure<{ input: _ShoutInput; output: Aborted; meta: object }>;" in text
    assert "volume?: number;" in text and "@default 3" in text
    assert untyped == []


def test_a_handler_that_returns_any_is_named_and_typed_unknown() -> None:
    router = build_router()

    @router.query("session.vague", SessionRef)
    async def vague(ctx: object, inp: SessionRef) -> Any:  # pragma: no cover - never called
        return None

    text, untyped = typegen.generate(router)
    assert '"session.vague": { kind: "query"; input: SessionRefInput; output: unknown }' in text
    assert untyped == ["session.vague"]


def _declared(text: str) -> set[str]:
    return set(re.findall(r"^export (?:type|interface) (\w+)", text, re.M))


def _named_types(tp: Any) -> set[str]:
    """The names a Python output type is emitted under: its models, typed dicts and aliases, nested ones too."""
    if isinstance(tp, TypeAliasType):
        return {tp.__name__} | (set() if tp.__name__ in typegen._EVENT_ITEMS else _named_types(tp.__value__))
    if isinstance(tp, type) and (issubclass(tp, BaseModel) or is_typeddict(tp)):
        return {tp.__name__}
    names: set[str] = set()
    for arg in typing.get_args(tp):
        names |= _named_types(arg)
    return names


def test_every_registered_procedure_declares_its_output_and_the_file_has_it() -> None:
    """No handler returns ``Any`` (or leaves its return unannotated), and the generated file declares each output
    type under its Python name and gives it as the procedure's output."""
    text = typegen.TARGET.read_text()
    declared = _declared(text)
    procs = build_router().procedures.values()
    vague = sorted(p.path for p in procs if typegen.output_type(p.handler) is Any)
    assert vague == [], f"handlers that do not say what they return: {vague}"
    for proc in procs:
        out = typegen.output_type(proc.handler)
        missing = _named_types(out) - declared
        assert not missing, f"{proc.path}: {missing} not in router.gen.ts"
        entry = re.search(
            rf'^  "{re.escape(proc.path)}": \{{ kind: "{proc.kind}"; input: .*; output: (.+) \}};$', text, re.M
        )
        assert entry is not None, proc.path
        assert entry.group(1) != "unknown", proc.path
        if _named_types(out) == {getattr(out, "__name__", None)}:  # a named type: the output is that name
            assert entry.group(1) == out.__name__, proc.path


def test_every_close_code_is_generated_and_the_client_keeps_no_copy() -> None:
    text = typegen.TARGET.read_text()
    codes = {k: v for k, v in vars(close_codes).items() if k.isupper() and isinstance(v, int)}
    assert {"UNAVAILABLE", "SERVER_FULL", "AUTH_TIMEOUT"} <= set(codes)
    for name, value in codes.items():
        assert f"export const {name} = {value};" in text, name
    hand_written = (CLIENT_JS / "src" / "closeCodes.ts").read_text()
    assert not re.search(r"\b4\d\d\d\b", hand_written), "closeCodes.ts must use the generated codes"
    for module in (ROOT / "chatsync_client").rglob("*.py"):  # the Python client imports server.domain.close_codes
        assert not re.search(r"\b4\d\d\d\b", module.read_text()), f"{module} copies a close code"


def test_every_event_type_is_generated_from_its_fields() -> None:
    text = typegen.TARGET.read_text()
    for type_, fields in events.EVENT_FIELDS.items():
        line = next(
            line for line in text.splitlines() if line.startswith(f'export type {typegen._pascal(type_)}Event =')
        )
        schema = TypeAdapter(fields).json_schema(mode="serialization")
        required = set(schema.get("required", ()))
        for key in schema.get("properties", {}):
            assert f" {key}{'' if key in required else '?'}: " in line, (type_, key)


class _Node(SessionRef):
    label: str
    children: list[_Node] = Field(default_factory=list)


def test_a_model_that_contains_itself_refers_to_itself_by_name() -> None:
    router = build_router()

    @router.mutation("session.tree", _Node)
    async def tree(ctx: object, inp: _Node) -> None:  # pragma: no cover - never called
        return None

    text, _ = typegen.generate(router)
    assert "children?: _Node[];" in text
    assert '"session.tree": { kind: "mutation"; input: _NodeInput;' in text


def test_an_event_type_without_fields_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    fields = dict(events.EVENT_FIELDS)
    del fields["queue-reordered"]
    monkeypatch.setattr(events, "EVENT_FIELDS", fields)
    with pytest.raises(SystemExit, match="queue-reordered"):
        typegen.generate()


CHECK_TS = """\
import { createTRPCClient, createWSClient, httpBatchLink, splitLink, wsLink } from "@trpc/client";
import type { AppRouter, Procedures } from "../src/router.gen.js";

const ws = createWSClient({ url: "ws://127.0.0.1:1/trpc", connectionParams: { token: "t" },
                            lazy: { enabled: true, closeMs: 0 } });
const client = createTRPCClient<AppRouter>({
  links: [splitLink({ condition: (op) => op.type === "subscription", true: wsLink({ client: ws }),
                      false: httpBatchLink({ url: "http://127.0.0.1:1/trpc" }) })],
});

export async function uses(): Promise<string[]> {
  const snap = await client.session.get.query({ sessionId: "s" });
  const title: string = snap.session.title;
  const text: string | undefined = snap.run?.streaming?.text;
  const firstQueued: number | undefined = snap.queue[0]?.enqueuedAt;
  const page = await client.session.list.query();
  const queued = await client.message.enqueueMessage.mutate({ sessionId: "s", content: "hi", clientRequestId: "r1" });
  const sent = await client.message.send.mutate({ sessionId: "s", content: "hello", busyPolicy: "steer" });
  if (sent.status === "queued") { const id: string = sent.queued.id; void id; }
  client.session.events.subscribe({ sessionId: "s", lastEventId: snap.lastEventId }, {
    onData(item) {
      if ("id" in item) {
        const e = item.data;
        if (e.type === "text-delta") { const n: number = e.offset; void n; }
        if (e.type === "queue-message-added") { const c: string = e.message.content; void c; }
      } else {
        const again: string = item.lastEventId;
        void again;
      }
    },
  });
  const me = await client.auth.me.query();
  const who: string = me.user.name;
  void who;
  const out: Procedures["run.abort"]["output"] = await client.run.abort.mutate({ sessionId: "s" });
  void out; void firstQueued; void text;

  // @ts-expect-error content must be a string
  await client.message.enqueueMessage.mutate({ sessionId: "s", content: 42 });
  // @ts-expect-error an input field the server does not know
  await client.session.get.query({ sessionId: "s", nope: true });
  // @ts-expect-error sessionId is required
  await client.session.get.query({});
  // @ts-expect-error no such procedure
  await client.session.explode.mutate({ sessionId: "s" });
  // @ts-expect-error a query is not a mutation
  await client.session.get.mutate({ sessionId: "s" });
  // @ts-expect-error the output is typed: a Session has no `colour`
  const colour: string = (await client.session.create.mutate({ title: "x" })).colour;

  return [title, page.items[0]?.id ?? "", queued.id, colour];
}
"""


def _tsc() -> str:
    if shutil.which("node") is None:
        pytest.fail("`node` is not on PATH: the type check needs Node >= 20 and client_js/node_modules")
    if not TSC.exists():
        pytest.fail(f"{TSC} is missing: run `npm ci` in client_js")
    return str(TSC)


def test_app_router_types_a_real_trpc_client_and_rejects_wrong_calls() -> None:
    tsc = _tsc()
    # Inside client_js, so "@trpc/client" resolves from its node_modules like the library's own code.
    work = Path(tempfile.mkdtemp(prefix=".typecheck-", dir=CLIENT_JS))
    try:
        (work / "check.ts").write_text(CHECK_TS)
        (work / "tsconfig.json").write_text(
            '{"extends": "../tsconfig.json", "compilerOptions": {"noEmit": true, "rootDir": ".."},'
            ' "include": [], "files": ["check.ts"]}'
        )
        done = subprocess.run(
            [tsc, "-p", str(work / "tsconfig.json")], cwd=CLIENT_JS, capture_output=True, text=True, timeout=120
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert done.returncode == 0, f"tsc --noEmit failed:\n{done.stdout}\n{done.stderr}"


def test_the_check_file_would_fail_without_its_expected_errors() -> None:
    """The `@ts-expect-error` lines are real errors: the same file without the markers does not compile."""
    tsc = _tsc()
    work = Path(tempfile.mkdtemp(prefix=".typecheck-", dir=CLIENT_JS))
    try:
        (work / "check.ts").write_text(CHECK_TS.replace("// @ts-expect-error", "//"))
        (work / "tsconfig.json").write_text(
            '{"extends": "../tsconfig.json", "compilerOptions": {"noEmit": true, "rootDir": ".."},'
            ' "include": [], "files": ["check.ts"]}'
        )
        done = subprocess.run(
            [tsc, "-p", str(work / "tsconfig.json")], cwd=CLIENT_JS, capture_output=True, text=True, timeout=120
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    errors = [line for line in done.stdout.splitlines() if "error TS" in line]
    assert done.returncode != 0
    assert len(errors) == CHECK_TS.count("// @ts-expect-error"), "\n".join(errors)
