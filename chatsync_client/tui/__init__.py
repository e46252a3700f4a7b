"""The terminal chat (``chatsync chat``), built with Textual."""

from __future__ import annotations

import argparse
import sys

from .app import ChatApp

__all__ = ["ChatApp", "run_chat"]


def run_chat(args: argparse.Namespace) -> None:
    """Run the full-screen chat; on a start-up failure print one line and exit with its code."""
    from ..cli_sessions import resolve

    url, token = resolve(args)
    app = ChatApp(url, token, args.session)
    app.run()
    if app.error:
        print(f"chatsync: {app.error}", file=sys.stderr)
    raise SystemExit(app.return_code or 0)
