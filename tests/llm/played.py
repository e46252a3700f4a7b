"""Random sessions played out through the engine's real run transitions (``server.services.transitions``), on a real
database: the rows a session can actually hold after sends, steering, instructions, context and provider
switches, tool calls of every kind (server, client, approval, unknown; parallel), approvals and denials, late
outputs, aborts and crashes mid-text and mid-tool-call, errors, ``length`` stops and step limits; user messages
with uploaded files (an image, a PDF, a text file, one gone from storage) for models with and without vision;
and the conversation as a tree (``server.services.branches``): edits of any user message, regenerations of any
answer (by another provider), continues after a ``length`` stop, answers taken over after a crash and continued,
switches to any branch, and forks into new sessions (whose history is checked too).

Every time the model would be asked (the start of each step, and at the end), the stored history is turned into
the canonical request exactly as the run loop does (``engine.history.build_stored_request``, checked against one
converted from every row anew) and converted for every target, then checked against that target's rules
(``test_llm_convert_properties``). Used by the property test (``test_played_histories.py``) and by
``bench/played_histories.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from attachment_files import pdf, png

from server.domain.models import ToolOutcome
from server.engine.history import Conversations, build_stored_request, load_files
from server.llm import ChatRequest, ModelInputs, ToolCallEvent
from server.protocol.errors import RpcError
from server.services import branches, queue, transitions
from server.services.uow import SessionTx, UnitOfWork
from server.settings import Settings
from server.store import repo, session_row
from server.store.models import ChatSession, Message, User, utcnow

OWNER = "player"
# The conversations a server keeps between steps, as large as a server's by default: shared by every history
# played in this process, as a server's are by every session it runs.
CONVERSATIONS = Conversations(Settings.model_fields["conversation_cache_bytes"].default)
LEASE = 60.0
TOOLS = [
    {"name": "srv", "executor": "server", "requiresApproval": False},
    {"name": "cli", "executor": "client", "requiresApproval": False},
    {"name": "apr", "executor": "server", "requiresApproval": True},
]
ID_POOL = [
    "call_abc123",
    "toolu_01A09q90qw90lq917835lq9",
    "functions.Bash:0",
    "chatcmpl-tool-9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "x" * 64,
    "",
    "dup",
]
ARGS = ['{"city": "Paris"}', "{}", "", '{"city": "Par', "[1, 2]", "null"]
TEXTS = ["", "  ", "hello", "queued message", "multi\nline", "trailing space  ", "ok"]
PROVIDERS = ["echo", "openai", "anthropic", "google", "ollama"]
# Uploaded files a user message may carry (as the rows hold them), their bytes, and one that is gone from storage.
FILES = {
    "f-png": ({"fileId": "f-png", "name": "shot.png", "mediaType": "image/png", "size": 0}, png(8, 8)),
    "f-pdf": ({"fileId": "f-pdf", "name": "doc.pdf", "mediaType": "application/pdf", "size": 0}, pdf("page one")),
    "f-txt": ({"fileId": "f-txt", "name": "notes.txt", "mediaType": "text/plain", "size": 0}, b"some notes"),
    "f-gone": ({"fileId": "f-gone", "name": "gone.png", "mediaType": "image/png", "size": 0}, None),
}
ATTACHMENTS = [[], [], [], ["f-png"], ["f-pdf", "f-txt"], ["f-gone"], ["f-png", "f-pdf", "f-txt"]]
# What the session's model takes: decided per target by the documented rule, or a model without vision.
INPUTS = [None, None, ModelInputs(images=False, documents=False)]
MAX_STEPS = 4

Check = Callable[[ChatRequest], None]


def new_session(user: User, rng: random.Random) -> ChatSession:
    return _session(user.id, rng.choice(PROVIDERS), "m", rng.choice([None, "Be brief."]))


def _session(owner_id: str, provider: str, model: str, system_prompt: str | None) -> ChatSession:
    """A fresh idle session with the played tools and a paused queue."""
    now = utcnow()
    return ChatSession(
        id=transitions.new_id(),
        owner_id=owner_id,
        title="",
        title_source="none",
        provider=provider,
        model=model,
        system_prompt=system_prompt,
        defaults={"temperature": 0.7, "topP": 0.9},  # sampling options, which some targets refuse
        tools=TOOLS,
        tool_mode="parallel",
        busy_policy="enqueue",
        disable_streaming=False,
        meta={},
        status="idle",
        queue_paused=True,
        usage_input_tokens=0,
        usage_output_tokens=0,
        last_seq=0,
        created_at=now,
        updated_at=now,
    )


async def play(
    uow: UnitOfWork, user: User, rng: random.Random, check: Check, ops: int = 14, branching: float = 0.0
) -> tuple[int, int]:
    """Play one session, or a tree of sessions that share their beginnings; returns (histories played,
    requests checked).

    The whole tree runs in one database transaction (rolled back at the end): each operation is a ``SessionTx``
    that flushes its rows and events as a committed one would, without paying for a commit. After each
    operation, with probability ``branching``, the session forks: the state is saved (a SAVEPOINT), a second
    continuation is played from it with other random choices, and the state is rolled back to the fork for the
    first. Every leaf is one complete history of ``ops`` operations, distinct from all others; a request built
    on a shared beginning is checked once, as it is the same request for every history that shares it. With
    ``branching=0.5`` a tree has about 290 histories and a history costs about a fifth of the operations of one
    played alone."""
    checked = 0
    async with uow.db.write() as db:
        row = new_session(user, rng)
        db.add(row)
        await db.flush()

        inputs = rng.choice(INPUTS)

        async def ask(exclude: str | None = None, continuation: bool = False, session: ChatSession = row) -> None:
            nonlocal checked
            await db.flush()
            rows = await repo.stored_history(db.plain, session.id)
            request = build_stored_request(
                session, rows, exclude=exclude, inputs=inputs, continuation=continuation, cache=CONVERSATIONS
            )
            # What the session's earlier steps left in the process's conversations (forks and rollbacks included)
            # must make the request a conversion of every row makes.
            fresh = build_stored_request(
                session, rows, exclude=exclude, inputs=inputs, continuation=continuation, cache=Conversations(0)
            )
            assert request == fresh
            check(await load_files(request, read_file))
            checked += 1

        async def step(rng: random.Random) -> None:
            await db.flush()
            locked = await session_row.lock(db.plain, row.id)
            assert locked is not None
            t = SessionTx(db, locked, uow.retention)
            asking = None
            forked = None
            if row.run_id is None:
                forked = await idle_op(t, rng)
            elif row.status == "requires-action":
                await waiting_op(t, rng)
            else:
                asking = await running_op(t, rng)
            await t.finish()
            await db.refresh(row)  # the session as the operation left it (its row was written by ``finish``)
            if asking is not None:
                message_id, continuation = asking
                await ask(exclude=None if continuation else message_id, continuation=continuation)
            if forked is not None:
                await ask(session=forked)

        async def played_from(done: int, rng: random.Random) -> int:
            """Plays operations ``done..ops`` from the current state; returns how many histories ended."""
            if done == ops:
                await ask()
                return 1
            if rng.random() >= branching:
                await step(rng)
                return await played_from(done + 1, rng)
            histories = 0
            for seed in (rng.getrandbits(64), rng.getrandbits(64)):
                fork = await db.begin_nested()
                child = random.Random(seed)
                await step(child)
                histories += await played_from(done + 1, child)
                await fork.rollback()
                # Rolling back to the fork restores the rows; objects in memory (the session row's event
                # counter is set without marking it changed) are read again.
                db.expire_all()
                await db.refresh(row)
            return histories

        histories = await played_from(0, rng)
        await db.rollback()
    return histories, checked


async def read_file(file_id: str) -> bytes:
    data = FILES[file_id][1]
    if data is None:
        raise RpcError("NOT_FOUND", "File not found")
    return data


def failed_or_ok(rng: random.Random) -> ToolOutcome:
    """How a tool that ran ended: mostly fine, sometimes a reported failure."""
    return "error" if rng.random() < 0.2 else "ok"


def attachments(rng: random.Random) -> list[dict[str, Any]]:
    return [FILES[f][0] for f in rng.choice(ATTACHMENTS)]


async def idle_op(t: Any, rng: random.Random) -> ChatSession | None:
    """One thing done to an idle session; returns a session forked from it, if that is what was done."""
    op = rng.choice(
        [
            "send",
            "send",
            "send",
            "instructions",
            "instructions_respond",
            "switch_context",
            "switch_provider",
            "late_output",
            "edit",
            "regenerate",
            "continue",
            "switch_branch",
            "fork",
        ]
    )
    if op in ("edit", "regenerate", "continue", "switch_branch", "fork"):
        return await tree_op(t, rng, op)
    if op == "send":
        queue.set_paused(t, False)
        await transitions.start_with_message(t, OWNER, LEASE, rng.choice(TEXTS), attachments(rng), "message")
    elif op in ("instructions", "instructions_respond"):
        await transitions.add_system_messages(t, [rng.choice(TEXTS)] * rng.randint(0, 2))
        if op == "instructions_respond":
            await transitions.begin_run(t, OWNER, LEASE, "instructions")
    elif op == "switch_context":
        await transitions.add_message(t, "system", "Context changed to: directory=/srv/app")
    elif op == "switch_provider":
        t.row.provider = rng.choice(PROVIDERS)
    else:
        # A client output for a call of a run that has ended is refused (services.runs): nothing is stored.
        pass
    return None


async def tree_op(t: Any, rng: random.Random, op: str) -> ChatSession | None:
    """The versions and branches of an idle session, done as ``services.versions`` does them."""
    orm = await t.orm()
    every = list(await repo.messages_by_id(orm, [n[0] for n in await repo.message_tree(orm, t.row.id)]))
    if not every:
        return None
    if op == "edit":
        users = [m for m in every if m.role == "user"]
        if users:
            target = rng.choice(users)
            await branches.cut_before(t, target)
            queue.set_paused(t, False)
            await transitions.start_with_message(t, OWNER, LEASE, rng.choice(TEXTS), attachments(rng), "edit")
    elif op == "regenerate":
        answers = [m for m in every if m.role in branches.ANSWER_ROLES]
        if answers:
            start = await branches.answer_start(t, rng.choice(answers))
            await branches.cut_before(t, start)
            # another provider asked
            await transitions.begin_run(
                t, OWNER, LEASE, "regenerate", provider=rng.choice(PROVIDERS), model="other-model"
            )
    elif op == "continue":
        leaf = await branches.active_leaf(t)
        if leaf is not None and leaf.role == "assistant" and leaf.finish_reason == "length":
            await transitions.begin_run(t, OWNER, LEASE, "continue", continues_id=leaf.id)
    elif op == "switch_branch":
        await branches.switch_to(t, rng.choice(every).id)
    else:
        target = rng.choice(every)
        path = branches.path_to(await repo.message_tree((await t.orm()), t.row.id), target.id)
        found = {m.id: m for m in every}
        fork = new_session_like(t.row)
        (await t.orm()).add(fork)
        await (await t.orm()).flush()
        (await t.orm()).add_all(Message(**c) for c in branches.copies(fork.id, [found[i] for i in path], utcnow()))
        await (await t.orm()).flush()
        return fork
    return None


def new_session_like(row: ChatSession) -> ChatSession:
    return _session(row.owner_id, row.provider, row.model, row.system_prompt)


async def running_op(t: Any, rng: random.Random) -> tuple[str, bool] | None:
    """One thing happening while a run is in progress; returns the id of a message left streaming (the model
    is being asked right now) and whether it is an answer that goes on (a continuation), if any."""
    run = await repo.get_run((await t.orm()), t.row.run_id)
    assert run is not None
    streaming = await repo.streaming_messages((await t.orm()), t.row.id)
    op = rng.choice(["step", "step", "step", "steer", "instructions", "abort", "crash", "crash_resumed"])
    if op == "step" and run.continues_id is not None:
        # The run's next step goes on with an answer (``engine.run``): when it is still the path's last message.
        going_on = await (await t.orm()).get(Message, run.continues_id)
        leaf = await branches.active_leaf(t)
        run.continues_id = None
        if going_on is not None and leaf is not None and leaf.id == going_on.id and going_on.role == "assistant":
            going_on.status, going_on.finish_reason = "streaming", None
            run.steps += 1
            return going_on.id, True
        streaming = await repo.streaming_messages((await t.orm()), t.row.id)
    if op == "crash_resumed":
        await transitions.take_over(t, OWNER, LEASE, resume=True)
        return None
    if op == "steer":
        await transitions.add_message(t, "user", rng.choice(TEXTS), run_id=run.id, attachments=attachments(rng))
        return (streaming[0].id, False) if streaming else None
    if op == "instructions":
        await transitions.add_system_messages(t, [rng.choice(TEXTS)])
        return (streaming[0].id, False) if streaming else None
    if op == "abort":
        await transitions.stop_run(t, "aborted")
        return None
    if op == "crash":
        await transitions.recover(t)
        return None
    if not streaming:
        if run.steps >= MAX_STEPS:  # the step limit ends the run
            transitions.end_run(
                t, run, "failed", error={"code": "max_steps", "message": "x", "retryable": False}, pause=True
            )
            transitions.go_idle(t)
            return None
        run.steps += 1
        message = await transitions.add_message(t, "assistant", "", status="streaming", run_id=run.id)
        return message.id, False  # the model is asked now: the request is built without this message
    message = streaming[0]
    text = message.content + rng.choice(TEXTS)  # a continued answer keeps what it had
    outcome = rng.choice(["stop", "stop", "tools", "tools", "length", "error"])
    if outcome in ("stop", "length"):
        transitions.complete_message(t, message, status="complete", content=text, finish_reason=outcome)
        if not await repo.steered_after((await t.orm()), t.row.id, run.id, message.ordinal):
            transitions.end_run(t, run, "finished", finish_reason=outcome)
            transitions.go_idle(t)
    elif outcome == "error":
        transitions.complete_message(t, message, status="error", content=text, finish_reason="error")
        transitions.end_run(t, run, "failed", error={"code": "x", "message": "x", "retryable": True}, pause=True)
        transitions.go_idle(t)
    else:
        events = [
            ToolCallEvent(
                id=rng.choice(ID_POOL), name=rng.choice(["srv", "cli", "apr", "nope"]), arguments=rng.choice(ARGS)
            )
            for _ in range(rng.randint(1, 3))
        ]
        ids = await transitions.unique_call_ids(t, events)
        calls = [{"id": i, "name": e.name, "arguments": e.arguments} for i, e in zip(ids, events)]
        transitions.complete_message(
            t, message, status="complete", content=text, finish_reason="tool-calls", tool_calls=calls
        )
        await transitions.register_tool_calls(t, run, message, calls, {d["name"]: d for d in TOOLS})
        open_calls = t.adopt(await repo.run_tool_calls(await t.plain(), t.row.id, run.id, open_only=True))
        for call in transitions.runnable(open_calls):  # server tools finish (some may be cut off by a crash later)
            if rng.random() < 0.8:
                await transitions.add_tool_result(t, call, rng.choice(TEXTS), failed_or_ok(rng))
        open_calls = t.adopt(await repo.run_tool_calls(await t.plain(), t.row.id, run.id, open_only=True))
        if transitions.waiting_on_people(open_calls):
            transitions.suspend(t, run)
    return None


async def waiting_op(t: Any, rng: random.Random) -> None:
    run_id = t.row.run_id
    calls = t.adopt(await repo.run_tool_calls(await t.plain(), t.row.id, run_id, open_only=True))
    op = rng.choice(["answer", "answer", "answer", "steer", "abort"])
    if op == "steer":
        await transitions.add_message(t, "user", rng.choice(TEXTS), run_id=run_id, attachments=attachments(rng))
        return
    if op == "abort":
        await transitions.stop_run(t, "aborted")
        return
    for call in calls:
        if call.approval == "pending":
            approved = rng.random() < 0.6
            call.approval = "approved" if approved else "denied"
            if not approved:
                await transitions.add_tool_result(t, call, transitions.DENIED_RESULT, "denied")
            elif rng.random() < 0.8:
                await transitions.add_tool_result(t, call, rng.choice(TEXTS), "ok")
        elif call.executor == "client" and not call.has_result:
            await transitions.add_tool_result(t, call, rng.choice(TEXTS), failed_or_ok(rng))
        elif not call.has_result and call.executor == "server":
            await transitions.add_tool_result(t, call, rng.choice(TEXTS), "ok")
    await transitions.maybe_resume(t, OWNER, LEASE)
