"""Worked conversion cases (the awkward histories a converter meets), each asserted on every target's request."""

from __future__ import annotations

from server.llm import ChatRequest, Message, RequestOptions, ToolCall
from server.llm.convert import (
    COMPATIBLE,
    INTERRUPTED_RESULT,
    MISTRAL,
    AssistantTurn,
    ResultsTurn,
    UserTurn,
    arguments_object,
    map_tool_call_id,
    normalize,
    to_anthropic_request,
    to_google_request,
    to_ollama_request,
    to_openai_request,
)


def req(*messages: Message, system_prompt: str | None = None) -> ChatRequest:
    return ChatRequest(messages=messages, options=RequestOptions(model="m", system_prompt=system_prompt))


def user(text: str) -> Message:
    return Message(role="user", content=text)


def call(id: str, name: str = "f", args: str = "{}") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=args)


def tool(id: str, content: str = "ok", **kw) -> Message:
    return Message(role="tool", tool_call_id=id, content=content, **kw)


def test_parallel_results_out_of_order_are_grouped_in_call_order():
    r = req(
        user("go"),
        Message(role="assistant", tool_calls=(call("a"), call("b"), call("c"))),
        tool("c", "C"),
        tool("a", "A"),
        tool("b", "B"),
    )
    oa = to_openai_request(r)["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in oa[2:]] == [("a", "A"), ("b", "B"), ("c", "C")]
    an = to_anthropic_request(r)["messages"]
    assert [b["tool_use_id"] for b in an[2]["content"]] == ["a", "b", "c"]
    go = to_google_request(r)["contents"]
    assert [p["function_response"]["response"]["output"] for p in go[2]["parts"]] == ["A", "B", "C"]


def test_orphan_results_are_dropped():
    r = req(tool("ghost", "lost"), user("hi"), Message(role="assistant", content="hey"), tool("ghost2"))
    for body in (to_openai_request(r)["messages"], to_ollama_request(r)["messages"]):
        assert [m["role"] for m in body] == ["user", "assistant"]
    assert "lost" not in repr(to_anthropic_request(r)) and "lost" not in repr(to_google_request(r))


def test_interrupted_call_gets_a_synthesised_result_before_the_next_user_message():
    r = req(
        user("weather?"),
        Message(role="assistant", tool_calls=(call("c1", "get_weather", '{"city": "Par'),), status="interrupted"),
        user("hello?"),
    )
    turns = normalize(r.messages)
    assert isinstance(turns[2], ResultsTurn) and turns[2].results[0].synthetic
    assert turns[2].results[0].content == INTERRUPTED_RESULT and isinstance(turns[3], UserTurn)
    oa = to_openai_request(r)["messages"]
    assert [m["role"] for m in oa] == ["user", "assistant", "tool", "user"]
    assert oa[1]["tool_calls"][0]["function"]["arguments"] == '{"city": "Par'  # kept verbatim for OpenAI
    an = to_anthropic_request(r)["messages"]
    assert an[1]["content"][0]["input"] == {"INVALID_JSON": '{"city": "Par'}  # wrapped for object targets
    assert an[2]["content"][0]["is_error"] is True and an[2]["content"][1] == {"type": "text", "text": "hello?"}


def test_argument_wrapping_is_consistent():
    assert arguments_object("") == {} and arguments_object("null") == {} and arguments_object("  ") == {}
    assert arguments_object("[1,2]") == {"INVALID_JSON": "[1,2]"}
    assert arguments_object('"x"') == {"INVALID_JSON": '"x"'}
    assert arguments_object('{"a": 1}') == {"a": 1}


def test_mid_conversation_system_per_target():
    r = req(
        Message(role="system", content="S1"),
        user("q"),
        Message(role="assistant", tool_calls=(call("c1"),)),
        tool("c1"),
        Message(role="system", content="S2"),
        system_prompt="P",
    )
    oa = to_openai_request(r)["messages"]
    assert [(m["role"], m.get("content")) for m in oa if m["role"] == "system"] == [
        ("system", "P"),
        ("system", "S1"),
        ("system", "S2"),
    ]
    assert oa[-1] == {"role": "system", "content": "S2"}  # inline, in place, after the result
    compat = to_openai_request(r, COMPATIBLE)["messages"]
    assert compat[0] == {"role": "system", "content": "P\n\nS1"}
    assert compat[-1] == {"role": "user", "content": "<system>\nS2\n</system>"}
    an = to_anthropic_request(r)
    assert an["system"] == "P\n\nS1"
    assert an["messages"][-1]["content"][-1] == {"type": "text", "text": "<system>\nS2\n</system>"}
    assert an["messages"][-1]["content"][0]["type"] == "tool_result"
    go = to_google_request(r)
    assert go["config"]["system_instruction"] == "P\n\nS1"
    # Never inside the functionResponse content.
    assert go["contents"][-1] == {"role": "user", "parts": [{"text": "<system>\nS2\n</system>"}]}


def test_consecutive_queued_user_messages():
    r = req(user("one"), user("two"), user("three"))
    assert [m["content"] for m in to_openai_request(r)["messages"]] == ["one", "two", "three"]
    assert to_openai_request(r, COMPATIBLE)["messages"] == [{"role": "user", "content": "one\n\ntwo\n\nthree"}]
    an = to_anthropic_request(r)["messages"]
    assert len(an) == 1 and [b["text"] for b in an[0]["content"]] == ["one", "two", "three"]
    go = to_google_request(r)["contents"]
    assert len(go) == 1 and len(go[0]["parts"]) == 3


def test_history_starting_with_assistant_gets_a_user_anchor():
    r = req(Message(role="assistant", content="hi"), user("yo"))
    assert to_anthropic_request(r)["messages"][0]["role"] == "user"
    assert to_google_request(r)["contents"][0]["role"] == "user"
    assert to_openai_request(r)["messages"][0]["role"] == "assistant"  # OpenAI has no such rule


def test_duplicate_and_missing_ids_are_made_unique_and_results_follow():
    r = req(
        user("go"),
        Message(role="assistant", tool_calls=(call("dup"), call(""))),
        tool("dup", "first"),
        Message(role="assistant", tool_calls=(call("dup"),)),
        tool("dup", "second"),
    )
    oa = to_openai_request(r)["messages"]
    ids = [c["id"] for m in oa if m["role"] == "assistant" for c in m["tool_calls"]]
    assert ids == ["dup", "call_1_1", "dup_2"]
    assert [(m["tool_call_id"], m["content"]) for m in oa if m["role"] == "tool"] == [
        ("dup", "first"),
        ("call_1_1", INTERRUPTED_RESULT),
        ("dup_2", "second"),
    ]


def test_foreign_ids_are_mapped_identically_on_call_and_result():
    long_id = "y" * 64
    r = req(
        user("go"),
        Message(role="assistant", tool_calls=(call("functions.Bash:0"), call(long_id), call("chatcmpl-tool-ab12"))),
        tool("functions.Bash:0"),
        tool(long_id),
        tool("chatcmpl-tool-ab12"),
    )
    an = to_anthropic_request(r)["messages"]
    assert [b["id"] for b in an[1]["content"]] == [b["tool_use_id"] for b in an[2]["content"]]
    oa = to_openai_request(r)["messages"]
    assert [len(c["id"]) <= 40 for c in oa[1]["tool_calls"]] == [True, True, True]
    assert [c["id"] for c in oa[1]["tool_calls"]] == [m["tool_call_id"] for m in oa[2:]]
    mi = to_openai_request(r, MISTRAL)["messages"]
    assert all(len(c["id"]) == 9 and c["id"].isalnum() for c in mi[1]["tool_calls"])
    assert map_tool_call_id("toolu_01A", "anthropic") == "toolu_01A"  # valid ids are untouched
    assert map_tool_call_id("a.b", "anthropic") != map_tool_call_id("a:b", "anthropic")  # no collapse


def test_error_and_empty_results_per_target():
    r = req(
        user("go"),
        Message(role="assistant", tool_calls=(call("e"), call("z"))),
        tool("e", "boom", is_error=True),
        tool("z", ""),
    )
    an = to_anthropic_request(r)["messages"][2]["content"]
    assert an[0]["is_error"] is True and "is_error" not in an[1] and an[1]["content"]
    go = to_google_request(r)["contents"][2]["parts"]
    assert go[0]["function_response"]["response"] == {"error": "boom"}
    assert go[1]["function_response"]["response"] == {"output": ""}
    assert [m["content"] for m in to_openai_request(r)["messages"][2:]] == ["boom", ""]


def test_text_with_calls_and_back_to_back_assistants():
    r = req(
        user("go"),
        Message(role="assistant", content="", status="error"),  # failed generation, nothing said
        Message(role="assistant", content="Thinking aloud."),
        Message(role="assistant", content="Calling now.", tool_calls=(call("c"),)),
        tool("c"),
    )
    turns = normalize(r.messages)
    assert [type(t) for t in turns] == [UserTurn, AssistantTurn, AssistantTurn, ResultsTurn]
    an = to_anthropic_request(r)["messages"]
    assert [b["type"] for b in an[1]["content"]] == ["text", "text", "tool_use"]  # merged, one assistant turn
    compat = to_openai_request(r, COMPATIBLE)["messages"]
    assert [m["role"] for m in compat] == ["user", "assistant", "tool"]
    assert compat[1]["content"] == "Thinking aloud.\n\nCalling now."
    go = to_google_request(r)["contents"]
    assert [list(p) for p in go[1]["parts"]][:2] == [["text"], ["text"]]


def test_calls_only_turn_has_no_empty_text_anywhere():
    r = req(user("go"), Message(role="assistant", content="   ", tool_calls=(call("c"),)), tool("c"))
    assert to_openai_request(r)["messages"][1]["content"] is None
    assert [b["type"] for b in to_anthropic_request(r)["messages"][1]["content"]] == ["tool_use"]
    assert all("text" not in p for p in to_google_request(r)["contents"][1]["parts"])


def test_sampling_options_go_to_every_target_but_anthropic():
    # Anthropic's API version (2026-10-21) refuses temperature, top_p and top_k with a 400.
    r = ChatRequest(
        messages=(user("hi"),), options=RequestOptions(model="m", temperature=0.7, top_p=0.9, max_tokens=50)
    )
    an = to_anthropic_request(r)
    assert not {"temperature", "top_p", "top_k"} & set(an) and an["max_tokens"] == 50
    oa = to_openai_request(r)
    assert (oa["temperature"], oa["top_p"]) == (0.7, 0.9)
    go = to_google_request(r)["config"]
    assert (go["temperature"], go["top_p"]) == (0.7, 0.9)
    ol = to_ollama_request(r)["options"]
    assert (ol["temperature"], ol["top_p"]) == (0.7, 0.9)
