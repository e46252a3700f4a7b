"""Process-wide configuration, read once at start from ``CHATSYNC_*`` variables.

A bad value stops start-up with a message that names the variable (see :func:`load_settings`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

ENV_PREFIX = "CHATSYNC_"


class SettingsError(Exception):
    """Raised when the environment holds a value chatsync cannot run with."""


class Settings(BaseSettings):
    """Every knob of a chatsync process. Defaults run one process on SQLite with an in-memory bus."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    database_url: str = "sqlite+aiosqlite:///./chatsync.db"
    bus_url: str = "memory://"
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    # Origins allowed to open a WebSocket. Requests without an Origin header (non-browser clients) are
    # always allowed; "*" allows every origin. Same-host origins on the configured port are implied.
    allowed_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Limits on what a client may send.
    max_frame_bytes: int = Field(default=1_048_576, ge=1024)
    max_content_chars: int = Field(default=100_000, ge=1)
    max_queue_length: int = Field(default=100, ge=1)
    max_batch_size: int = Field(default=50, ge=1)
    # Durable events kept per session for resumption; older ones get `resync-required`.
    event_retention: int = Field(default=10_000, ge=10)
    # What a connection may have buffered and unsent before it counts as a slow consumer and is closed:
    # bytes in the socket's write buffer (uvicorn's sans-I/O WebSocket), or frames (any other server).
    send_buffer_bytes: int = Field(default=8 * 1024 * 1024, ge=16 * 1024)
    send_queue_frames: int = Field(default=4096, ge=16)
    # The run loop (server/engine). Seconds per word of the offline echo model (0 = as fast as possible).
    echo_delay: float = Field(default=0.03, ge=0, le=10)
    max_steps_per_run: int = Field(default=25, ge=1, le=1000)
    # A run's lease in the database: renewed while the run is alive; another replica may take over a
    # session whose lease expired (crash recovery), so keep it well above stream_flush_seconds.
    run_lease_seconds: float = Field(default=15.0, gt=0.2)
    # Partial text of a streaming message is written to its row this often (a crash loses at most this much of it).
    stream_flush_seconds: float = Field(default=1.0, gt=0)
    # An answer cut off by a shutdown or a crash of the process streaming it goes on, once, from its stored text
    # (taken over by the restarted process or another replica), unless a person stopped it. Off: such a run
    # fails with ``interrupted`` and the queue pauses.
    resume_interrupted_answers: bool = True
    # How often a running run looks for an abort requested on another replica.
    abort_poll_seconds: float = Field(default=0.25, gt=0)
    # How often the sweeper looks for sessions with pending work and no live run (crash recovery, queue).
    sweep_seconds: float = Field(default=2.0, gt=0)
    # A model call whose provider sends nothing for this long (no first event, or none since the last) ends with a
    # retryable ``timeout`` error and the run fails as on any provider error; a stream that keeps sending is never
    # cut. Checked once a run-loop tick, so it fires up to a tick late. 600 s: the wait between reads the OpenAI and
    # Anthropic SDKs allow themselves, so a model that reasons silently before its first word is cut no sooner.
    provider_idle_timeout_seconds: float = Field(default=600.0, gt=0)
    # A server tool that runs longer than this gets an error result.
    tool_timeout_seconds: float = Field(default=60.0, gt=0)
    # How sessions get their automatic title (docs/api.md "Titles"): ``truncate`` the first user message, or
    # ``model``: that first, then a 3-5 word title from the session's model after the first answer.
    title_mode: Literal["truncate", "model"] = "truncate"
    # Provider and model of a session created without them (services/sessions.py ``resolve_model``).
    default_provider: Literal["echo", "openai", "anthropic", "google", "ollama"] | None = None
    default_model: str | None = None
    allow_method_override: bool = False
    run_migrations_on_start: bool = True
    log_level: str = "info"
    # Loggers written at debug whatever ``log_level`` is, comma-separated (docs/operations.md "Logs"): e.g.
    # ``server.sync.delivery``, a line for each subscriber's catch-up and each stream-snapshot sent.
    log_debug: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # ``json``: one JSON object per line with the request, session, run and trace ids (server/logformat.py).
    log_format: Literal["text", "json"] = "text"
    # /metrics is open (counts and timings only, no user content) unless this is set; then it takes this
    # bearer token, so a scraper need not hold an admin's.
    metrics_token: str | None = None
    # The address other devices reach this server at, for device sign-in links (``<public URL>/link#code``).
    # Unset: the address the asking client used (``auth.createLink``), else http://HOST:PORT.
    public_url: str | None = None
    # Bounds per connection and per user (docs/api.md "Limits").
    max_subscriptions_per_connection: int = Field(default=100, ge=1)
    # WebSockets plus SSE streams one process holds open (what an idle one costs: docs/performance.md).
    max_connections: int = Field(default=10_000, ge=1)
    auth_timeout_seconds: float = Field(default=10.0, gt=0)
    # Plain HTTP connections (every one until it becomes a WebSocket; SSE streams too). A request's line and
    # headers must arrive within the header timeout; a body that stops arriving (or an answer the client
    # stops reading) for the body timeout ends its connection; after an answer given before a request's body
    # ended, at most the drain bytes more of it are read (server/rpc/uvicorn_http.py).
    max_http_connections: int = Field(default=10_000, ge=1)
    http_header_timeout_seconds: float = Field(default=10.0, gt=0)
    http_body_timeout_seconds: float = Field(default=30.0, gt=0)
    http_drain_bytes: int = Field(default=1024 * 1024, ge=0)
    max_sessions_per_user: int = Field(default=10_000, ge=1)
    # Sessions one ``session.list`` with a ``search`` examines (titles and message texts) before it answers.
    search_scan_sessions: int = Field(default=200, ge=1, le=10_000)
    # Bytes of converted conversations a process keeps between the steps of their runs (``engine.history``: a
    # row counts its text and 2 KiB besides); 0 keeps none, and every step converts its whole conversation.
    conversation_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    # The largest body ``POST /sessions/import`` takes (a JSON export).
    max_import_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)
    # Runs in progress (streaming, or waiting for tool outputs or approvals) one user may have at once, over
    # every replica.
    max_active_runs_per_user: int = Field(default=20, ge=1)
    # Mutations per user, over every replica when the bus is Redis (server/rpc/limits.py); 0: no limit.
    rate_limit_per_second: float = Field(default=200.0, ge=0)
    rate_limit_burst: int = Field(default=1000, ge=1)
    # Device sign-in link look-ups and exchanges (``POST /auth/link/info``, ``/auth/link``) per client address
    # and process, a minute's worth at once at most; 0: no limit.
    link_attempts_per_minute: int = Field(default=30, ge=0)
    # PostgreSQL: how long a request waits for a pooled connection before failing with SERVICE_UNAVAILABLE.
    db_pool_timeout_seconds: float = Field(default=5.0, gt=0)
    # Uploaded files (docs/api.md "Files"). Where their bytes live: a directory (``file:///path`` or a plain
    # path; unset: ``files/`` next to the SQLite file, or ``./chatsync-files`` with PostgreSQL), or
    # ``database:`` (chunks in the database, shared by every replica).
    files_url: str | None = None
    max_file_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    # The files one message (or queued message) carries, together.
    max_message_file_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    max_user_file_bytes: int = Field(default=1024 * 1024 * 1024, ge=1)  # what one user may keep stored
    max_files_per_user: int = Field(default=10_000, ge=1)
    # A file no message or queued message carries is deleted once it has been left alone this long.
    file_grace_seconds: float = Field(default=24 * 3600.0, ge=0)
    # How often unreferenced files are looked for.
    file_sweep_seconds: float = Field(default=300.0, gt=0)
    # Uploads one user may have under way at once, over every replica.
    max_uploads_in_flight_per_user: int = Field(default=4, ge=1)
    # An upload under way holds its bytes against its owner's quota; the hold is renewed as the bytes arrive
    # and lapses this long after the last renewal (so what a server that died mid-upload held is freed).
    upload_lease_seconds: float = Field(default=60.0, gt=0)
    # Which models take images, beyond the built-in rule: ``provider:glob=on|off`` items, comma-separated, first
    # match wins (docs/attachments.md).
    vision_models: str = ""
    # Devices that know about each other (docs/devices.md). A presence entry lives this long after its client's
    # last update (clients refresh it every third of it), so a device that vanished drops out within it plus
    # one refresh of the watchers (at most 5 s).
    presence_ttl_seconds: float = Field(default=20.0, ge=0.5, le=25)
    # Web Push: the VAPID private key (PEM, or the base64url P-256 scalar); unset: made on first start and kept
    # in the database. The subject is the contact the push services see (mailto: or https:).
    push_vapid_private_key: str | None = None
    push_vapid_subject: str = "mailto:chatsync@localhost"
    # Push endpoints must be https URLs on public addresses; this lifts both (for a local push service in tests).
    push_allow_insecure_endpoints: bool = False
    # Notifications waiting to be sent; past it a notification is dropped (and logged), never the run delayed.
    push_queue_size: int = Field(default=1000, ge=1)
    # How long the Approve/Deny actions of an approval notification stay valid (and its TTL at the push service).
    push_action_seconds: float = Field(default=3600.0, ge=10, le=7 * 24 * 3600)
    # MCP servers (docs/tools.md): the JSON file that configures them (unset: none), how long one tool call may
    # take unless the server's own ``timeoutSeconds`` says otherwise, and how many calls run at once per server.
    mcp_servers: str | None = None
    mcp_call_timeout_seconds: float = Field(default=60.0, gt=0)
    mcp_max_concurrent_calls: int = Field(default=4, ge=1, le=256)
    # An MCP session no run has used for this long is closed (a stdio server's process ends with it).
    mcp_idle_seconds: float = Field(default=600.0, gt=0)
    # A deleted session's rows (messages, events, queue, runs, tool calls, file references) are kept this long, so
    # a subscriber still catching up reads the session's end, then purged; every replica looks for them this often.
    deleted_session_retention_seconds: float = Field(default=60.0, ge=0)
    purge_sweep_seconds: float = Field(default=60.0, gt=0)
    # Exactly-once records (``clientRequestId``) kept per user besides the 25 hours; the oldest go first.
    max_request_records_per_user: int = Field(default=10_000, ge=1)

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip().rstrip("/") for part in value.split(",") if part.strip()]
        return value

    @field_validator("log_debug", mode="before")
    @classmethod
    def _split_loggers(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value

    @field_validator("bus_url")
    @classmethod
    def _known_bus(cls, value: str) -> str:
        if not value.startswith(("memory://", "redis://", "rediss://", "redis+cluster://")):
            raise ValueError("must start with memory://, redis://, rediss:// or redis+cluster://")
        return value

    @field_validator("files_url")
    @classmethod
    def _known_files(cls, value: str | None) -> str | None:
        if value is not None and "://" in value and not value.startswith("file://"):
            raise ValueError("must be database:, file:///path or a directory path")
        if value is not None and not value.strip():
            return None
        return value

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def listens_on_loopback(self) -> bool:
        return is_loopback(self.host)

    def link_base(self, seen_as: str | None = None) -> str:
        """Where device sign-in links point: ``public_url``, else how the client reached us, else host:port."""
        if self.public_url:
            return self.public_url.rstrip("/")
        if seen_as:
            return seen_as.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}"

    @field_validator("push_vapid_subject")
    @classmethod
    def _vapid_subject(cls, value: str) -> str:
        if not value.startswith(("mailto:", "https://")):
            raise ValueError("must start with mailto: or https://")
        return value

    @field_validator("public_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches this machine only."""
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def load_settings(**overrides: Any) -> Settings:
    """Build :class:`Settings` from the environment, turning validation errors into one readable message."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "?"
            problems.append(f"{ENV_PREFIX}{field.upper()}: {err['msg']}")
        raise SettingsError("invalid configuration: " + "; ".join(problems)) from exc
