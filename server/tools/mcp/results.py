"""An MCP ``CallToolResult`` as a chatsync tool result: text for the model, images as attachments.

The result is the server's output and untrusted: text is bounded (``MAX_TEXT_CHARS``), at most ``MAX_IMAGES``
images of the types every provider takes (``IMAGE_TYPES``, each at most ``MAX_IMAGE_BYTES``) are kept, and what
is dropped is named in the text. Clients render the text as text, never as HTML.

* text content: as it is, blocks joined by blank lines;
* image content (and image blobs of embedded resources): an attachment ``{name, mediaType, size, data}`` (base64),
  which the model gets the way it gets a user's images (``server.engine.history``);
* an embedded text resource: ``[resource <uri>]`` and its text; other blobs, audio, resource links: a line
  naming them;
* ``structuredContent`` when the result has no text: its JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

MAX_TEXT_CHARS = 100_000
MAX_IMAGES = 4
MAX_IMAGE_BYTES = 1024 * 1024
# All of a result's images together: they travel in the tool message's events and snapshots.
MAX_IMAGES_BYTES = 2 * 1024 * 1024
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def _image(data: str, media_type: str, images: list[dict[str, Any]], notes: list[str]) -> None:
    if media_type not in IMAGE_TYPES:
        notes.append(f"[an image of type {media_type[:100]} was left out: not a type the model takes]")
        return
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        notes.append("[an image that is not valid base64 was left out]")
        return
    if len(raw) > MAX_IMAGE_BYTES:
        notes.append(f"[an image of {len(raw)} bytes was left out: larger than {MAX_IMAGE_BYTES} bytes]")
        return
    if len(images) >= MAX_IMAGES or sum(image["size"] for image in images) + len(raw) > MAX_IMAGES_BYTES:
        notes.append(f"[an image was left out: at most {MAX_IMAGES} images, {MAX_IMAGES_BYTES} bytes, per result]")
        return
    name = f"image-{len(images) + 1}.{_EXTENSIONS[media_type]}"
    images.append({"name": name, "mediaType": media_type, "size": len(raw), "data": base64.b64encode(raw).decode()})


def convert(result: Any) -> tuple[str, list[dict[str, Any]], bool]:
    """``(text, image attachments, is_error)`` of an MCP ``CallToolResult``."""
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    notes: list[str] = []
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(str(getattr(block, "text", "")))
        elif kind == "image":
            _image(str(getattr(block, "data", "")), str(getattr(block, "mime_type", "")), images, notes)
        elif kind == "resource":
            res = getattr(block, "resource", None)
            uri = str(getattr(res, "uri", ""))[:500]
            text = getattr(res, "text", None)
            media_type = str(getattr(res, "mime_type", None) or "")
            if isinstance(text, str):
                texts.append(f"[resource {uri}]\n{text}")
            elif media_type in IMAGE_TYPES:
                _image(str(getattr(res, "blob", "")), media_type, images, notes)
            else:
                notes.append(f"[resource {uri} ({media_type or 'binary'}) not shown]")
        elif kind == "resource_link":
            uri = str(getattr(block, "uri", ""))[:500]
            name = str(getattr(block, "name", "") or "")[:200]
            notes.append(f"[resource link {name} {uri}]".replace("  ", " "))
        elif kind == "audio":
            notes.append("[audio content not shown]")
        else:
            notes.append(f"[content of type {str(kind)[:50]} not shown]")
    structured = getattr(result, "structured_content", None)
    if not texts and structured is not None:
        try:
            texts.append(json.dumps(structured, ensure_ascii=False))
        except (TypeError, ValueError):
            notes.append("[structured content that is not JSON was left out]")
    text = "\n\n".join([*texts, *notes])
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + f"\n[the result was cut at {MAX_TEXT_CHARS} characters]"
    if not text and images:
        text = f"[{len(images)} image{'s' if len(images) > 1 else ''}]"
    return text, images, bool(getattr(result, "is_error", False))
