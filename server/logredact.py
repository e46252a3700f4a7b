"""Secrets never reach a log: request lines (uvicorn's HTTP access log, and its WebSocket lines, which go to
``uvicorn.error``) lose the values of credential-bearing query parameters (``connectionParams``, which
``httpSubscriptionLink`` uses to carry the token, and ``token``). Every line of the JSON format
(``server.logformat``) also loses chatsync tokens (``cs_…``), bearer credentials, API keys (``sk-…``) and the
password of a URL (``postgresql://user:password@host``) wherever they appear, tracebacks included."""

from __future__ import annotations

import logging
import re

# A query parameter whose value is a credential, up to the next ``&`` (or the end).
_SECRET_PARAM = re.compile(r"(?i)([?&](?:connectionParams|token|access_token)=)[^&\s]*")
REDACTED = "[redacted]"
# Credentials by their look, anywhere in a line: a token this server issued, a bearer credential, a provider's
# API key, a URL's password.
_SECRET_TEXT = re.compile(
    r"(?i)(?P<keep>bearer\s+|://[^:/\s@]+:)(?P<secret>[^\s@,;\"']+)(?P<at>@?)|\b(?:cs|sk)[-_][A-Za-z0-9_-]{16,}"
)


def _secret(m: re.Match[str]) -> str:
    keep = m.group("keep")
    if keep is None:
        return REDACTED
    if keep.startswith("://") and not m.group("at"):
        return m.group(0)  # ``scheme://host:port``: no password there
    return keep + REDACTED + m.group("at")


def redact(text: str) -> str:
    text = _SECRET_PARAM.sub(lambda m: m.group(1) + REDACTED, text)
    if "cs_" in text or "sk-" in text or "@" in text or "earer" in text:
        text = _SECRET_TEXT.sub(_secret, text)
    return text


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
