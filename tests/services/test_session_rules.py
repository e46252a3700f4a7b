"""Sessions (``services/sessions.py``), versions and branches (``services/versions.py``), drafts and unread marks
called directly: what each rule keeps, and that a refusal is typed and changes nothing."""

from __future__ import annotations

import pytest
from service_helpers import idle, last_seq, until

from server.domain.events import dumps
from server.protocol.errors import RpcError
from server.rpc.context import Services
from server.services.requests import RequestKey
from server.store import repo
from server.store.models import User

pytestmark = pytest.mark.fast


async def test_a_session_is_its_owners_alone(services: Services, alice: User, bob: User) -> None:
    s = await services.sessions.create(alice, {"title": "plans"})
    assert s.title == "plans" and s.provider == "echo"
    assert [x["id"] for x in await _listed(services, alice)] == [s.id]
    assert await _listed(services, bob) == []
    for call in (services.sessions.snapshot(bob, s.id), services.sessions.update(bob, s.id, {"title": "mine"})):
        with pytest.raises(RpcError) as refused:
            await call
        assert refused.value.code == "NOT_FOUND"
    assert (await services.sessions.snapshot(alice, s.id)).session.title == "plans"


async def test_a_create_repeated_with_its_request_id_makes_one_session(services: Services, alice: User) -> None:
    key = RequestKey(alice.id, "create-1", "session.create", "d")
    first = await services.sessions.create(alice, {"title": "once"}, key)
    again = await services.sessions.create(alice, {"title": "once"}, key)
    assert _id(again) == _id(first)
    assert len(await _listed(services, alice)) == 1


async def test_update_changes_what_it_names_and_bad_values_change_nothing(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {"title": "t"})).id
    updated = await services.sessions.update(alice, sid, {"pinned": True, "system_prompt": "Be brief."})
    assert updated.pinned and updated.system_prompt == "Be brief."
    before = await last_seq(services, sid)
    with pytest.raises(RpcError) as refused:
        await services.sessions.update(alice, sid, {"provider": "openai", "model": None})
    assert refused.value.code == "BAD_REQUEST"
    assert (await services.sessions.snapshot(alice, sid)).session.provider == "echo"
    assert await last_seq(services, sid) == before


async def test_a_deleted_session_is_gone_for_its_owner(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {})).id
    await services.sessions.delete(alice, sid)
    with pytest.raises(RpcError) as gone:
        await services.sessions.snapshot(alice, sid)
    assert gone.value.code == "NOT_FOUND"
    assert await _listed(services, alice) == []


async def test_an_edit_makes_a_new_branch_and_the_old_one_stays_reachable(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {})).id
    await services.runs.send(alice, sid, "first question", [], [], None)
    snap = await until(idle(services, alice, sid))
    question = snap.messages[0]
    await services.versions.edit(alice, sid, question.id, "better question", None, None)
    snap = await until(idle(services, alice, sid))
    assert [(m.role, m.content) for m in snap.messages] == [
        ("user", "better question"),
        ("assistant", "better question"),
    ]
    switched = await services.versions.switch_branch(alice, sid, question.id)
    assert switched["changed"] is True
    snap = await services.sessions.snapshot(alice, sid)
    assert [m.content for m in snap.messages] == ["first question", "first question"]
    with pytest.raises(RpcError) as refused:
        await services.versions.edit(alice, sid, snap.messages[1].id, "an answer is not mine to edit", None, None)
    assert refused.value.code == "PRECONDITION_FAILED"


async def test_regenerate_adds_a_version_of_the_answer(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {})).id
    await services.runs.send(alice, sid, "say it", [], [], None)
    answer = (await until(idle(services, alice, sid))).messages[1]
    await services.versions.regenerate(alice, sid, answer.id, None, None, None)
    snap = await until(idle(services, alice, sid))
    assert [m.content for m in snap.messages] == ["say it", "say it"]
    assert snap.messages[1].id != answer.id


async def test_a_draft_only_moves_forward_from_the_version_it_was_based_on(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {})).id
    phone, laptop = (
        await services.auth.create_token("alice", "phone"),
        await services.auth.create_token("alice", "laptop"),
    )
    phone_id, laptop_id = [(await services.auth.identify(t)).device_id for t in (phone, laptop)]
    saved = await services.drafts.save(alice, phone_id, sid, "half a thought", [], 0)
    assert saved["saved"] and saved["draft"]["version"] == 1 and saved["draft"]["deviceName"] == "phone"
    stale = await services.drafts.save(alice, laptop_id, sid, "an older thought", [], 0)  # based on version 0
    assert not stale["saved"] and stale["draft"]["text"] == "half a thought"
    assert (await services.drafts.get(alice, sid))["text"] == "half a thought"
    cleared = await services.drafts.clear(alice, laptop_id, sid, 1)
    assert cleared["saved"] and cleared["draft"]["text"] == "" and cleared["draft"]["version"] == 2


