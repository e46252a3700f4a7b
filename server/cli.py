"""The ``chatsync`` command: ``serve``, ``db upgrade``, ``users create|delete``, ``tokens create|list|revoke``,
``link`` (server side: they open the database directly), ``mcp list|add|remove`` (the MCP server file), and the
clients ``sessions ...`` (:mod:`chatsync_client.cli_sessions`) and ``chat`` (:mod:`chatsync_client.tui`)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
from typing import Any

from . import logformat, tracing
from .settings import Settings, SettingsError, load_settings


def _settings_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"chatsync: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def serve(settings: Settings, host: str | None, port: int | None) -> None:
    # Importing the server and building the app make a few hundred thousand objects that live as long as the
    # process. Collecting while they are made only walks them again and again (some 290 collections, an eighth
    # of the start's CPU): the collector is off until they are all made, then one collection.
    gc.disable()
    try:
        from .app import create_app
        from .serve import ChatsyncServer, uvicorn_config

        tracing.configure_from_env()  # OTEL_* variables: off unless they ask for traces
        app = create_app(settings, on_owner_token=announce_owner)
        config = uvicorn_config(app, settings, host or settings.host, settings.port if port is None else port)
        # What is loaded by now (modules, SQLAlchemy's mappers, pydantic's validators) lives as long as the
        # process: take it out of the cyclic collector's view, so a full collection walks only what came after.
        # With it, a full collection is a pause every streaming client would feel (docs/performance.md).
        gc.collect()
        gc.freeze()
    finally:
        gc.enable()
    try:
        ChatsyncServer(config).run()
    finally:
        tracing.shutdown()  # sends the spans still batched


OWNER_TOKEN_FILE = "chatsync-owner-token"


def announce_owner(token: str) -> None:
    """Show the first-start owner token once, on a terminal. When stderr is not a terminal (a service
    manager or container that keeps its output as a log), the token goes to a file only its owner can read,
    and the log gets the file's name."""
    if sys.stderr.isatty():
        print(f"chatsync: created the local owner; its token (shown once): {token}", file=sys.stderr, flush=True)
        return
    path = os.path.abspath(OWNER_TOKEN_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    print(
        f"chatsync: created the local owner; its token is in {path} (readable by you only; delete it once you have it)",
        file=sys.stderr,
        flush=True,
    )


async def _db_upgrade(settings: Settings) -> None:
    from .store import migrate
    from .store.db import Database

    async with Database(settings.database_url) as db:
        await migrate.upgrade(db)


async def _create_user(settings: Settings, name: str, admin: bool) -> str:
    from .services.auth import AuthService
    from .store import migrate
    from .store.db import Database

    async with Database(settings.database_url) as db:
        await migrate.upgrade(db)
        _user, token = await AuthService(db).create_user(name, admin=admin)
        return token


async def _link_base(db: Any, settings: Settings, given: str | None) -> str:
    """Where a ``chatsync link`` points: ``--url``, else ``CHATSYNC_PUBLIC_URL``, else the address the server
    started last on this database says it listens on, else the configured host and port."""
    from .services import addresses

    if given:
        return given.rstrip("/")
    if settings.public_url:
        return settings.link_base()
    running = await addresses.latest(db)
    if running:
        print(f"link for the server listening at {running} (--url to name another address)", file=sys.stderr)
        return running
    return settings.link_base()


async def _auth_command(settings: Settings, args: argparse.Namespace) -> None:
    """``users delete``, ``tokens ...`` and ``link``: the database directly, no server needed."""
    import json

    from .files import Files, create_storage
    from .services.auth import AuthService
    from .services.links import SignInLinks
    from .store import migrate
    from .store.db import Database

    async with Database(settings.database_url) as db:
        await migrate.upgrade(db)
        auth = AuthService(db)
        if args.command == "users":
            # Revoke first and give running servers a moment to see it (they poll revocations every second),
            # so every connection of this user is closed even though the token rows are deleted afterwards.
            ids = [t["id"] for t in await auth.tokens(args.name)]
            for device_id in ids:
                await auth.revoke_token(device_id)
            await asyncio.sleep(2.5 if ids else 0)
            await auth.delete_user(args.name, Files(db, create_storage(settings, db), settings))
            print(f"deleted user {args.name!r} and revoked {len(ids)} token(s)", file=sys.stderr)
        elif args.command == "link":
            base = await _link_base(db, settings, args.url)
            link = await SignInLinks(db).create_for(args.user, args.device, base)
            print(link["url"])
            if not args.no_qr:
                _print_qr(link["url"])
            print("valid for 10 minutes, once", file=sys.stderr)
        elif args.tokens_command == "create":
            print(await auth.create_token(args.name, args.device or ""))
        elif args.tokens_command == "list":
            tokens = await auth.tokens(args.user)
            if args.json:
                print(json.dumps(tokens))
            else:
                for t in tokens:
                    print(
                        f"{t['id']}  {t['user']:<16} {t['name'] or '-':<24} created {_when(t['createdAt'])}"
                        f"  last used {_when(t['lastUsedAt'])}"
                    )
        else:
            await auth.revoke_token(args.id)
            print(f"revoked {args.id}", file=sys.stderr)


def _when(ms: int | None) -> str:
    import datetime as dt

    if ms is None:
        return "never"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _print_qr(url: str) -> None:
    import segno

    segno.make(url, error="m").terminal(out=sys.stdout, compact=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chatsync", description="Realtime sync server for LLM chat sessions.")
    sub = parser.add_subparsers(dest="command", required=True)

    p_serve = sub.add_parser("serve", help="run the server (configuration from CHATSYNC_* variables)")
    p_serve.add_argument("--host", default=None)
    p_serve.add_argument("--port", type=int, default=None)

    p_db = sub.add_parser("db", help="database maintenance")
    db_sub = p_db.add_subparsers(dest="db_command", required=True)
    db_sub.add_parser("upgrade", help="apply all migrations")

    p_users = sub.add_parser("users", help="manage users")
    users_sub = p_users.add_subparsers(dest="users_command", required=True)
    p_create = users_sub.add_parser("create", help="create a user and print its token (only the token)")
    p_create.add_argument("name")
    p_create.add_argument("--admin", action="store_true")
    p_udel = users_sub.add_parser(
        "delete", help="delete a user and everything they own; their devices are signed out everywhere"
    )
    p_udel.add_argument("name")

    p_tokens = sub.add_parser("tokens", help="manage API tokens (each token is a device)")
    tokens_sub = p_tokens.add_subparsers(dest="tokens_command", required=True)
    p_tok = tokens_sub.add_parser("create", help="issue another token for a user and print it")
    p_tok.add_argument("name")
    p_tok.add_argument("--device", default=None, help="a name for the device it is for")
    p_tlist = tokens_sub.add_parser("list", help="every live token: id, user, device name, created, last used")
    p_tlist.add_argument("--user", default=None, help="only this user's")
    p_tlist.add_argument("--json", action="store_true")
    p_trev = tokens_sub.add_parser("revoke", help="revoke a token by id; its connections are closed")
    p_trev.add_argument("id")

    p_link = sub.add_parser("link", help="print a one-time sign-in link (and its QR code) for a new device")
    p_link.add_argument("--user", default="owner", help="whose device it signs in (default: owner)")
    p_link.add_argument("--device", default=None, help="a name for the new device")
    p_link.add_argument("--no-qr", action="store_true", help="print the link only")
    p_link.add_argument(
        "--url",
        type=_http_url,
        default=None,
        help="the address other devices reach the server at (default: CHATSYNC_PUBLIC_URL, else where it runs)",
    )

    _mcp_parser(sub)

    from chatsync_client import cli_sessions

    cli_sessions.add_parser(sub)
    p_chat = sub.add_parser(
        "chat", parents=[cli_sessions.connection_options()], help="full-screen terminal chat on a running server"
    )
    p_chat.add_argument("session", nargs="?", default=None, help="session id (default: the newest, or a new one)")
    return parser


def _mcp_parser(sub: Any) -> None:
    p_mcp = sub.add_parser("mcp", help="MCP servers (the JSON file CHATSYNC_MCP_SERVERS names; docs/tools.md)")
    p_mcp.add_argument("--file", default=None, help="the file to edit (default: CHATSYNC_MCP_SERVERS)")
    mcp_sub = p_mcp.add_subparsers(dest="mcp_command", required=True)
    p_list = mcp_sub.add_parser("list", help="the configured servers (without their secrets)")
    p_list.add_argument("--json", action="store_true")
    p_add = mcp_sub.add_parser(
        "add", help="add or replace a server: --url URL, or a stdio server's command line after `--`"
    )
    p_add.add_argument("name")
    p_add.add_argument("--url", default=None, help="a Streamable HTTP server's URL")
    p_add.add_argument("--header", action="append", default=[], metavar="NAME=VALUE", help="an HTTP header")
    p_add.add_argument("--bearer-token", default=None, help="sent as Authorization: Bearer ...")
    p_add.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="for a stdio server")
    p_add.add_argument("--users", default="*", help="comma-separated user names, or * (default: everyone)")
    p_add.add_argument("--approval", choices=["ask", "auto", "deny"], default="ask")
    p_add.add_argument("--tool", action="append", default=[], metavar="TOOL=POLICY", help="a tool's own policy")
    p_add.add_argument("--timeout", type=float, default=None, help="seconds one call may take")
    p_add.add_argument("--description", default="")
    p_remove = mcp_sub.add_parser("remove", help="remove a server")
    p_remove.add_argument("name")


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} {item!r}: expected NAME=VALUE")
        out[key] = value
    return out


