"""A normalization resumed where an earlier request's stopped (``server.llm.convert.history``) makes the turns a
normalization from the start makes: for requests that grow, that share a beginning and then part, or that
change a message in the middle; and the point it resumes from lives only as long as its owner holds it."""

from __future__ import annotations

import gc

from hypothesis import given
from hypothesis import strategies as st
from loop_turns import LoopTurns
from test_llm_convert_properties import SETTINGS, histories

from server.llm import Message, ToolCall
from server.llm.convert import history as conv
from server.llm.convert.history import normalize, resume_point


def from_the_start(messages: list[Message]) -> list[conv.Turn]:
    return normalize([m.model_copy() for m in messages])  # other objects: no point registered for them


def test_a_longer_request_resumes_where_the_one_before_stopped() -> None:
    calls = (ToolCall(id="c1", name="lookup"), ToolCall(id="c1", name="again"))  # a reused id: made unique
    messages = [
        Message(role="user", content="hi"),
        Message(role="assistant", content="calling", tool_calls=calls),
        Message(role="tool", tool_call_id="c1", content="found"),
        Message(role="assistant", content="done"),
        Message(role="user", content="and now?"),
        Message(role="assistant", content="again", tool_calls=(ToolCall(id="c1", name="lookup"),)),
        Message(role="user", content="queued while calling"),
    ]
    point = resume_point(messages[0])
    assert resume_point(messages[0]) is point  # one point per first message while it is held
    stops = []
    for end in (2, 5, 7, 5):
        assert normalize(messages[:end]) == from_the_start(messages[:end])
        assert point.state is not None
        stops.append(len(point.state.messages))
    # After "hi" (a call is open after the assistant's), after "and now?", the same again (the last two
    # messages leave a call open), and the same for the request of five again.
    assert stops == [1, 5, 5, 5]
    # The third resumed after "and now?" with the ids given so far: the new call's id is c1_3, as from the start.
    assert normalize(messages)[-3].calls[0].id == "c1_3"  # type: ignore[union-attr]


@SETTINGS
@given(histories(), histories(), st.data())
def test_resumed_normalizations_are_normalizations_from_the_start(first, other, data) -> None:
    held = resume_point(first[0]) if first else None
    # A conversation that grows a few messages at a time.
    for end in [*sorted(data.draw(st.lists(st.integers(1, max(len(first), 1)), max_size=4))), len(first)]:
        assert normalize(first[:end]) == from_the_start(first[:end])
    # Another that shares its beginning and then parts (a branch, an edit).
    cut = data.draw(st.integers(1, max(len(first), 1)))
    branch = first[:cut] + other
    assert normalize(branch) == from_the_start(branch)
    # A message after the first replaced by an equal one, or by another one.
    if len(first) > 1:
        at = data.draw(st.integers(1, len(first) - 1))
        changed = list(first)
        changed[at] = data.draw(st.sampled_from([first[at].model_copy(), Message(role="user", content="edited")]))
        assert normalize(changed) == from_the_start(changed)
        assert normalize(first) == from_the_start(first)
    del held


def test_a_point_lives_as_long_as_its_owner_holds_it() -> None:
    messages = [Message(role="user", content="hi"), Message(role="assistant", content="hello")]
    point = resume_point(messages[0])
    normalize(messages)
    assert point.state is not None and point.state.messages == tuple(messages)
    key = id(messages[0])
    del point
    gc.collect()
    assert key not in conv._POINTS  # nothing else held it: gone, and no normalization keeps a state for it
    normalize(messages)
    assert key not in conv._POINTS


async def test_a_long_conversation_is_normalized_ahead_a_slice_at_a_time() -> None:
    """``normalize_ahead`` repairs a long conversation with turns of the event loop between slices, and the
    adapter's normalization then resumes at its end: the same turns as from the start."""
    messages: list[Message] = []
    for i in range(3 * conv.NORMALIZE_SLICE // 4 + 2):  # four messages a round
        call = ToolCall(id=f"c{i % 7}", name="lookup")  # ids reused: made unique, which depends on all before
        messages += [
            Message(role="user", content=f"q{i}"),
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", tool_call_id=call.id, content=f"r{i}"),
            Message(role="assistant", content=f"a{i}"),
        ]
    async with LoopTurns() as turns:
        point = await conv.normalize_ahead(messages)
    assert turns.count >= 3  # one turn of the loop after each slice
    assert point is not None and point.state is not None
    assert len(point.state.messages) == len(messages)  # the adapter has nothing left to add
    assert normalize(messages) == from_the_start(messages)
    # A short conversation is left to the adapter; one already normalized is not normalized again.
    assert await conv.normalize_ahead(messages[:8]) is None
    done = point.state
    assert await conv.normalize_ahead([*messages, Message(role="user", content="more")]) is point
    assert point.state is done
