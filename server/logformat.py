"""How the server's logs are written: ``CHATSYNC_LOG_FORMAT=text`` (the default, one readable line per record) or
``json``: one JSON object per line, for a log collector.

A JSON line holds ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger`` and ``message``, the ids of
what was being done when it was written — ``request_id`` (one per call), ``session_id``, ``run_id`` — and, while
tracing (``server.tracing``), ``trace_id`` and ``span_id``; an exception's traceback is ``exception``. Ids that
do not apply are left out. Every message and traceback goes through ``logredact.redact`` first: tokens,
passwords in URLs and API keys never reach a log, whatever logger wrote them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import orjson

from . import tracing
from .logredact import RedactQuery, redact

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record (no newline inside: JSON escapes them)."""

    def format(self, record: logging.LogRecord) -> str:
        created = time.gmtime(record.created)
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", created) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for key, var in (
            ("request_id", tracing.request_id),
            ("session_id", tracing.session_id),
            ("run_id", tracing.run_id),
        ):
            value = var.get()
            if value is not None:
                line[key] = value
        ids = tracing.current_ids()
        if ids is not None:
            line["trace_id"], line["span_id"] = ids
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = redact(record.exc_text)
        return orjson.dumps(line).decode()


def configure(level: str, fmt: str, debug: Sequence[str] = ()) -> None:
    """The root logger's one handler (stderr) in ``fmt`` (``text`` or ``json``), at ``level``; the loggers named
    in ``debug`` (and theirs below them) at debug."""
    handler = logging.StreamHandler()
    handler.addFilter(RedactQuery())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)
    for name in debug:
        logging.getLogger(name).setLevel(logging.DEBUG)
