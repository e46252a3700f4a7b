"""Uploaded files: storage backends, the Files service, and the HTTP endpoints ``POST /files`` and
``GET /files/{id}`` (docs/api.md "Files")."""

from __future__ import annotations

from .service import FileInfo, Files, Upload, clean_name
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