def _mcp_command(settings: Settings, args: argparse.Namespace) -> None:
    import json

    from .tools.mcp import config as mcp_config

    path = args.file or settings.mcp_servers
    if not path:
        raise ValueError("set CHATSYNC_MCP_SERVERS to the file that configures MCP servers (or pass --file)")
    current = mcp_config.load(path)
    if args.mcp_command == "list":
        rows = [cfg.public(name) | {"users": cfg.users} for name, cfg in current.servers.items()]
        if args.json:
            print(json.dumps(rows))
        for row in [] if args.json else rows:
            print(f"{row['name']:<24} {row['transport']:<6} {row['approval']:<5} users: {', '.join(row['users'])}")
        return
    if args.mcp_command == "remove":
        mcp_config.save(path, mcp_config.without_server(current, args.name))
        print(f"removed MCP server {args.name!r}", file=sys.stderr)
        return
    command = list(args.server_command or [])
    entry: dict[str, Any] = {"users": [u.strip() for u in args.users.split(",") if u.strip()]}
    entry["approval"] = args.approval
    if command:
        entry["command"] = command
    if args.url:
        entry["url"] = args.url
    if args.env:
        entry["env"] = _pairs(args.env, "--env")
    if args.header:
        entry["headers"] = _pairs(args.header, "--header")
    if args.bearer_token:
        entry["bearerToken"] = args.bearer_token
    if args.tool:
        entry["tools"] = _pairs(args.tool, "--tool")
    if args.timeout is not None:
        entry["timeoutSeconds"] = args.timeout
    if args.description:
        entry["description"] = args.description
    mcp_config.save(path, mcp_config.with_server(current, args.name, entry))
    print(f"saved MCP server {args.name!r} to {path}", file=sys.stderr)


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")) or len(value) > 2000:
        raise argparse.ArgumentTypeError("must be an http:// or https:// address")
    return value


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `chatsync mcp add NAME [options] -- prog arg ...`: what follows `--` is the server's command line, kept
    # away from argparse (which reads `--` only at the top level of nested commands).
    tail: list[str] = []
    if argv[:1] == ["mcp"] and "--" in argv:
        cut = argv.index("--")
        argv, tail = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    args.server_command = tail
    if args.command in ("sessions", "chat"):  # clients of a running server: no server settings needed
        _client_command(args)
        return
    settings = _settings_or_exit()
    logformat.configure(settings.log_level, settings.log_format, settings.log_debug)
    try:
        if args.command == "serve":
            serve(settings, args.host, args.port)
        elif args.command == "db":
            asyncio.run(_db_upgrade(settings))
            print("database is at the newest schema", file=sys.stderr)
        elif args.command == "mcp":
            _mcp_command(settings, args)
        elif args.command == "users" and args.users_command == "create":
            print(asyncio.run(_create_user(settings, args.name, args.admin)))
        else:
            asyncio.run(_auth_command(settings, args))
    except ValueError as exc:
        print(f"chatsync: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def _client_command(args: argparse.Namespace) -> None:
    from chatsync_client import cli_sessions

    if args.command == "sessions":
        cli_sessions.main(args)
    else:
        from chatsync_client.tui import run_chat

        run_chat(args)


if __name__ == "__main__":
    main()
