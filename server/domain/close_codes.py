"""WebSocket close codes, grouped by what the client should do (decide by range, never by reason text).

4000-4499  reconnect and resume from your lastEventId (nothing was lost)
4500-4999  do not reconnect with the same credentials

The TypeScript client gets these constants, under the same names, from the generated ``router.gen.ts``.
"""

from __future__ import annotations

RECONNECT_MIN, RECONNECT_MAX = 4000, 4499
"""Codes in this range: reconnect (after a pause) and resume."""
FINAL_MIN, FINAL_MAX = 4500, 4999
"""Codes in this range: reconnecting unchanged cannot help (sign in again, or fix the client)."""

SLOW_CONSUMER = 4000
"""The client did not read fast enough; its outbound buffer overflowed. Reconnect and resume."""
SERVER_RESTART = 4001
"""The server is shutting down; another replica (or this one, restarted) will serve the resume."""
UNAVAILABLE = 4002
"""The token could not be checked now (the database is unavailable or overloaded); reconnect shortly."""
SERVER_FULL = 4003
"""This process holds CHATSYNC_MAX_CONNECTIONS connections; reconnect after a pause (another replica may have room)."""

UNAUTHORIZED = 4501
"""The token in connectionParams was not accepted."""
PROTOCOL_ERROR = 4502
"""The connectionParams frame was malformed."""

TOKEN_REVOKED = 4503
"""The token this connection signed in with was revoked (or its user deleted), now or before it reconnected:
sign in again."""
AUTH_TIMEOUT = 4504
"""No token arrived within CHATSYNC_AUTH_TIMEOUT_SECONDS of opening the socket."""
