"""Attachments on the wire: each provider's request body, sent through its official SDK over the transport hook,
holds an image, a PDF and a text file in the documented shape (docs/attachments.md), images fitted to the limits."""

from __future__ import annotations

import base64
import io

import pytest
from attachment_files import image_file, noisy_jpeg, pdf, pdf_file, png, text_file
from llm_replay import collect, ndjson, sse
from PIL import Image

from server.llm import Attachment, ChatRequest, Finished, Message, ModelInputs, RequestOptions
from server.llm.capabilities import default_inputs, model_inputs, parse_overrides
from server.llm.convert import to_anthropic_request, to_google_request, to_openai_request
from server.llm.convert.files import LIMITS, MAX_TEXT_CHARS
from server.llm.providers.anthropic import AnthropicProvider
from server.llm.providers.google import GoogleProvider
from server.llm.providers.ollama import OllamaProvider
from server.llm.providers.openai import OpenAIProvider

PNG = png(64, 48)
PDF = pdf("Quarterly revenue rose", "Second page")
SOURCE = "def add(a, b):\n    return a + b\n"


def three_files(model: str, *files: Attachment, text: str = "What is in these files?") -> ChatRequest:
    attachments = files or (image_file(PNG), pdf_file(PDF), text_file(SOURCE))
    return ChatRequest(
        messages=(Message(role="user", content=text, attachments=attachments),),
        options=RequestOptions(model=model),
    )


def decoded_size(data: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(data)).size


def data_url_bytes(url: str, media_type: str) -> bytes:
    prefix = f"data:{media_type};base64,"
    assert url.startswith(prefix), url[:40]
    return base64.b64decode(url[len(prefix) :])


@pytest.fixture
def openai_provider(httpx2_replay, retry_policy):
    def make(**kwargs):
        replay, client = httpx2_replay([sse("openai_text.sse")])
        return replay, OpenAIProvider(api_key="sk-test", http_client=client, retry_policy=retry_policy, **kwargs)

    return make


@pytest.fixture
def anthropic_provider(httpx2_replay, retry_policy):
    def make():
        replay, client = httpx2_replay([sse("anthropic_text.sse")])
        return replay, AnthropicProvider(api_key="sk-ant-test", http_client=client, retry_policy=retry_policy)

    return make


@pytest.fixture
def google_provider(httpx2_replay, retry_policy):
    def make():
        replay, client = httpx2_replay([sse("google_text.sse")])
        return replay, GoogleProvider(
            api_key="g-test", http_client=client, retry_policy=retry_policy, base_url="http://gemini-gateway.local/"
        )

    return make


@pytest.fixture
async def ollama_provider(httpx_replay, retry_policy):
    providers: list[OllamaProvider] = []

    def make():
        replay, transport = httpx_replay([ndjson("ollama_text.ndjson")])
        provider = OllamaProvider(host="http://ollama.local:11434", transport=transport, retry_policy=retry_policy)
        providers.append(provider)
        return replay, provider

    yield make
    for provider in providers:
        await provider.aclose()


async def send(provider, request: ChatRequest) -> None:
    events = await collect(provider.stream(request))
    assert isinstance(events[-1], Finished), events[-1]


def assert_text_file_block(text: str) -> None:
    assert text.startswith('<file name="notes.py">') and SOURCE in text and text.endswith("</file>")


# ---------------------------------------------------------------------------------------------- each provider


