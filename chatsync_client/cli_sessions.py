"""``chatsync sessions ...``: list, show, delete, retitle, export and import sessions on a running server.

The server address and token come from ``--url``/``--token`` or ``CHATSYNC_URL``/``CHATSYNC_TOKEN``. Output is a
table for people, or the wire JSON with ``--json``. Errors are one line on stderr and an exit code that says what
went wrong, so scripts can tell them apart (see :data:`EXIT_CODES`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from server.domain.models import Session, SessionSnapshot

from . import (
    DEFAULT_URL,
    ChatClient,
    ConnectionLost,
    ConnectionRejected,
    ServerUnreachable,
    TrpcError,
)

EXIT_OK = 0
EXIT_ERROR = 1  # any other error the server answered (bad input, conflict, internal error)
EXIT_USAGE = 2  # bad command line (argparse's own code)
EXIT_NOT_FOUND = 3  # no such session (or not yours)
EXIT_UNAUTHORIZED = 4  # missing or rejected token
EXIT_UNREACHABLE = 5  # no server at the address, or the connection broke

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "other error",
    EXIT_USAGE: "bad command line",
    EXIT_NOT_FOUND: "session not found",
    EXIT_UNAUTHORIZED: "missing or invalid token",
    EXIT_UNREACHABLE: "server unreachable",
}


class CliError(Exception):
    """A failure the command reports as one line on stderr; ``code`` is the process's exit status."""

    def __init__(self, message: str, code: int) -> None:
        self.code = code
        super().__init__(message)


