"""The JSON log format (server/logformat.py): one object per line, the ids of the work under way, and no secret
in a message, an argument or a traceback."""

from __future__ import annotations

import logging

import orjson
import pytest

from server import logformat, tracing
from server.logredact import REDACTED, redact
from server.settings import load_settings
from tests.testkit import json_log

pytestmark = pytest.mark.fast

TOKEN = "cs_V2wDtEdT1lfuoDrKVKreDoL0qQvffkcSlwT5OviZLe8"


@pytest.fixture
def json_lines():
    logger = logging.getLogger("chatsync.test.logs")
    logger.propagate = False
    with json_log(logger.name) as captured:
        yield captured
    logger.propagate = True


def test_a_line_is_one_object_with_the_ids_of_the_work(json_lines):
    logger, lines = json_lines
    logger.warning("outside any call")
    tokens = tracing.begin_request()
    try:
        tracing.annotate(session_id="s-1")
        tracing.run_id.set("r-1")
        logger.warning("two\nlines, %s", "joined")
    finally:
        tracing.end_request(tokens)
        tracing.run_id.set(None)
    outside, inside = lines()
    assert set(outside) == {"time", "level", "logger", "message"} and outside["level"] == "warning"
    assert outside["time"].endswith("Z") and outside["logger"] == "chatsync.test.logs"
    assert inside["message"] == "two\nlines, joined" and len(inside["request_id"]) == 16
    assert inside["session_id"] == "s-1" and inside["run_id"] == "r-1" and "trace_id" not in inside


def test_secrets_never_reach_a_json_line(json_lines):
    logger, lines = json_lines
    url = "postgresql+asyncpg://chatsync:hunter2-pass@db.internal:5432/chatsync"
    logger.info("GET /trpc/session.list?connectionParams=%s&input=1", '{"token":"' + TOKEN + '"}')
    logger.info("header Authorization: Bearer %s", TOKEN[3:])
    try:
        raise ConnectionError(f"cannot reach {url} with key sk-proj-0123456789abcdefXYZ and {TOKEN}")
    except ConnectionError:
        logger.exception("database down")
    text = "\n".join(orjson.dumps(line).decode() for line in lines())
    for secret in (TOKEN, TOKEN[3:20], "hunter2-pass", "sk-proj-0123456789abcdefXYZ"):
        assert secret not in text
    first, second, failed = lines()
    assert first["message"].startswith("GET /trpc/session.list?connectionParams=" + REDACTED)
    assert second["message"] == "header Authorization: Bearer " + REDACTED
    assert "ConnectionError" in failed["exception"] and "chatsync:[redacted]@db.internal:5432" in failed["exception"]


def test_redaction_leaves_what_is_not_a_secret():
    for text in ("http://127.0.0.1:8787/trpc", "alice@example.com wrote", "session cs-short", "Bearer"):
        assert redact(text) == text


def test_loggers_named_for_debug_write_debug_lines_and_the_rest_keep_the_level():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    named, other = logging.getLogger("server.sync.delivery"), logging.getLogger("aiosqlite")
    levels = named.level, other.level
    try:
        logformat.configure("info", "text")
        assert not named.isEnabledFor(logging.DEBUG)  # off by default
        logformat.configure("info", "text", ["server.sync.delivery"])
        assert named.isEnabledFor(logging.DEBUG) and not other.isEnabledFor(logging.DEBUG)
        assert not root.isEnabledFor(logging.DEBUG)
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
        named.setLevel(levels[0])
        other.setLevel(levels[1])


def test_the_debug_loggers_setting_is_a_comma_separated_list(monkeypatch):
    monkeypatch.setenv("CHATSYNC_LOG_DEBUG", "server.sync.delivery, server.engine")
    assert load_settings().log_debug == ["server.sync.delivery", "server.engine"]
    monkeypatch.delenv("CHATSYNC_LOG_DEBUG")
    assert load_settings().log_debug == []
