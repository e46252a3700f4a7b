"""Property tests: any canonical history converts to a request every provider accepts.

Histories are random sequences of user/system/assistant/tool messages with interrupted streams (missing results,
cut-off arguments), parallel calls, orphan and duplicate results, ids in other providers' formats (a provider
switch mid-conversation), reused and empty ids, blank messages and consecutive queued user messages, and user
messages with files (images, PDFs, text, missing, unreadable and unsupported ones, files alone without text), for
models that take images and documents and for models that do not. Each target's checker encodes the server-side
rules that provider's API enforces (each stated with its check) and the attachment formats of docs/attachments.md.
"""

from __future__ import annotations

import base64
import copy
import itertools
import re

from attachment_files import image_file, pdf, pdf_file, png, text_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_replay import ANTHROPIC_REFUSED

from server.llm import Attachment, ChatRequest, Message, ModelInputs, RequestOptions, ToolCall
from server.llm.convert import (
    COMPATIBLE,
    MISTRAL,
    OPENAI,
    to_anthropic_request,
    to_google_request,
    to_ollama_request,
    to_openai_request,
)

# database=None: no example database written outside tests/llm; the strategies are cheap enough to rediscover.
SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

ID_POOL = [
    "call_abc123",
    "toolu_01A09q90qw90lq917835lq9",
    "functions.Bash:0",  # Kimi/Moonshot style, invalid for Anthropic
    "chatcmpl-tool-9f8e7d6c5b4a39281706f5e4d3c2b1a0",  # vLLM, invalid for Mistral
    "x" * 64,  # too long for OpenAI
    "",  # Gemini often has none
    "dup",
]
ARGS_POOL = ['{"city": "Paris"}', "{}", "", '{"city": "Par', "[1, 2]", '"x"', "null", '{"a": {"b": [1, 2]}}']
TEXT = st.sampled_from(["", "  ", "hello", "queued message", "trailing space  ", "multi\nline"])
STATUS = st.sampled_from(["complete", "interrupted", "error", "streaming"])
FILES = [
    image_file(png(8, 6), "dot.png"),
    image_file(png(40, 3000), "tall.png"),  # over every target's side limit: resized
    pdf_file(pdf("Minutes of the meeting"), "minutes.pdf"),
    text_file("print('hi')\n", "hello.py"),
    Attachment(name="gone.jpg", media_type="image/jpeg", missing="it was deleted."),
    Attachment(name="broken.png", media_type="image/png", data=b"\x89PNG but not really"),
    Attachment(name="tool.exe", media_type="application/x-msdownload", data=b"MZ\x90\x00"),
]
ATTACHMENTS = st.lists(st.sampled_from(FILES), max_size=3).map(tuple)
INPUTS = st.sampled_from(
    [
        None,
        ModelInputs(images=True, documents=True),
        ModelInputs(images=True, documents=False),
        ModelInputs(images=False, documents=False),
    ]
)


@st.composite
def histories(draw) -> list[Message]:
    messages: list[Message] = []
    issued: list[str] = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "user", "system", "assistant", "assistant", "tool", "tool", "tool"]))
        if kind == "user":
            messages.append(Message(role=kind, content=draw(TEXT), attachments=draw(ATTACHMENTS)))
        elif kind == "system":
            messages.append(Message(role=kind, content=draw(TEXT)))
        elif kind == "assistant":
            n = draw(st.integers(0, 3))
            calls = tuple(
                ToolCall(
                    id=draw(st.sampled_from(ID_POOL)),
                    name=draw(st.sampled_from(["get_weather", "bash"])),
                    arguments=draw(st.sampled_from(ARGS_POOL)),
                )
                for _ in range(n)
            )
            issued.extend(c.id for c in calls)
            messages.append(Message(role="assistant", content=draw(TEXT), tool_calls=calls, status=draw(STATUS)))
        else:
            target = draw(st.sampled_from([*issued, "unknown_id", "call_abc123"]))
            if not target:
                continue  # a tool message always names its call
            messages.append(Message(role="tool", tool_call_id=target, content=draw(TEXT), is_error=draw(st.booleans())))
    return messages


