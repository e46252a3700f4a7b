"""Every Redis channel name and key prefix chatsync uses, in one place.

Everything that belongs to one session carries the session id as a hash tag (``{id}``): under Redis Cluster
its channel, its set of streaming messages and their partial texts all hash to the session's slot, so one
shard serves all of a session's traffic and a pipeline of APPEND + SPUBLISH stays on one connection, in order.
"""

from __future__ import annotations

DEFAULT_PREFIX = "chatsync:"


def session_channel(prefix: str, session_id: str) -> str:
    """Pub/sub channel carrying one session's events."""
    return f"{prefix}session:{{{session_id}}}"


def session_from_channel(prefix: str, channel: str) -> str:
    return channel[len(prefix) + len("session:{") : -1]


def control_channel(prefix: str) -> str:
    """Always subscribed, so a process's pub/sub connection is readable before it has any session."""
    return f"{prefix}control"


def stream_text_key(prefix: str, session_id: str, message_id: str) -> str:
    """The partial text of a streaming message (a string that deltas are APPENDed to)."""
    return f"{prefix}stream:{{{session_id}}}:{message_id}"


def session_streams_key(prefix: str, session_id: str) -> str:
    """The set of a session's messages that are streaming right now."""
    return f"{prefix}streams:{{{session_id}}}"


def rate_key(prefix: str, user_id: str) -> str:
    """One user's request token bucket, shared by every replica (a hash: ``tokens``, ``at``)."""
    return f"{prefix}rate:{user_id}"


def presence_key(prefix: str, session_id: str) -> str:
    """The live presence entries of a session (a hash: client key -> ``expiresAt|entry JSON``)."""
    return f"{prefix}presence:{{{session_id}}}"


def presence_version_key(prefix: str, session_id: str) -> str:
    """The counter that numbers a session's presence sets (in the session's slot, beside its hash)."""
    return f"{prefix}presence-v:{{{session_id}}}"
