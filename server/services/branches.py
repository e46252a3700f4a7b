"""Conversations as trees (docs/api.md "Versions and branches").

Every message has a parent, the message before it on its branch; messages with the same parent are versions of
each other, in creation order. The session's *active path* is the branch every device shows, every request the
model gets and where new messages go: each message row says whether it is on it (``active``), so reading it is
one indexed range, paged by ordinal as a line was.

The active path changes only here, under the session row lock, with one ``branch-changed`` event per change: the
path is now the path up to ``parentId`` followed by the messages ``path`` carries. A message that leaves the
path records the seq of that event (``left_seq``), so a switch to a message goes down to the leaf that was
active last below it.

Choices made here:

* An answer's versions are versions of its first message: regenerating an answer (whichever of its messages is
  named: a tool round trip is several) makes a new first message under the message it answers, so tool calls
  and their results stay on the branch that made them.
* The model's request is the active path (``engine.history``), so a branch never reads another's calls, results
  or files.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..domain import events
from ..protocol.errors import RpcError
from ..store import repo
from ..store.models import Message
from ..store.repo import TreeNode
from .transitions import new_id
from .uow import SessionTx

ANSWER_ROLES = ("assistant", "tool")


def path_to(nodes: Sequence[TreeNode], message_id: str | None) -> list[str]:
    """The ids from the start of the conversation down to ``message_id`` (empty for None)."""
    parents = {n[0]: n[1] for n in nodes}
    out: list[str] = []
    current = message_id
    while current is not None:
        out.append(current)
        current = parents.get(current)
        if len(out) > len(parents):  # never on a tree; a cycle would otherwise never end
            raise RpcError("INTERNAL_SERVER_ERROR", "The conversation's tree is broken")
    out.reverse()
    return out


def below(nodes: Sequence[TreeNode], message_id: str) -> list[str]:
    """From ``message_id`` down to a leaf, each time into the child on the active path or else the child that
    left it last (the newest, for children that never left it); ``message_id`` itself not included."""
    children: dict[str | None, list[TreeNode]] = {}
    for node in nodes:
        children.setdefault(node[1], []).append(node)
    out: list[str] = []
    current = message_id
    while children.get(current):
        kids = children[current]
        chosen = max(kids, key=lambda n: (n[3], n[4], n[2]))
        out.append(chosen[0])
        current = chosen[0]
    return out


async def make_active(tx: SessionTx, path: list[str], nodes: Sequence[TreeNode] | None = None) -> bool:
    """Make ``path`` (ids from the start, in order) the active path, with its ``branch-changed`` event; False
    (and nothing written) when it is the active path already."""
    if nodes is None:
        nodes = await repo.message_tree(await tx.plain(), tx.row.id)
    current = [n[0] for n in nodes if n[3]]
    shared = 0
    while shared < min(len(current), len(path)) and current[shared] == path[shared]:
        shared += 1
    leaving, entering = current[shared:], path[shared:]
    if not leaving and not entering:
        return False
    seq = tx.row.last_seq + 1  # the seq of the event emitted below
    rows = {m.id: m for m in await repo.messages_by_id(await tx.orm(), leaving + entering)}
    for mid in leaving:
        rows[mid].active = False
        rows[mid].left_seq = seq
    for mid in entering:
        rows[mid].active = True
    await (await tx.orm()).flush()
    entered = [rows[mid] for mid in entering]
    versions = await repo.siblings(await tx.orm(), tx.row.id, entered)
    parent = path[shared - 1] if shared > 0 else None
    emitted = tx.emit(events.branch_changed(parent, [repo.message_wire(m, versions) for m in entered]))
    assert emitted.seq == seq
    return True


async def message_of(tx: SessionTx, message_id: str) -> Message:
    row = await repo.session_message(await tx.orm(), tx.row.id, message_id)
    if row is None:
        raise RpcError("NOT_FOUND", "Message not found")
    return row


async def cut_before(tx: SessionTx, message: Message) -> None:
    """Make the active path end just before ``message`` (at its parent): the next message appended there is
    a new version of it."""
    nodes = await repo.message_tree(await tx.plain(), tx.row.id)
    await make_active(tx, path_to(nodes, message.parent_id), nodes)


async def switch_to(tx: SessionTx, message_id: str) -> bool:
    """``session.switchBranch``: the path through ``message_id``, down to the leaf active last below it."""
    await message_of(tx, message_id)
    nodes = await repo.message_tree(await tx.plain(), tx.row.id)
    return await make_active(tx, path_to(nodes, message_id) + below(nodes, message_id), nodes)


async def answer_start(tx: SessionTx, message: Message) -> Message:
    """The first message of the answer ``message`` belongs to: going up from it while the messages are the
    model's (assistant text and calls, tool results)."""
    nodes = await repo.message_tree(await tx.plain(), tx.row.id)
    ids = path_to(nodes, message.id)
    rows = {m.id: m for m in await repo.messages_by_id(await tx.orm(), ids)}
    start = message
    for mid in reversed(ids[:-1]):
        if rows[mid].role not in ANSWER_ROLES:
            break
        start = rows[mid]
    return start


async def last_answer(tx: SessionTx) -> Message | None:
    """The last assistant message on the active path."""
    for row in reversed(await repo.list_messages(await tx.orm(), tx.row.id, limit=200)):
        if row.role == "assistant":
            return row
    return None


async def active_leaf(tx: SessionTx) -> Message | None:
    rows = await repo.list_messages(await tx.orm(), tx.row.id, limit=1)
    return rows[0] if rows else None


def copies(session_id: str, path: Sequence[Message], now: datetime) -> list[dict[str, Any]]:
    """Rows for a new session whose history is ``path`` (``session.fork``): new ids, one line, nothing
    streaming (an answer copied mid-stream is copied as it stands, interrupted), no runs."""
    out: list[dict[str, Any]] = []
    for ordinal, m in enumerate(path, 1):
        out.append(
            {
                "id": new_id(),
                "session_id": session_id,
                "ordinal": ordinal,
                "parent_id": out[-1]["id"] if out else None,
                "active": True,
                "left_seq": 0,
                "role": m.role,
                "content": m.content,
                "attachments": list(m.attachments or []),
                "tool_calls": m.tool_calls,
                "tool_call_id": m.tool_call_id,
                "status": "interrupted" if m.status == "streaming" else m.status,
                "finish_reason": m.finish_reason,
                "usage": m.usage,
                "run_id": None,
                "created_at": now,
                "is_error": m.is_error,
                "client_request_id": None,
                "notices": m.notices,
            }
        )
    return out