def request_for(
    messages: list[Message], system_prompt: str | None = None, inputs: ModelInputs | None = None
) -> ChatRequest:
    return ChatRequest(
        messages=tuple(messages), options=RequestOptions(model="m", system_prompt=system_prompt, inputs=inputs)
    )


def check_data_url(url: str, media_types: tuple[str, ...]) -> None:
    head, _, data = url.partition(";base64,")
    assert head.startswith("data:") and head[5:] in media_types and base64.b64decode(data, validate=True)


def check_openai_content(content) -> None:
    """User content: a non-empty string, or parts of the documented kinds [AT1][AT2], none empty."""
    if isinstance(content, str):
        assert content.strip()
        return
    assert content and any(p["type"] != "text" for p in content), "parts only when there is an image or a file"
    for p in content:
        if p["type"] == "text":
            assert p["text"].strip()
        elif p["type"] == "image_url":
            check_data_url(p["image_url"]["url"], ("image/png", "image/jpeg", "image/webp", "image/gif"))
        else:
            assert p["type"] == "file" and p["file"]["filename"]
            check_data_url(p["file"]["file_data"], ("application/pdf",))


SYSTEM_PROMPT = st.sampled_from([None, "You are helpful."])


# ---------------------------------------------------------------------------------------------------- OpenAI


def check_openai(messages: list[dict], *, compatible: bool, mistral_ids: bool) -> None:
    seen_ids: set[str] = set()
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] in ("system", "user", "assistant", "tool")
        if m["role"] == "tool":
            raise AssertionError(f"tool message not preceded by its tool_calls at {i}")
        if m["role"] == "assistant":
            calls = m.get("tool_calls") or []
            if not calls:
                assert isinstance(m["content"], str) and m["content"], "assistant needs content or tool_calls"
            ids = [c["id"] for c in calls]
            for c in calls:
                assert c["type"] == "function" and isinstance(c["function"]["arguments"], str)  # JSON string
                assert 0 < len(c["id"]) <= 40
                if mistral_ids:
                    assert re.fullmatch(r"[a-zA-Z0-9]{9}", c["id"])
            assert len(set(ids)) == len(ids) and not seen_ids & set(ids), "ids unique in the conversation"
            seen_ids.update(ids)
            results = messages[i + 1 : i + 1 + len(calls)]
            # Every call answered, adjacent, in order, nothing in between.
            assert [r["role"] for r in results] == ["tool"] * len(calls)
            assert [r["tool_call_id"] for r in results] == ids
            assert all(isinstance(r["content"], str) for r in results)
            i += 1 + len(calls)
            continue
        if m["role"] == "user":
            check_openai_content(m["content"])
            if compatible and isinstance(m["content"], list):
                assert all(p["type"] != "file" for p in m["content"]), "compatible servers have no file parts"
        else:
            assert isinstance(m["content"], str) and m["content"].strip()
        i += 1
    assert any(m["role"] != "system" for m in messages) or messages, "never messages: []"
    if compatible:
        systems = [k for k, m in enumerate(messages) if m["role"] == "system"]
        assert systems in ([], [0]), "exactly one leading system message"
        # Strict (Mistral-style) templates: after the optional system message, user / assistant alternate, the
        # first is a user, and a tool result is followed by an assistant (its answer) or by another result.
        rest = [m for m in messages if m["role"] != "system"]
        assert rest and rest[0]["role"] == "user", "the conversation starts with a user message"
        for a, b in itertools.pairwise(rest):
            assert not (a["role"] == b["role"] and a["role"] in ("user", "assistant")), "roles alternate"
            assert not (a["role"] == "tool" and b["role"] == "user"), "a user message right after tool results"


