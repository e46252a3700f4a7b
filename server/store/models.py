"""SQLAlchemy tables. The database is the source of truth for sessions, messages, the queue and the event log."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ..domain.models import BusyPolicy, MessageStatus, Role, SessionStatus, TitleSource, ToolMode, ToolOutcome

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware timestamp on every backend (SQLite hands back naive values; we pin them to UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime stored; use utcnow()")
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    """The declarative base of every table, with the naming convention of constraints and indexes."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)

    if TYPE_CHECKING:
        # Every model here is mapped to a Table of its own (SQLAlchemy declares a FromClause, which Core's
        # insert/update/delete do not take): the plain statements of the hot paths are built on it.
        __table__: ClassVar[Table]


class User(Base):
    """A user: a name, a role (``user`` or ``admin``), and the position of their session feed."""

    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    role: Mapped[str] = mapped_column(String(16), default="user")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Sequence number of the newest event in the user's session feed (``user_events``); bumped under this
    # row's lock by every transaction that changes what the feed shows.
    feed_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # Sequence number of the user's newest exactly-once record (``client_requests.seq``); bumped under this row's
    # lock by every transaction that writes one, so the records of a user are numbered 1, 2, 3, ...
    request_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class ApiToken(Base):
    """One token is one device: a browser, a phone, a terminal. Its id is the device id clients see."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # sha256 of the token; the token itself is shown once and never stored.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    name: Mapped[str] = mapped_column(String(200), default="", server_default="")
    # Written at most once a minute per token (``services.auth``), so reads stay reads.
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # A revoked token is refused from then on; the row stays so every replica can tell its connections apart.
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, index=True)


class LinkCode(Base):
    """A one-time device sign-in code (``auth.createLink``), stored hashed like tokens.

    A code is spendable while unused, unrevoked, unexpired, and while the device that made it is live: it dies
    with that device (and, by cascade, with its user)."""

    __tablename__ = "link_codes"

    code_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    # What ``auth.links`` and ``auth.revokeLink`` call it: the code itself is shown once, and its hash stays here.
    id: Mapped[str] = mapped_column(String(36), unique=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # The device (token) that made it; None for the server's command line (``chatsync link``).
    made_by: Mapped[str | None] = mapped_column(
        ForeignKey("api_tokens.id", ondelete="CASCADE"), nullable=True, index=True
    )
    # The name the new device will get (unless it brings its own).
    device_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ClientRequest(Base):
    """The outcome of a write made with a ``clientRequestId``: a retry with the same id gets the same reply back
    instead of doing the write again. Written in the write's own transaction; trimmed by age, and to the newest
    ``CHATSYNC_MAX_REQUEST_RECORDS_PER_USER`` of each user (by ``seq``)."""

    __tablename__ = "client_requests"
    __table_args__ = (
        PrimaryKeyConstraint("user_id", "request_id"),
        Index("ix_client_requests_user_seq", "user_id", "seq"),
    )

    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    request_id: Mapped[str] = mapped_column(String(64))
    procedure: Mapped[str] = mapped_column(String(64))
    # sha256 of the call's input (without the id): the same id with another input is a conflict.
    input_hash: Mapped[str] = mapped_column(String(64))
    # A receipt (JSON): the ids of what the write made and the few values it chose, from which a repeat rebuilds
    # the reply (``services.requests``). Rows with ``seq`` 0 were written before receipts: the whole reply.
    result: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    # 1, 2, 3, ... per user (``users.request_seq``): the order in which the per-user bound drops the oldest.
    seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class UserEvent(Base):
    """The per-user session feed (``session.feed``): ``seq`` is 1, 2, 3, ... per user, like ``events``."""

    __tablename__ = "user_events"
    __table_args__ = (PrimaryKeyConstraint("user_id", "seq"),)

    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger, autoincrement=False)
    type: Mapped[str] = mapped_column(String(48))
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ChatSession(Base):
    """A session: its settings, its run state (the run in progress, its lease), queue and log positions."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(Text, default="")
    title_source: Mapped[TitleSource] = mapped_column(String(16), default="none")
    provider: Mapped[str] = mapped_column(String(32), default="echo")
    model: Mapped[str] = mapped_column(String(200), default="echo")
    system_prompt: Mapped[str | None] = mapped_column(Text, nullable=True)
    defaults: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    tools: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    tool_mode: Mapped[ToolMode] = mapped_column(String(16), default="parallel")
    # MCP servers enabled for the session and the owner's settings per server (docs/tools.md).
    mcp_servers: Mapped[list[str]] = mapped_column(JSON, default=list)
    mcp_tools: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    busy_policy: Mapped[BusyPolicy] = mapped_column(String(16), default="enqueue")
    disable_streaming: Mapped[bool] = mapped_column(Boolean, default=False)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    status: Mapped[SessionStatus] = mapped_column(String(24), default="idle")
    queue_paused: Mapped[bool] = mapped_column(Boolean, default=False)
    usage_input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    usage_output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    # Sequence number of the newest durable event; bumped under the row lock in every unit of work.
    last_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Set by session.delete; the purge (``services.purge``) removes the row and everything of it a while later.
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, index=True)
    # The run in progress (running or requires-action), or None when idle. See server/services/lease.py.
    run_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    # The run lease: which process drives the run and until when (compare-and-set under the row lock).
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, index=True)
    # Set by run.abort on any replica; the lease owner polls it while the run streams.
    abort_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # With abort_requested: the abort makes room for the queue's head (``message.sendQueuedNow``), so the run
    # ends without pausing the queue and the head is sent at once.
    abort_then_send: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Unread (``services.unread``): the seq of the newest event that wants the owner's attention (an answer, a
    # failure, an approval request), what it was, and the seq up to which the owner has looked at the session.
    # Unread while ``attention_seq > seen_seq``.
    attention_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    attention_kind: Mapped[str | None] = mapped_column(String(16), nullable=True)
    seen_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # How the owner keeps the list: pinned sessions come first; archived ones leave the main list (``session.list``
    # shows them only when asked for with ``archived``). Changed with ``session.update``, shown by ``session.feed``.
    pinned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    archived: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class Message(Base):
    """A message of a session, a node of the conversation tree: ``parent_id`` is its parent (its versions share
    one), ``active`` marks the path shown."""

    __tablename__ = "messages"
    __table_args__ = (
        Index("ix_messages_session_ordinal", "session_id", "ordinal", unique=True),
        # The active path in order (``session.get``, ``message.list``, every request the model gets).
        Index("ix_messages_session_active_ordinal", "session_id", "active", "ordinal"),
        # The versions of a message: the messages with its parent.
        Index("ix_messages_session_parent", "session_id", "parent_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    # Creation order in the session, 1-based, assigned under the session row lock. A message is always created
    # after its parent, so the messages of one path in ordinal order are that path in order.
    ordinal: Mapped[int] = mapped_column(Integer)
    # The message before it on its branch (None: the first message of a branch from the start). Messages with
    # the same parent are versions of each other, in ordinal order.
    parent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    # On the session's active path (the branch every device shows), changed only under the session row lock.
    active: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # The session's event seq at which it last left the active path (0: never left it): a branch switch goes
    # down to the leaf that was active last below the message it names.
    left_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    role: Mapped[Role] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    attachments: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    tool_call_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    status: Mapped[MessageStatus] = mapped_column(String(16), default="complete")
    finish_reason: Mapped[str | None] = mapped_column(String(24), nullable=True)
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    run_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Tool results only: the tool reported a failure (Anthropic ``is_error``); not on the wire message.
    is_error: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Tool results only: how the call ended (``domain.models.ToolOutcome``); ``is_error`` unless ``ok``.
    outcome: Mapped[ToolOutcome | None] = mapped_column(String(16), nullable=True)
    # Answers that did not finish: why (``{code, message, retryable}``, as ``run-failed`` has it) and, for one the
    # user stopped, who stopped it (``{userId, userName, deviceName}``).
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    stopped_by: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The client's id for the write that stored this message (a send, or the queued message it came from).
    client_request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Answers only: what the user is told about the request the answer was made from (files the model was
    # given only as a placeholder, and why); ``None`` when there is nothing to tell.
    notices: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)


class Run(Base):
    """One run of the model for a session: steps until stop/length, error, abort, or suspension."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    # running | requires-action | finished | failed | aborted
    status: Mapped[str] = mapped_column(String(24))
    trigger: Mapped[str] = mapped_column(String(24))
    steps: Mapped[int] = mapped_column(Integer, default=0)
    usage_input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    usage_output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    finish_reason: Mapped[str | None] = mapped_column(String(24), nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # The model this run asks when not the session's (``run.regenerate`` with a provider or model).
    provider: Mapped[str | None] = mapped_column(String(32), nullable=True)
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # ``run.continue`` and the continuation after a restart: the answer this run goes on with (its first step
    # extends that message instead of starting a new one).
    continues_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    # How many times this run was continued after its process stopped mid-answer (at most once).
    resumes: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class ToolCallRow(Base):
    """A tool call the model made, stored before it runs; its result is a ``tool`` message."""

    __tablename__ = "tool_calls"
    __table_args__ = (PrimaryKeyConstraint("session_id", "id"),)

    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    id: Mapped[str] = mapped_column(String(200))
    run_id: Mapped[str] = mapped_column(String(36), index=True)
    message_id: Mapped[str] = mapped_column(String(36))
    position: Mapped[int] = mapped_column(Integer, default=0)  # order within its assistant message
    name: Mapped[str] = mapped_column(String(200))
    arguments: Mapped[str] = mapped_column(Text)
    executor: Mapped[str] = mapped_column(String(16))  # server | client
    requires_approval: Mapped[bool] = mapped_column(Boolean, default=False)
    approval: Mapped[str] = mapped_column(String(16), default="none")  # none | pending | approved | denied
    approval_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    has_result: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class QueuedMessage(Base):
    """One row per queued message. Positions are dense (0..n-1) and rewritten under the session row lock."""

    __tablename__ = "queued_messages"
    __table_args__ = (Index("ix_queued_messages_session_position", "session_id", "position"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    content: Mapped[str] = mapped_column(Text)
    attachments: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    enqueued_at: Mapped[int] = mapped_column(BigInteger)  # ms since epoch, as on the wire
    client_request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Event(Base):
    """The per-session event log (transactional outbox): ``seq`` is 1, 2, 3, ... per session, never reused."""

    __tablename__ = "events"

    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(String(48))
    # The event exactly as clients receive it (JSON text), so replay needs no re-serialisation.
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class FileBlob(Base):
    """Stored bytes, once per user and content (``sha256``); the storage backend keeps them under ``id``.

    ``state`` is ``writing`` while an upload streams in (``sha256`` still unknown), then ``complete``. While
    writing, the row is the upload's reservation: ``size`` is the bytes it holds against its owner's quota and
    ``expires_at`` when that hold lapses unless the upload renews it (a server that died mid-upload stops
    renewing). A blob whose upload never finished is removed by the file collector (``server.files``)."""

    __tablename__ = "file_blobs"
    __table_args__ = (UniqueConstraint("user_id", "sha256"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    size: Mapped[int] = mapped_column(BigInteger, default=0)
    media_type: Mapped[str] = mapped_column(String(100), default="application/octet-stream")
    state: Mapped[str] = mapped_column(String(16), default="writing")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class StoredFile(Base):
    """An uploaded file as its owner sees it: a name over a blob. Identical uploads share one blob."""

    __tablename__ = "files"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # No cascade: a blob is deleted only once no file names it (the collector checks, the key enforces).
    blob_id: Mapped[str] = mapped_column(ForeignKey("file_blobs.id"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Set at upload and whenever a message takes the file; unreferenced files older than the grace period
    # (measured from here) are collected.
    touched_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class FileRef(Base):
    """A session whose messages or queued messages carry the file."""

    __tablename__ = "file_refs"
    __table_args__ = (PrimaryKeyConstraint("file_id", "session_id"),)

    file_id: Mapped[str] = mapped_column(ForeignKey("files.id", ondelete="CASCADE"))
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)


class FileChunk(Base):
    """The database storage backend (``CHATSYNC_FILES_URL=database:``): a blob's bytes in numbered pieces."""

    __tablename__ = "file_chunks"
    __table_args__ = (PrimaryKeyConstraint("blob_id", "seq"),)

    blob_id: Mapped[str] = mapped_column(String(36))
    seq: Mapped[int] = mapped_column(Integer, autoincrement=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Draft(Base):
    """The composer's unsent text of one session, per user (``services.drafts``). ``version`` grows by one with
    every write, so a device writes only over the draft it last saw (compare and set); a cleared draft keeps its
    row, with empty text, so its version goes on growing."""

    __tablename__ = "drafts"
    __table_args__ = (PrimaryKeyConstraint("user_id", "session_id"),)

    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    text: Mapped[str] = mapped_column(Text, default="")
    # Uploaded files not sent yet, as messages show them: ``{fileId, name, mediaType, size}``.
    attachments: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    # The device that wrote it (None once that device is gone).
    device_id: Mapped[str | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PushSubscription(Base):
    """A device's Web Push subscription (``services.push``): where its push service takes messages for it, the
    keys its payloads are encrypted to (RFC 8291), and which kinds of notification it wants."""

    __tablename__ = "push_subscriptions"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    device_id: Mapped[str] = mapped_column(ForeignKey("api_tokens.id", ondelete="CASCADE"), index=True)
    endpoint: Mapped[str] = mapped_column(String(2048), unique=True)
    p256dh: Mapped[str] = mapped_column(String(200))
    auth: Mapped[str] = mapped_column(String(100))
    events: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PushKey(Base):
    """The server's VAPID key pair (RFC 8292), made on first start and shared by every replica: one row."""

    __tablename__ = "push_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    private_key: Mapped[str] = mapped_column(String(100))  # the P-256 scalar, base64url
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PushSent(Base):
    """Notifications already sent, one per kind per run at most: whichever replica inserts the row sends."""

    __tablename__ = "push_sent"
    __table_args__ = (PrimaryKeyConstraint("run_id", "kind"),)

    run_id: Mapped[str] = mapped_column(String(36))
    kind: Mapped[str] = mapped_column(String(24))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class ServerAddress(Base):
    """Where a running server listens (one row per process, gone when it stops), so a command on its machine
    (``chatsync link``) names the address it actually serves on, whatever port it was started with."""

    __tablename__ = "server_addresses"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str] = mapped_column(String(2000))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
