"""Attachments rendered for one target: the parts each renderer turns into its wire shape (docs/attachments.md).

- images become an image part, re-encoded when the target does not take their format and downscaled (aspect kept)
  when a side is longer than the target's limit or the bytes exceed its per-image limit [AT1][AT4][AT6][AT8];
- PDFs become a document part where the target has one and the model takes it, within its page limit [AT2][AT5]
  [AT7]; elsewhere (Ollama, OpenAI-compatible servers, models without vision) their extracted text;
- text and source files become text with their name, decoded as UTF-8, cut at ``MAX_TEXT_CHARS``;
- anything else, an image for a model that takes none, a file whose bytes are missing, and whatever would exceed
  the request's budget for binary parts or its number of images (newest messages keep theirs first) becomes a text
  placeholder naming the file and saying why, so the request is always one the provider accepts.

Every binary part is preceded by a ``[Attached file: name]`` label, so the model can tell files apart. Decoding,
resizing and PDF text extraction are cached by content digest (``_Cache``): a run rebuilds its request every step.
The functions are pure and deterministic for a given Pillow/pypdf version, as the rest of the conversion layer.
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar, cast

from ..capabilities import default_inputs
from ..types import Attachment, ChatRequest, ModelInputs

if TYPE_CHECKING:
    from pypdf import PdfReader  # imported where used: only requests with PDFs need it

_T = TypeVar("_T")

MB = 1024 * 1024
MAX_TEXT_CHARS = 100_000  # per text file or PDF text: about 25k tokens
MAX_PIXELS = 120_000_000  # larger images are not decoded at all (decompression bombs)
MAX_PDF_PAGES_TO_READ = 2_000

JPEG_QUALITY = 85
UNDECODED_TYPES = frozenset({"image/heic", "image/heif"})


@dataclass(frozen=True)
class Limits:
    """What one target takes: image types sent as they are, the longest image side, bytes per image and per
    request (raw bytes of all binary parts; base64 adds a third on the wire), PDF pages per document part."""

    image_types: frozenset[str]
    max_side: int
    max_image_bytes: int
    budget: int
    max_pdf_pages: int = 0  # 0: no document parts
    max_images: int = 100  # image parts per request


_OPENAI_IMAGES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
LIMITS: dict[str, Limits] = {
    # 20 MB per image, 50 MB of image bytes per request; images are fitted into 2048 px anyway [AT1].
    "openai": Limits(_OPENAI_IMAGES, 2048, 20 * MB, 32 * MB, max_pdf_pages=100, max_images=500),
    "compatible": Limits(_OPENAI_IMAGES, 2048, 20 * MB, 20 * MB),
    # 5 MB per image *base64-encoded*, 8000 px (2000 px once a request has more than 20 images), 32 MB per
    # request, 100 PDF pages per request [AT4][AT5]; 100 images (the API takes 600, some platforms fewer [AT4]).
    "anthropic": Limits(
        frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"}),
        2000,
        5 * MB * 3 // 4,
        20 * MB,
        max_pdf_pages=100,
    ),
    # Inline data: 20 MB per request in total; larger images are scaled to fit 3072x3072 anyway; 1000 pages [AT6][AT7].
    "google": Limits(
        frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"}),
        3072,
        14 * MB,
        14 * MB,
        max_pdf_pages=1000,
        max_images=3000,
    ),
    # Base64 images on the message; formats every vision model's loader reads [AT8].
    "ollama": Limits(frozenset({"image/png", "image/jpeg"}), 2048, 20 * MB, 32 * MB),
    "echo": Limits(
        frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"}), 8192, 64 * MB, 64 * MB, max_pdf_pages=10_000
    ),
}

TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/x-sh",
        "application/x-shellscript",
        "application/x-python",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/sql",
        "application/x-tex",
        "application/ld+json",
        "application/graphql",
        "image/svg+xml",
    }
)
TEXT_EXTENSIONS = frozenset(
    "txt md markdown rst csv tsv json jsonl yaml yml toml ini cfg conf env log xml html htm css scss less js mjs cjs "
    "ts tsx jsx py pyi rb go rs java kt kts scala c h cc cpp hpp cs swift m mm php pl lua r sql sh bash zsh fish ps1 "
    "bat dockerfile makefile gradle properties tex bib vue svelte graphql proto tf hcl nix ex exs erl hs ml elm "
    "dart zig jl clj edn lisp vim diff patch srt vtt".split()
)

Kind = Literal["image", "pdf", "text", "other"]


@dataclass(frozen=True)
class TextPart:
    """Text an attachment renders to: its label, its contents (a text file, a PDF's text), or a placeholder
    saying why the model does not get it."""

    text: str


@dataclass(frozen=True)
class BinaryPart:
    """An image or a PDF document, ready for the target (media type and bytes as sent)."""

    kind: Literal["image", "document"]
    name: str
    media_type: str
    data: bytes


Part = TextPart | BinaryPart


def label(name: str) -> str:
    return f"[Attached file: {name}]"


def placeholder(name: str, why: str) -> str:
    return f"[Attached file {name} was not sent: {why}]"


NO_IMAGES = "this model does not take images."
NOT_LOADED = "its content is not available."
UNREADABLE_IMAGE = "it could not be read as an image."
UNSUPPORTED = "is not one the model is given (text, images and PDFs are)."
OVER_BUDGET = "the request's size limit for files is used by newer attachments."
NO_PDF_TEXT = "the PDF has no text that could be extracted."
NOT_UTF8 = "it is not UTF-8 text."
TOO_MANY_IMAGES = "the request's limit of {} images is reached by newer attachments."


def kind_of(att: Attachment) -> Kind:
    """What the attachment is, from its media type (decided from the bytes on upload) and, for generic types,
    its name's extension."""
    media = att.media_type.split(";")[0].strip().lower()
    if media == "application/pdf":
        return "pdf"
    if media.startswith("text/") or media in TEXT_TYPES:
        return "text"
    if media.startswith("image/"):
        return "image"
    ext = att.name.rsplit(".", 1)[-1].lower() if "." in att.name else att.name.lower()
    if media in ("", "application/octet-stream") and ext in TEXT_EXTENSIONS:
        return "text"
    return "other"


# --------------------------------------------------------------------------------------------- caching


class _Cache:
    """Results by key, bounded by the bytes they hold (least recently used out first). Thread-safe: requests with
    attachments are converted off the event loop."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.items: OrderedDict[tuple[object, ...], tuple[object, int]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[object, ...]) -> object | None:
        with self.lock:
            hit = self.items.get(key)
            if hit is None:
                return None
            self.items.move_to_end(key)
            return hit[0]

    def put(self, key: tuple[object, ...], value: object, size: int) -> None:
        if size > self.max_bytes:
            return
        with self.lock:
            old = self.items.pop(key, None)
            if old is not None:
                self.size -= old[1]
            self.items[key] = (value, size)
            self.size += size
            while self.size > self.max_bytes:
                _, (_, dropped) = self.items.popitem(last=False)
                self.size -= dropped


_cache = _Cache(96 * MB)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------------------- images


def fit_image(data: bytes, media_type: str, limits: Limits) -> tuple[str, bytes] | None:
    """``(media_type, bytes)`` of the image as the target takes it, or ``None`` when it cannot be read."""
    key = ("image", _digest(data), media_type, limits)
    hit = _cache.get(key)
    if hit is not None:
        return cast(tuple[str, bytes], hit)  # what this key holds
    fitted = _fit_image(data, media_type, limits)
    if fitted is not None and fitted[1] is not data:  # an image sent as it is costs only a header read
        _cache.put(key, fitted, len(fitted[1]))
    return fitted


def _fit_image(data: bytes, media_type: str, limits: Limits) -> tuple[str, bytes] | None:
    from PIL import Image, ImageOps

    # Bicubic with antialiasing: indistinguishable from Lanczos at these reductions, about 1.5x faster on a 12 MP
    # photo; `reducing_gap` first box-reduces large factors (an 8000 px scan to 2000 px) by whole steps.
    resample = Image.Resampling.BICUBIC
    accepted = media_type in limits.image_types
    try:
        with warnings.catch_warnings():
            # Decompression bombs are refused below by pixel count; Pillow's own warning is not an error here.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img: Image.Image = Image.open(io.BytesIO(data))
            width, height = img.size
            if width * height > MAX_PIXELS:
                return None
            animated = bool(getattr(img, "is_animated", False))
            if (
                accepted
                and not animated
                and max(width, height) <= limits.max_side
                and len(data) <= limits.max_image_bytes
            ):
                return media_type, data
            if img.format == "JPEG":
                # Decode at a reduced scale straight from the DCT coefficients: far less work for big photos.
                scale = min(1.0, limits.max_side / max(width, height))
                img.draft("RGB", (max(1, int(width * scale)), max(1, int(height * scale))))
            img.seek(0)  # an animation's first frame
            img = ImageOps.exif_transpose(img)  # phones store rotation as a tag; the pixels must carry it
            scale = min(1.0, limits.max_side / max(img.size))
            if scale < 1.0:
                img = img.resize(
                    (max(1, round(img.width * scale)), max(1, round(img.height * scale))), resample, reducing_gap=2.0
                )
            if not accepted or animated:
                media_type = "image/png" if _has_alpha(img) else "image/jpeg"
            encoded = _encode(img, media_type)
            while len(encoded) > limits.max_image_bytes:
                # Photos compress far better as JPEG; past that, fewer pixels until it fits.
                if media_type != "image/jpeg":
                    media_type = "image/jpeg"
                else:
                    img = img.resize((max(1, img.width * 3 // 4), max(1, img.height * 3 // 4)), resample)
                encoded = _encode(img, media_type)
            return media_type, encoded
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, EOFError):
        # HEIC/HEIF (Pillow has no decoder for them) still go as they are where the target takes them.
        if accepted and media_type in UNDECODED_TYPES and len(data) <= limits.max_image_bytes:
            return media_type, data
        return None


def _has_alpha(img: object) -> bool:
    mode = getattr(img, "mode", "")
    return mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in getattr(img, "info", {}))


def _encode(img: object, media_type: str) -> bytes:
    from PIL import Image

    assert isinstance(img, Image.Image)
    out = io.BytesIO()
    if media_type == "image/jpeg":
        img.convert("RGB").save(out, "JPEG", quality=JPEG_QUALITY, optimize=True)
    elif media_type == "image/webp":
        img.save(out, "WEBP", quality=JPEG_QUALITY)
    elif media_type == "image/gif":
        img.save(out, "GIF")
    else:
        if img.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
            img = img.convert("RGBA")
        img.save(out, "PNG", optimize=True)
    return out.getvalue()


# --------------------------------------------------------------------------------------------- PDFs and text


def pdf_pages(data: bytes) -> int | None:
    """How many pages the PDF has; ``None`` when it cannot be read (damaged, encrypted). Cached by digest."""
    key = ("pdf-pages", _digest(data))
    hit = _cache.get(key)
    if hit is None:
        hit = _read_pdf(data, lambda reader: len(reader.pages))
        _cache.put(key, hit, 64)
    return hit if isinstance(hit, int) and hit >= 0 else None


def pdf_text(data: bytes) -> str:
    """The PDF's text, page by page, cut after ``MAX_TEXT_CHARS`` ("" when there is none). Cached by digest."""
    key = ("pdf-text", _digest(data))
    hit = _cache.get(key)
    if hit is None:
        read = _read_pdf(data, _extract_text)
        text = read if isinstance(read, str) else ""
        _cache.put(key, text, len(text) + 64)
        return text
    return cast(str, hit)  # what this key holds


def _extract_text(reader: PdfReader) -> str:
    chunks: list[str] = []
    total = 0
    for number, page in enumerate(reader.pages, start=1):
        if total > MAX_TEXT_CHARS or number > MAX_PDF_PAGES_TO_READ:
            break
        text = (page.extract_text() or "").strip()
        if text:
            chunks.append(f"[Page {number}]\n{text}")
            total += len(text)
    return "\n\n".join(chunks)


def _read_pdf(data: bytes, use: Callable[[PdfReader], _T]) -> _T | int:
    """``use(reader)`` on the PDF, or -1 when it cannot be read."""
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # damaged files are common; their repairs are not news
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):
                return -1
            return use(reader)
    except (PyPdfError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return -1


def decode_text(data: bytes) -> str | None:
    """The file as UTF-8 text (a BOM dropped), or ``None`` when it is not."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def file_block(name: str, text: str, note: str = "") -> str:
    """Text of a file with its name around it, cut at ``MAX_TEXT_CHARS``."""
    shown = text[:MAX_TEXT_CHARS]
    cut = f"\n[Cut: the first {MAX_TEXT_CHARS:,} of {len(text):,} characters.]" if len(text) > MAX_TEXT_CHARS else ""
    quoted = name.replace('"', "'")
    head = f'<file name="{quoted}">' + (f"\n{note}" if note else "")
    return f"{head}\n{shown}{cut}\n</file>"


# --------------------------------------------------------------------------------------------- rendering


def render_attachments(groups: Sequence[Sequence[Attachment]], target: str, inputs: ModelInputs) -> list[list[Part]]:
    """The parts for each group (one group per user message, oldest first). Binary parts are admitted newest
    message first until the target's budget is used; earlier ones then become placeholders."""
    limits = LIMITS.get(target, LIMITS["compatible"])
    budget = limits.budget
    images = limits.max_images
    out: list[list[Part]] = [[] for _ in groups]
    for index in range(len(groups) - 1, -1, -1):
        parts: list[Part] = []
        for att in groups[index]:
            rendered, cost = _render(att, limits, inputs, budget, images > 0)
            budget -= cost
            images -= sum(1 for p in rendered if isinstance(p, BinaryPart) and p.kind == "image")
            parts.extend(rendered)
        out[index] = parts
    return out


def _render(
    att: Attachment, limits: Limits, inputs: ModelInputs, budget: int, image_left: bool
) -> tuple[list[Part], int]:
    name = att.name or "file"
    if att.missing is not None or not att.data:
        return [TextPart(f"[Attached file {name} is not available: {att.missing or NOT_LOADED}]")], 0
    kind = kind_of(att)
    if kind == "image":
        if not inputs.images:
            return [TextPart(placeholder(name, NO_IMAGES))], 0
        if not image_left:
            return [TextPart(placeholder(name, TOO_MANY_IMAGES.format(limits.max_images)))], 0
        fitted = fit_image(att.data, att.media_type.lower(), limits)
        if fitted is None:
            return [TextPart(placeholder(name, UNREADABLE_IMAGE))], 0
        if len(fitted[1]) > budget:
            return [TextPart(placeholder(name, OVER_BUDGET))], 0
        return [TextPart(label(name)), BinaryPart("image", name, fitted[0], fitted[1])], len(fitted[1])
    if kind == "pdf":
        if (
            inputs.documents
            and limits.max_pdf_pages
            and len(att.data) <= budget
            and 0 < (pdf_pages(att.data) or 0) <= limits.max_pdf_pages
        ):
            return [TextPart(label(name)), BinaryPart("document", name, "application/pdf", att.data)], len(att.data)
        text = pdf_text(att.data)
        if not text:
            return [TextPart(placeholder(name, NO_PDF_TEXT))], 0
        return [TextPart(file_block(name, text, "(the text of this PDF)"))], 0
    if kind == "text":
        decoded = decode_text(att.data)
        if decoded is None:
            return [TextPart(placeholder(name, NOT_UTF8))], 0
        return [TextPart(file_block(name, decoded))], 0
    return [TextPart(placeholder(name, f"its type ({att.media_type}) {UNSUPPORTED}"))], 0


def inputs_for(request: ChatRequest, target: str) -> ModelInputs:
    """What the request's model takes: as decided by the caller, else the documented rule for ``target``."""
    return request.options.inputs or default_inputs(target, request.options.model)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def user_parts(turns: Sequence[object], target: str, inputs: ModelInputs) -> dict[int, list[Part]]:
    """The rendered attachments of every user turn that has any, by position in ``turns``."""
    attachments = [getattr(t, "attachments", ()) for t in turns]
    positions = [i for i, a in enumerate(attachments) if a]
    groups = render_attachments([attachments[i] for i in positions], target, inputs)
    return dict(zip(positions, groups))


def has_binary(parts: Sequence[Part]) -> bool:
    return any(isinstance(p, BinaryPart) for p in parts)


def joined_text(parts: Sequence[Part], text: str) -> str:
    """All text parts and the message text as one string (for text-only targets and text-only messages)."""
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    if text:
        texts.append(text)
    return "\n\n".join(texts)