@SETTINGS
@given(histories(), SYSTEM_PROMPT, INPUTS)
def test_openai_requests_are_valid(history, system_prompt, inputs):
    request = request_for(history, system_prompt, inputs)
    check_openai(to_openai_request(request, OPENAI)["messages"], compatible=False, mistral_ids=False)
    check_openai(to_openai_request(request, COMPATIBLE)["messages"], compatible=True, mistral_ids=False)
    check_openai(to_openai_request(request, MISTRAL)["messages"], compatible=True, mistral_ids=True)


# ---------------------------------------------------------------------------------------------------- Anthropic


def check_anthropic(body: dict) -> None:
    assert not [k for k in ANTHROPIC_REFUSED if k in body], "no sampling options"
    messages = body["messages"]
    assert messages and messages[0]["role"] == "user"
    seen_ids: set[str] = set()
    for k, m in enumerate(messages):
        assert m["role"] in ("user", "assistant")  # system is top-level
        if k:
            assert m["role"] != messages[k - 1]["role"], "roles alternate"
        assert m["content"], "no empty messages"
        for block in m["content"]:
            assert block["type"] in ("text", "image", "document", "tool_use", "tool_result")
            if block["type"] == "text":
                assert block["text"].strip(), "text blocks must be non-empty"
            if block["type"] in ("image", "document"):
                assert m["role"] == "user"
                source = block["source"]
                allowed = (
                    ("image/png", "image/jpeg", "image/gif", "image/webp")
                    if block["type"] == "image"
                    else ("application/pdf",)
                )
                assert source["type"] == "base64" and source["media_type"] in allowed  # [AT4][AT5]
                assert 0 < len(source["data"]) <= 5 * 1024 * 1024 or block["type"] == "document"
                base64.b64decode(source["data"], validate=True)
            if block["type"] == "tool_use":
                assert re.fullmatch(r"[a-zA-Z0-9_-]+", block["id"]) and len(block["id"]) <= 64
                assert block["id"] not in seen_ids
                seen_ids.add(block["id"])
                assert isinstance(block["input"], dict)
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        results = [b for b in m["content"] if b["type"] == "tool_result"]
        if m["role"] == "assistant" and uses:
            nxt = messages[k + 1]["content"]
            head = nxt[: len(uses)]
            # Results immediately after, first in the content, one per call.
            assert [b["type"] for b in head] == ["tool_result"] * len(uses)
            assert [b["tool_use_id"] for b in head] == uses
            # Then text (and the files of a queued message: results first is the rule, not "text only").
            assert all(b["type"] in ("text", "image", "document") for b in nxt[len(uses) :])
        if results:
            prev_uses = [b["id"] for b in messages[k - 1]["content"] if b["type"] == "tool_use"]
            assert [r["tool_use_id"] for r in results] == prev_uses, "no orphan tool_result"
            assert all(isinstance(r["content"], str) and r["content"] for r in results)
    last = messages[-1]
    if last["role"] == "assistant" and last["content"][-1]["type"] == "text":
        assert last["content"][-1]["text"] == last["content"][-1]["text"].rstrip()


@SETTINGS
@given(histories(), SYSTEM_PROMPT, INPUTS)
def test_anthropic_requests_are_valid(history, system_prompt, inputs):
    body = to_anthropic_request(request_for(history, system_prompt, inputs))
    check_anthropic(body)
    if system_prompt:
        assert body["system"].startswith(system_prompt)


# ---------------------------------------------------------------------------------------------------- Gemini