async def test_openai_image_url_data_url_file_part_and_text(openai_provider):
    replay, provider = openai_provider()
    await send(provider, three_files("gpt-4o"))
    content = replay.body()["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "text", "file", "text", "text"]
    assert content[0]["text"] == "[Attached file: photo.png]"
    assert data_url_bytes(content[1]["image_url"]["url"], "image/png") == PNG  # small enough: sent as it is
    assert content[3]["file"]["filename"] == "report.pdf"
    assert data_url_bytes(content[3]["file"]["file_data"], "application/pdf") == PDF
    assert_text_file_block(content[4]["text"])
    assert content[5] == {"type": "text", "text": "What is in these files?"}


async def test_openai_compatible_server_gets_pdf_text_and_images_for_a_vision_model(openai_provider):
    replay, provider = openai_provider(base_url="http://vllm.local/v1")
    await send(provider, three_files("Qwen/Qwen2.5-VL-7B-Instruct"))
    content = replay.body()["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "text", "text", "text"]  # no `file` parts there
    pdf_text = content[2]["text"]
    assert pdf_text.startswith('<file name="report.pdf">') and "Quarterly revenue rose" in pdf_text
    assert "[Page 2]\nSecond page" in pdf_text


async def test_anthropic_image_and_document_blocks(anthropic_provider):
    replay, provider = anthropic_provider()
    await send(provider, three_files("claude-opus-4-8"))
    blocks = replay.body()["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text", "document", "text", "text"]
    image, document = blocks[1], blocks[3]
    assert image["source"]["type"] == "base64" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == PNG
    assert document["source"] == {
        "type": "base64",
        "media_type": "application/pdf",
        "data": base64.b64encode(PDF).decode(),
    }
    assert document["title"] == "report.pdf"
    assert_text_file_block(blocks[4]["text"])
    assert blocks[5]["text"] == "What is in these files?"


async def test_google_inline_data_for_image_and_pdf(google_provider):
    replay, provider = google_provider()
    await send(provider, three_files("gemini-2.5-flash"))
    parts = replay.body()["contents"][0]["parts"]
    assert [next(iter(p)) for p in parts] == ["text", "inlineData", "text", "inlineData", "text", "text"]
    # The SDK writes the Blob with its field names (`mime_type`, as in the REST documentation's examples; the
    # API's JSON mapping takes both spellings).
    # Bytes go URL-safe base64-encoded (the SDK's encoding for `bytes` fields; the API's JSON mapping takes both).
    assert parts[1]["inlineData"]["mime_type"] == "image/png"
    assert base64.urlsafe_b64decode(parts[1]["inlineData"]["data"]) == PNG
    assert parts[3]["inlineData"]["mime_type"] == "application/pdf"
    assert base64.urlsafe_b64decode(parts[3]["inlineData"]["data"]) == PDF
    assert_text_file_block(parts[4]["text"])


async def test_ollama_images_on_the_message_and_pdf_as_text(ollama_provider):
    replay, provider = ollama_provider()
    await send(provider, three_files("llava:13b"))
    message = replay.body()["messages"][-1]
    assert [base64.b64decode(i) for i in message["images"]] == [PNG]
    content = message["content"]
    assert content.startswith("[Attached file: photo.png]")
    assert "Quarterly revenue rose" in content and SOURCE in content
    assert content.endswith("What is in these files?")


# ---------------------------------------------------------------------------------------------- limits


BIG = png(5000, 3000)


@pytest.mark.parametrize("target", ["openai", "anthropic", "google", "ollama"])
async def test_a_too_large_image_is_downscaled_within_the_limits(
    target, openai_provider, anthropic_provider, google_provider, ollama_provider
):
    request = three_files(
        {"openai": "gpt-4o", "anthropic": "claude-opus-4-8", "google": "gemini-2.5-pro", "ollama": "qwen2.5vl:7b"}[
            target
        ],
        image_file(BIG, "wide.png"),
    )
    make = {
        "openai": openai_provider,
        "anthropic": anthropic_provider,
        "google": google_provider,
        "ollama": ollama_provider,
    }[target]
    replay, provider = make()
    await send(provider, request)
    body = replay.body()
    if target == "openai":
        sent = data_url_bytes(body["messages"][-1]["content"][1]["image_url"]["url"], "image/png")
    elif target == "anthropic":
        sent = base64.b64decode(body["messages"][0]["content"][1]["source"]["data"])
    elif target == "google":
        sent = base64.urlsafe_b64decode(body["contents"][0]["parts"][1]["inlineData"]["data"])
    else:
        sent = base64.b64decode(body["messages"][-1]["images"][0])
    width, height = decoded_size(sent)
    limit = LIMITS[target].max_side
    assert max(width, height) == limit  # as large as allowed, no larger
    assert abs(width / height - 5000 / 3000) < 0.01  # the aspect ratio kept


async def test_anthropic_byte_limit_on_a_photo_that_fits_the_pixels(anthropic_provider):
    # 2000x2000 of noise is ~9 MB as a JPEG: within the pixel limit, over the 5 MB base64 limit per image.
    photo = noisy_jpeg(2000, 2000)
    assert len(base64.b64encode(photo)) > 5 * 1024 * 1024
    replay, provider = anthropic_provider()
    await send(provider, three_files("claude-opus-4-8", image_file(photo, "noise.jpg", "image/jpeg")))
    source = replay.body()["messages"][0]["content"][1]["source"]
    assert source["media_type"] == "image/jpeg"
    assert len(source["data"]) <= 5 * 1024 * 1024
    assert max(decoded_size(base64.b64decode(source["data"]))) <= 2000


def test_formats_a_target_does_not_take_are_re_encoded():
    gif = io.BytesIO()
    Image.new("P", (30, 20)).save(gif, "GIF")
    request = three_files("gemini-2.5-flash", image_file(gif.getvalue(), "anim.gif", "image/gif"))
    part = to_google_request(request)["contents"][0]["parts"][1]["inline_data"]
    assert part["mime_type"] in ("image/png", "image/jpeg")  # Gemini lists no GIF
    assert decoded_size(part["data"]) == (30, 20)


def test_an_animated_gif_goes_as_its_first_frame_where_only_still_images_are_taken():
    frames = [Image.new("RGB", (24, 16), color) for color in ((255, 0, 0), (0, 0, 255))]
    gif = io.BytesIO()
    frames[0].save(gif, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    request = three_files("gpt-4o", image_file(gif.getvalue(), "blink.gif", "image/gif"))
    url = to_openai_request(request)["messages"][-1]["content"][1]["image_url"]["url"]
    media_type = url[len("data:") : url.index(";")]
    assert media_type in ("image/png", "image/jpeg")  # OpenAI takes non-animated GIFs only [AT1]
    still = Image.open(io.BytesIO(data_url_bytes(url, media_type)))
    assert not getattr(still, "is_animated", False) and still.size == (24, 16)
    assert still.convert("RGB").getpixel((5, 5))[0] > 200  # the first (red) frame


def test_newest_files_keep_their_place_when_the_request_budget_is_used():
    photo = noisy_jpeg(2000, 2000)  # each over 2 MB once fitted for Anthropic; the budget is 20 MB
    messages = tuple(
        Message(role="user", content=f"photo {i}", attachments=(image_file(photo, f"p{i}.jpg", "image/jpeg"),))
        for i in range(12)
    )
    body = to_anthropic_request(ChatRequest(messages=messages, options=RequestOptions(model="claude-opus-4-8")))
    blocks = body["messages"][0]["content"]
    images = [b for b in blocks if b["type"] == "image"]
    omitted = [b["text"] for b in blocks if b["type"] == "text" and "was not sent" in b["text"]]
    assert 0 < len(images) < 12 and len(images) + len(omitted) == 12
    assert sum(len(base64.b64decode(i["source"]["data"])) for i in images) <= LIMITS["anthropic"].budget
    # The oldest are the ones left out, each named.
    assert omitted == [
        f"[Attached file p{i}.jpg was not sent: the request's size limit for files is used by newer attachments.]"
        for i in range(len(omitted))
    ]


def test_images_past_the_targets_count_are_named_oldest_first():
    dot = png(4, 4)
    messages = tuple(
        Message(role="user", content=f"image {i}", attachments=(image_file(dot, f"d{i}.png"),))
        for i in range(LIMITS["anthropic"].max_images + 2)
    )
    body = to_anthropic_request(ChatRequest(messages=messages, options=RequestOptions(model="claude-opus-4-8")))
    blocks = body["messages"][0]["content"]
    assert sum(b["type"] == "image" for b in blocks) == LIMITS["anthropic"].max_images
    assert [b["text"] for b in blocks if "was not sent" in b.get("text", "")] == [
        f"[Attached file d{i}.png was not sent: the request's limit of 100 images is reached by newer attachments.]"
        for i in range(2)
    ]


# ---------------------------------------------------------------------------------------------- capabilities


async def test_a_model_without_vision_gets_a_placeholder_and_the_pdf_text(openai_provider):
    replay, provider = openai_provider()
    await send(provider, three_files("gpt-3.5-turbo"))
    content = replay.body()["messages"][-1]["content"]
    assert isinstance(content, str)  # no parts at all: the model is sent text it can take
    assert "[Attached file photo.png was not sent: this model does not take images.]" in content
    assert "image_url" not in content and "Quarterly revenue rose" in content


async def test_an_ollama_text_model_gets_no_images(ollama_provider):
    replay, provider = ollama_provider()
    await send(provider, three_files("llama3.1:8b"))
    message = replay.body()["messages"][-1]
    assert "images" not in message
    assert "photo.png was not sent: this model does not take images." in message["content"]


def test_the_capability_rule_and_its_overrides():
    assert default_inputs("openai", "gpt-4o-mini") == ModelInputs(images=True, documents=True)
    assert default_inputs("openai", "gpt-3.5-turbo-0125").images is False
    assert default_inputs("anthropic", "claude-2.1").images is False
    assert default_inputs("anthropic", "claude-opus-4-8").documents is True
    assert default_inputs("ollama", "llama3.2-vision:11b") == ModelInputs(images=True, documents=False)
    assert default_inputs("ollama", "qwen3:8b").images is False
    assert default_inputs("compatible", "mistralai/Pixtral-12B-2409").images is True
    overrides = parse_overrides(["ollama:my-*=on", " openai:gpt-4o*=off ", ""])
    assert model_inputs("ollama", "ollama", "my-finetune", overrides) == ModelInputs(images=True, documents=False)
    assert model_inputs("openai", "openai", "GPT-4o", overrides) == ModelInputs(images=False, documents=False)
    assert model_inputs("openai", "openai", "gpt-4.1", overrides).images is True
    with pytest.raises(ValueError, match=r"provider:glob=on\|off"):
        parse_overrides(["ollama=on"])


def test_the_request_decision_wins_over_the_rule():
    request = three_files("gpt-4o")
    forced = request.model_copy(
        update={"options": request.options.model_copy(update={"inputs": ModelInputs(images=False, documents=False)})}
    )
    content = to_openai_request(forced)["messages"][-1]["content"]
    assert isinstance(content, str) and "photo.png was not sent" in content


# ---------------------------------------------------------------------------------------------- files themselves


def test_missing_unreadable_unsupported_and_long_files_become_text():
    files = (
        Attachment(name="gone.png", media_type="image/png", missing="it was deleted."),
        Attachment(name="broken.png", media_type="image/png", data=b"not a png at all"),
        Attachment(name="archive.zip", media_type="application/zip", data=b"PK\x03\x04rest"),
        text_file("x" * (MAX_TEXT_CHARS + 10), "big.log"),
        Attachment(name="blob.txt", media_type="text/plain", data=b"\xff\xfe\x00binary"),
    )
    content = to_openai_request(three_files("gpt-4o", *files, text=""))["messages"][-1]["content"]
    assert content.split("\n\n")[:3] == [
        "[Attached file gone.png is not available: it was deleted.]",
        "[Attached file broken.png was not sent: it could not be read as an image.]",
        "[Attached file archive.zip was not sent: its type (application/zip) is not one the model is given "
        "(text, images and PDFs are).]",
    ]
    assert f"[Cut: the first {MAX_TEXT_CHARS:,} of {MAX_TEXT_CHARS + 10:,} characters.]" in content
    assert "[Attached file blob.txt was not sent: it is not UTF-8 text.]" in content


def test_attachments_only_message_has_no_empty_text():
    request = three_files("claude-opus-4-8", image_file(PNG), text="   ")
    blocks = to_anthropic_request(request)["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image"]


def test_exif_rotation_is_applied_when_re_encoding():
    out = io.BytesIO()
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise when shown
    Image.new("RGB", (3000, 1000)).save(out, "JPEG", exif=exif)
    request = three_files("claude-opus-4-8", image_file(out.getvalue(), "phone.jpg", "image/jpeg"))
    source = to_anthropic_request(request)["messages"][0]["content"][1]["source"]
    assert decoded_size(base64.b64decode(source["data"])) == (667, 2000)  # upright, then fitted
