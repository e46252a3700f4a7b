"""Uploaded files: storage backends (``storage.py``; ``directory.py``, ``database.py``), a file's life from
upload to collection (``lifecycle.py`` :class:`Files`), the per-user bounds (``quota.py``), file references
(``refs.py``) and media types (``sniff.py``); the HTTP endpoints ``POST /files`` and ``GET /files/{id}`` are
``server/http/files.py`` (docs/api.md "Files")."""

from __future__ import annotations

from .lifecycle import FileInfo, Files, Upload, clean_name
from .sniff import IMAGE_TYPES, sniff
from .storage import BlobWriter, FileStorage, create_storage

__all__ = [
    "IMAGE_TYPES",
    "BlobWriter",
    "FileInfo",
    "FileStorage",
    "Files",
    "Upload",
    "clean_name",
    "create_storage",
    "sniff",
]
