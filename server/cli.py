"""The ``chatsync`` command: ``serve``, ``db upgrade``, ``users create``, ``tokens create`` (server side), and the
clients ``sessions ...`` (:mod:`server.cli_sessions`) and ``chat`` (:mod:`server.tui`)."""
from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from .settings import Settings, SettingsError, load_settings


def _settings_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"chatsync: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def serve(settings: Settings, host: str | None, port: int | None) -> None:
    from .app import create_app
    from .serve import ChatsyncServer, uvicorn_config

    app = create_app(settings)
    config = uvicorn_config(app, settings, host or settings.host, settings.port if port is None else port)
    # What is loaded by now (modules, SQLAlchemy's mappers, pydantic's validators) lives as long as the
    # process: take it out of the cyclic collector's view, so a full collection walks only what came after.
    # With it, one took ~60 ms: a pause every streaming client would feel.
    gc.collect()
    gc.freeze()
    ChatsyncServer(config).run()


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


async def _create_token(settings: Settings, name: str) -> str:
    from .services.auth import AuthService
    from .store.db import Database

    async with Database(settings.database_url) as db:
        return await AuthService(db).create_token(name)


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

    p_tokens = sub.add_parser("tokens", help="manage API tokens")
    tokens_sub = p_tokens.add_subparsers(dest="tokens_command", required=True)
    p_tok = tokens_sub.add_parser("create", help="issue another token for a user and print it")
    p_tok.add_argument("name")

    from . import cli_sessions

    cli_sessions.add_parser(sub)
    p_chat = sub.add_parser("chat", parents=[cli_sessions.connection_options()],
                            help="full-screen terminal chat on a running server")
    p_chat.add_argument("session", nargs="?", default=None, help="session id (default: the newest, or a new one)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.command in ("sessions", "chat"):  # clients of a running server: no server settings needed
        _client_command(args)
        return
    settings = _settings_or_exit()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        if args.command == "serve":
            serve(settings, args.host, args.port)
        elif args.command == "db":
            asyncio.run(_db_upgrade(settings))
            print("database is at the newest schema", file=sys.stderr)
        elif args.command == "users":
            print(asyncio.run(_create_user(settings, args.name, args.admin)))
        elif args.command == "tokens":
            print(asyncio.run(_create_token(settings, args.name)))
    except ValueError as exc:
        print(f"chatsync: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def _client_command(args: argparse.Namespace) -> None:
    from . import cli_sessions

    if args.command == "sessions":
        cli_sessions.main(args)
    else:
        from .tui import run_chat

        run_chat(args)


if __name__ == "__main__":
    main()
