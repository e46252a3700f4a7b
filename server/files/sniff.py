"""The media type of a file, decided from its bytes as they stream past (never from what a client claims).

A few formats are recognised by their magic numbers; anything else that is valid UTF-8 without control
characters is ``text/plain``; the rest is ``application/octet-stream``. So an HTML page that claims to be an
image is served as plain text, and a browser (told ``nosniff``) never renders it.
"""

from __future__ import annotations

import codecs

OCTET_STREAM = "application/octet-stream"
TEXT = "text/plain"
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

HEAD_BYTES = 16  # enough for every signature below

# C0 controls that do not occur in text (tab, newline, form feed, carriage return and escape do).
_BINARY_CONTROLS = bytes(b for b in range(32) if b not in b"\t\n\x0c\r\x1b")
_NOT_TEXT = bytes.maketrans(b"", b"")  # identity table for bytes.translate(delete=...)


def _magic(head: bytes) -> str | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    return None


class Sniffer:
    """Feed every chunk in order, then read :attr:`media_type`."""

    def __init__(self) -> None:
        self._head = b""
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._text = True

    def feed(self, chunk: bytes) -> None:
        if len(self._head) < HEAD_BYTES:
            self._head += chunk[: HEAD_BYTES - len(self._head)]
        if not self._text:
            return
        if len(chunk.translate(_NOT_TEXT, _BINARY_CONTROLS)) != len(chunk):
            self._text = False
            return
        try:
            self._decoder.decode(chunk)
        except UnicodeDecodeError:
            self._text = False

    @property
    def media_type(self) -> str:
        found = _magic(self._head)
        if found is not None:
            return found
        if self._text:
            try:
                self._decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                return OCTET_STREAM
            return TEXT
        return OCTET_STREAM


def sniff(data: bytes) -> str:
    sniffer = Sniffer()
    sniffer.feed(data)
    return sniffer.media_type