def connection_options() -> argparse.ArgumentParser:
    """``--url``/``--token`` (shared by ``sessions`` and ``chat``)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--url", default=None, help=f"server address (CHATSYNC_URL, default {DEFAULT_URL})")
    p.add_argument("--token", default=None, help="API token (CHATSYNC_TOKEN)")
    return p


def add_parser(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False, parents=[connection_options()])
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    codes = "; ".join(f"{c} {what}" for c, what in EXIT_CODES.items())
    p = sub.add_parser("sessions", help="list and manage sessions on a running server", epilog=f"exit codes: {codes}")
    s = p.add_subparsers(dest="sessions_command", required=True)
    p_list = s.add_parser("list", parents=[common], help="your sessions, pinned first, then newest first")
    p_list.add_argument("--search", default=None, help="only sessions whose title or messages contain this")
    p_list.add_argument("--archived", action="store_true", help="archived sessions instead of the others")
    s.add_parser("show", parents=[common], help="messages, queue, status and usage").add_argument("id")
    s.add_parser("delete", parents=[common], help="delete a session").add_argument("id")
    p_title = s.add_parser("set-title", parents=[common], help="set a title (never overwritten automatically)")
    p_title.add_argument("id")
    p_title.add_argument("title")
    p_regen = s.add_parser("regenerate-title", parents=[common], help="derive the title again")
    p_regen.add_argument("id")
    p_regen.add_argument("--method", choices=["truncate", "model"], default=None)
    p_export = s.add_parser("export", parents=[common], help="write a session out as JSON or Markdown")
    p_export.add_argument("id")
    p_export.add_argument("--format", choices=["json", "markdown"], default="json")
    p_export.add_argument("-o", "--output", default=None, help="file to write (default: standard output)")
    p_import = s.add_parser("import", parents=[common], help="a JSON export as a new session of yours")
    p_import.add_argument("file", help="the export (- for standard input)")


def resolve(args: argparse.Namespace) -> tuple[str, str | None]:
    return (
        args.url or os.environ.get("CHATSYNC_URL") or DEFAULT_URL,
        args.token or os.environ.get("CHATSYNC_TOKEN") or None,
    )


CLIENT_ERRORS = (TrpcError, ConnectionLost, TimeoutError)
"""What a client call can raise that :func:`to_cli_error` explains."""


def to_cli_error(exc: BaseException, url: str) -> CliError:
    """The one-line message and exit code for a client exception (one table for the CLI and the chat)."""
    if isinstance(exc, TrpcError):
        if exc.code == "NOT_FOUND":
            return CliError(exc.message, EXIT_NOT_FOUND)
        if exc.code == "UNAUTHORIZED":
            return CliError(f"{exc.message} (check --token or CHATSYNC_TOKEN)", EXIT_UNAUTHORIZED)
        return CliError(f"{exc.code}: {exc.message}", EXIT_ERROR)
    if isinstance(exc, ConnectionRejected):
        return CliError(f"the server rejected the token ({exc.code})", EXIT_UNAUTHORIZED)
    if isinstance(exc, ServerUnreachable):
        return CliError(f"cannot reach the server at {url}", EXIT_UNREACHABLE)
    if isinstance(exc, ConnectionLost):
        return CliError(f"lost the connection to {url}", EXIT_UNREACHABLE)
    if isinstance(exc, TimeoutError):
        return CliError(f"the server at {url} did not answer in time", EXIT_UNREACHABLE)
    return CliError(str(exc), EXIT_ERROR)


@contextmanager
def mapped_errors(url: str) -> Iterator[None]:
    """Translate client exceptions into :class:`CliError` with the exit code for each kind."""
    try:
        yield
    except CLIENT_ERRORS as exc:
        raise to_cli_error(exc, url) from exc


# --- output ------------------------------------------------------------------------------------------------


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def format_sessions(sessions: list[Session]) -> str:
    if not sessions:
        return "no sessions"
    return table(
        ["ID", "TITLE", "STATUS", "MODEL", "UPDATED"],
        [
            [s.id, _clip(s.title or "(untitled)", 40), s.status, f"{s.provider}/{s.model}", _time(s.updated_at)]
            for s in sessions
        ],
    )


def format_snapshot(snap: SessionSnapshot) -> str:
    s = snap.session
    out = [
        f"{s.title or '(untitled)'}",
        f"  id       {s.id}",
        f"  status   {s.status}{' (queue paused)' if s.queue_paused else ''}",
        f"  model    {s.provider}/{s.model}",
        f"  usage    {s.usage.input_tokens} input tokens, {s.usage.output_tokens} output tokens",
        f"  updated  {_time(s.updated_at)}",
        "",
        f"Messages ({len(snap.messages)})",
    ]
    for m in snap.messages:
        mark = "" if m.status == "complete" else f" [{m.status}]"
        calls = "".join(f" [tool {c.name} {c.arguments}]" for c in m.tool_calls or [])
        out.append(f"  {m.role:<10}{_clip(m.content, 100)}{calls}{mark}")
    out += ["", f"Queue ({len(snap.queue)})"]
    out += [f"  {i}. {_clip(q.content, 100)}  ({q.id})" for i, q in enumerate(snap.queue, 1)]
    return "\n".join(out)


def _print_json(value: Any) -> None:
    print(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


# --- commands ----------------------------------------------------------------------------------------------


async def _run(args: argparse.Namespace, url: str, token: str | None) -> None:
    async with ChatClient(url, token, reconnect=False, connect_timeout=5) as chat:
        cmd = args.sessions_command
        if cmd == "list":
            sessions = await chat.list_sessions(search=args.search, archived=args.archived)
            if args.json:
                _print_json([s.wire() for s in sessions])
            else:
                print(format_sessions(sessions))
        elif cmd == "show":
            snap = await chat.get_session(args.id)
            _print_json(snap.wire()) if args.json else print(format_snapshot(snap))
        elif cmd == "delete":
            await chat.delete_session(args.id)
            _print_json({"deleted": args.id}) if args.json else print(f"deleted {args.id}")
        elif cmd in ("set-title", "regenerate-title"):
            if cmd == "set-title":
                session = await chat.set_title(args.id, args.title)
            else:
                session = await chat.regenerate_title(args.id, args.method)
            _print_json(session.wire()) if args.json else print(session.title or "(untitled)")
        elif cmd == "export":
            _write_export(args.output, await chat.export_session(args.id, args.format))
        elif cmd == "import":
            # One id for every attempt: a retry after a lost reply finds the first import instead of adding one.
            session = await chat.import_session(_read_export(args.file), request_id=str(uuid.uuid4()))
            _print_json(session.wire()) if args.json else print(f"imported {session.id} {session.title}".rstrip())


def _write_export(name: str | None, data: bytes) -> None:
    if name is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        Path(name).write_bytes(data)
    except OSError as exc:
        raise CliError(f"cannot write {name}: {exc.strerror}", EXIT_ERROR) from exc


def _read_export(name: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {name}: {exc.strerror}", EXIT_ERROR) from exc


def run_async(coro_factory: Callable[[str, str | None], Coroutine[Any, Any, None]], args: argparse.Namespace) -> None:
    """Run one client command; exit with the code of its error, after one line on stderr."""
    url, token = resolve(args)
    try:
        with mapped_errors(url):
            asyncio.run(coro_factory(url, token))
    except CliError as exc:
        print(f"chatsync: {exc}", file=sys.stderr)
        raise SystemExit(exc.code) from None


def main(args: argparse.Namespace) -> None:
    run_async(lambda url, token: _run(args, url, token), args)