def check_google(body: dict) -> None:
    contents = body["contents"]
    assert contents and contents[0]["role"] == "user"
    for k, c in enumerate(contents):
        assert c["role"] in ("user", "model") and c["parts"]
        kinds = {key for p in c["parts"] for key in p if key != "thought_signature"}
        for p in c["parts"]:
            if "text" in p:
                assert p["text"].strip(), "no empty text parts"
            if "inline_data" in p:
                blob = p["inline_data"]
                assert c["role"] == "user" and blob["data"]  # [AT6]
                assert blob["mime_type"] in ("image/png", "image/jpeg", "image/webp", "application/pdf")
        has_fr = any("function_response" in p for p in c["parts"])
        if has_fr:
            assert kinds == {"function_response"}, "function responses travel alone"
            prev = contents[k - 1]
            calls = [p["function_call"] for p in prev["parts"] if "function_call" in p]
            responses = [p["function_response"] for p in c["parts"]]
            assert prev["role"] == "model" and len(calls) == len(responses)
            assert [r["name"] for r in responses] == [fc["name"] for fc in calls]
            assert [r.get("id") for r in responses] == [fc.get("id") for fc in calls]
            assert all(isinstance(r["response"], dict) for r in responses)
        if any("function_call" in p for p in c["parts"]):
            assert k > 0 and contents[k - 1]["role"] == "user"
            assert k + 1 < len(contents) and any("function_response" in p for p in contents[k + 1]["parts"])
            assert all(isinstance(p["function_call"]["args"], dict) for p in c["parts"] if "function_call" in p)
            assert "thought_signature" in next(p for p in c["parts"] if "function_call" in p)
        if k:
            # Every source accepts strict alternation; a second user content after function responses is
            # refused by some models, and results with text in one content answer empty on others.
            assert c["role"] != contents[k - 1]["role"], "user and model alternate"


@SETTINGS
@given(histories(), SYSTEM_PROMPT, INPUTS)
def test_google_requests_are_valid(history, system_prompt, inputs):
    body = to_google_request(request_for(history, system_prompt, inputs))
    check_google(body)
    system = body["config"].get("system_instruction")
    assert system is None or system.strip()


# ---------------------------------------------------------------------------------------------------- Ollama


def check_ollama(messages: list[dict]) -> None:
    assert messages, "never messages: []"
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] != "tool", "tool message without its call"
        assert isinstance(m["content"], str)
        if "images" in m:
            assert m["role"] == "user" and m["images"] and all(isinstance(d, bytes) and d for d in m["images"])
        calls = m.get("tool_calls") or []
        for c in calls:
            assert isinstance(c["function"]["arguments"], dict)
        results = messages[i + 1 : i + 1 + len(calls)]
        assert [r["role"] for r in results] == ["tool"] * len(calls)
        assert [r["tool_name"] for r in results] == [c["function"]["name"] for c in calls]
        i += 1 + len(calls)


@SETTINGS
@given(histories(), SYSTEM_PROMPT, INPUTS)
def test_ollama_requests_are_valid(history, system_prompt, inputs):
    check_ollama(to_ollama_request(request_for(history, system_prompt, inputs))["messages"])


# ---------------------------------------------------------------------------------------------------- all targets


CONVERTERS = {
    "openai": lambda r: to_openai_request(r, OPENAI),
    "compatible": lambda r: to_openai_request(r, COMPATIBLE),
    "anthropic": to_anthropic_request,
    "google": to_google_request,
    "ollama": to_ollama_request,
}


@SETTINGS
@given(histories(), SYSTEM_PROMPT)
def test_conversion_is_deterministic(history, system_prompt):
    first = request_for(history, system_prompt)
    second = request_for(copy.deepcopy(history), system_prompt)
    for name, convert in CONVERTERS.items():
        assert convert(first) == convert(second), name
        assert convert(first) == convert(first), name


@SETTINGS
@given(histories(), INPUTS)
def test_no_user_text_or_file_is_lost(history, inputs):
    # Queued user messages may be moved after tool results or merged, but never dropped; every file is either
    # sent or named in a placeholder that says why it was not.
    texts = [m.content for m in history if m.role == "user" and m.content.strip()]
    names = [a.name for m in history if m.role == "user" for a in m.attachments]
    for name in ("openai", "compatible", "anthropic", "google", "ollama"):
        rendered = repr(CONVERTERS[name](request_for(history, inputs=inputs)))
        for text in texts:
            assert repr(text)[1:-1] in rendered, (name, text)
        for file in names:
            assert (
                f"[Attached file: {file}]" in rendered
                or f"[Attached file {file} " in rendered
                or f'<file name="{file}">' in rendered
            ), (name, file)