async def test_an_answer_marks_the_session_unread_until_it_is_read(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {})).id
    await services.runs.send(alice, sid, "hello", [], [], None)
    await until(idle(services, alice, sid))
    assert [x["unread"] for x in await _listed(services, alice)] == [True]
    assert await services.unread.mark_read(alice, sid) is True
    assert [x["unread"] for x in await _listed(services, alice)] == [False]
    assert await services.unread.mark_read(alice, sid) is False  # nothing was unread: nothing written


def _id(reply: object) -> str:
    return reply["id"] if isinstance(reply, dict) else reply.id  # type: ignore[attr-defined]


async def _listed(services: Services, user: User) -> list[dict[str, object]]:
    """The user's sessions as ``session.list`` gives them (live ones, newest first)."""
    return (await services.sessions.list(user, 50, None, None, None))["items"]


async def test_a_fork_copies_the_path_into_a_session_of_its_own(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {"title": "source"})).id
    await services.runs.send(alice, sid, "one", [], [], None)
    await until(idle(services, alice, sid))
    await services.runs.send(alice, sid, "two", [], [], None)
    first_answer = (await until(idle(services, alice, sid))).messages[1]
    fork = await services.sessions.fork(alice, sid, first_answer.id, "the fork")
    fork_id = _id(fork)
    copied = (await services.sessions.snapshot(alice, fork_id)).messages
    assert [m.content for m in copied] == ["one", "one"]
    assert {m.id for m in copied}.isdisjoint({first_answer.id})
    assert len((await services.sessions.snapshot(alice, sid)).messages) == 4  # the source is unchanged


async def test_only_an_answer_cut_off_at_the_length_limit_goes_on(services: Services, alice: User) -> None:
    sid = (await services.sessions.create(alice, {})).id
    await services.runs.send(alice, sid, "complete answer", [], [], None)
    await until(idle(services, alice, sid))
    with pytest.raises(RpcError) as refused:
        await services.versions.continue_(alice, sid)
    assert refused.value.code == "PRECONDITION_FAILED"
    await services.runs.send(alice, sid, "cut short\n/length", [], [], None)
    cut = (await until(idle(services, alice, sid))).messages[-1]
    assert cut.finish_reason == "length"
    went_on = await services.versions.continue_(alice, sid)
    assert went_on["messageId"] == cut.id
    snap = await until(idle(services, alice, sid))
    assert snap.messages[-1].id == cut.id and snap.messages[-1].status == "complete"


async def test_search_and_pages_neither_skip_nor_repeat(services: Services, alice: User) -> None:
    made = [(await services.sessions.create(alice, {"title": f"chat {i}"})).id for i in range(5)]
    await services.sessions.create(alice, {"title": "something else"})
    seen: list[str] = []
    cursor = None
    while True:
        page = await services.sessions.list(alice, 2, cursor, "chat", None)
        seen += [item["id"] for item in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(made) and len(seen) == len(set(seen))


async def test_session_updated_carries_what_the_session_model_gives(services: Services, alice: User) -> None:
    """``session-updated`` is built without the wire model; every field, its order and its JSON are the model's
    (the large fields only when they changed), for a locked row and for an ORM object alike."""
    tool = {"name": "lookup", "description": "d", "parameters": {"type": "object"}, "executor": "client"}
    sid = (
        await services.sessions.create(
            alice,
            {
                "title": "t",
                "tools": [tool],
                "system_prompt": "Be brief.",
                "defaults": {"temperature": 0.5},
                "metadata": {"k": [1, 2]},
                "pinned": True,
            },
        )
    ).id

    def expected(row: object, changed: tuple[str, ...]) -> dict[str, object]:
        body = repo.session_wire(row).wire()  # type: ignore[arg-type]
        return {k: v for k, v in body.items() if k not in repo.LARGE_SESSION_FIELDS or k in changed}

    cases: list[tuple[str, ...]] = [(), repo.LARGE_SESSION_FIELDS, ("metadata",), ("tools", "systemPrompt")]
    async with services.uow.session(None, sid) as tx:
        tx.row.mcp_servers, tx.row.mcp_tools = ["files"], {"files": {"read": {"approval": "ask"}}}
        tx.row.usage_input_tokens, tx.row.queue_paused = 7, True
        for changed in cases:
            got = repo.session_changes_wire(tx.row, changed)
            assert got == expected(tx.row, changed)
            assert dumps(got) == dumps(expected(tx.row, changed))  # the same keys in the same order
    async with services.db.read() as s:
        orm_row = await repo.get_session(s, sid)
        assert orm_row is not None
        for changed in cases:
            assert dumps(repo.session_changes_wire(orm_row, changed)) == dumps(expected(orm_row, changed))
