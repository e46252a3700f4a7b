"""Secrets never reach a log: request lines (uvicorn's HTTP access log, and its WebSocket lines, which go to
``uvicorn.error``) lose the values of credential-bearing query parameters (``connectionParams``, which
``httpSubscriptionLink`` uses to carry the token, and ``token``)."""

from __future__ import annotations

import logging
import re

# A query parameter whose value is a credential, up to the next ``&`` (or the end).
_SECRET_PARAM = re.compile(r"(?i)([?&](?:connectionParams|token|access_token)=)[^&\s]*")
REDACTED = "[redacted]"


def redact(text: str) -> str:
    return _SECRET_PARAM.sub(lambda m: m.group(1) + REDACTED, text)


class RedactQuery(logging.Filter):
    """Redacts the message and every string argument of a record (request lines carry the path as one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in args)
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def install() -> None:
    """Attach the filter to uvicorn's loggers that write request lines (idempotent)."""
    for name in ("uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactQuery) for f in logger.filters):
            logger.addFilter(RedactQuery())
