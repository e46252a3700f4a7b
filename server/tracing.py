"""Traces with OpenTelemetry: an optional extra (``pip install 'chatsync[otel]'``), off unless configured.

:func:`configure_from_env` turns tracing on when the standard variables ask for an exporter
(``OTEL_TRACES_EXPORTER`` other than ``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) and ``OTEL_SDK_DISABLED`` is not ``true``; the SDK reads the rest
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, the exporter's endpoint and
headers). Off, every helper here is a constant no-op (one global read), so the hot paths pay nothing.

Spans: ``rpc <procedure>`` per query or mutation, ``run`` per run and ``step`` per model call of it,
``provider request`` per call to a model, ``tool call`` per server tool, ``db <kind>`` per transaction,
``deliver`` per fan-out of a committed batch. Attributes are ids (``chatsync.session_id``,
``chatsync.run_id``, the procedure, the provider and model, the tool's name) and counts — never message
contents, tool arguments or tokens. A committed batch carries its trace context (W3C ``traceparent``) over
the bus, so the replica that delivers it continues the trace of the replica that committed it.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TypeVar

log = logging.getLogger(__name__)

_tracer: Any = None  # an opentelemetry Tracer while tracing is on
_provider: Any = None  # the TracerProvider made by configure_from_env (shut down at exit)
_NULL: AbstractContextManager[Any] = nullcontext()

# Ids for structured logs (``server.logformat``), set where the work starts: an RPC call, a run.
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("chatsync_request_id", default=None)
session_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("chatsync_session_id", default=None)
run_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("chatsync_run_id", default=None)


def enabled() -> bool:
    return _tracer is not None


def wanted_by_env(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def configure_from_env() -> bool:
    """Start tracing when ``OTEL_*`` asks for it (see the module's docstring); True when it is on."""
    global _provider
    if _tracer is not None or not wanted_by_env():
        return _tracer is not None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        log.warning("OTEL_* asks for traces but OpenTelemetry is not installed: pip install 'chatsync[otel]'")
        return False
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "chatsync"}
    provider = TracerProvider(resource=Resource.create(attributes))
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").lower().split(",") if n.strip()]
    for name in names:
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError:
                log.warning("OTLP export needs opentelemetry-exporter-otlp-proto-http: pip install 'chatsync[otel]'")
                continue
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            log.warning("OTEL_TRACES_EXPORTER=%s is not supported here (otlp, console)", name)
    _provider = provider
    configure(provider)
    log.info("tracing on (%s)", ", ".join(names))
    return True


def configure(provider: Any | None) -> None:
    """Trace with ``provider`` (an SDK ``TracerProvider``), or stop tracing with None. Tests pass one whose
    exporter keeps spans in memory."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer("chatsync")


def shutdown() -> None:
    """Flush and stop what :func:`configure_from_env` started."""
    global _provider
    if _provider is not None:
        _provider.shutdown()
        _provider = None
        configure(None)


def _ids(attributes: dict[str, Any]) -> dict[str, Any]:
    return {f"chatsync.{k}": v for k, v in attributes.items() if v is not None}


def span(name: str, parent: Any = None, **attributes: Any) -> AbstractContextManager[Any]:
    """A span around a block (made current, so spans inside nest under it); ``attributes`` become
    ``chatsync.<name>``. Off: a shared no-op context manager."""
    tracer = _tracer
    if tracer is None:
        return _NULL
    return tracer.start_as_current_span(name, context=parent, attributes=_ids(attributes))  # type: ignore[no-any-return]


def begin_request() -> tuple[contextvars.Token[str | None], contextvars.Token[str | None]]:
    """A new request id for the logs of one call (and no session until :func:`annotate` names one)."""
    return request_id.set(secrets.token_hex(8)), session_id.set(None)


def end_request(tokens: tuple[contextvars.Token[str | None], contextvars.Token[str | None]]) -> None:
    request_id.reset(tokens[0])
    session_id.reset(tokens[1])


def annotate(**attributes: Any) -> None:
    """Add ids to the current span (those that are None are left out); ``session_id`` also goes to the logs."""
    sid = attributes.get("session_id")
    if sid is not None:
        session_id.set(sid)
    if _tracer is not None:
        from opentelemetry import trace

        trace.get_current_span().set_attributes(_ids(attributes))


def start(name: str, **attributes: Any) -> Any:
    """A span that is not made current (for async generators, which may end in another context); end it with
    :func:`end`. None while tracing is off."""
    tracer = _tracer
    if tracer is None:
        return None
    return tracer.start_span(name, attributes=_ids(attributes))


def end(span: Any, **attributes: Any) -> None:
    if span is not None:
        span.set_attributes(_ids(attributes))
        span.end()


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def traced(name: str, attributes: Callable[..., dict[str, Any]] | None = None) -> Callable[[F], F]:
    """A decorator for methods of objects with ``session_id`` and ``run_id``: a span per call, with those ids
    and what ``attributes(self, *args)`` adds."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        async def inner(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _tracer is None:
                return await fn(self, *args, **kwargs)
            extra = attributes(self, *args) if attributes is not None else {}
            with span(name, session_id=self.session_id, run_id=self.run_id, **extra):
                return await fn(self, *args, **kwargs)

        return inner  # type: ignore[return-value]

    return wrap


class RunTrace:
    """The ``run`` span of a run loop, and the log ids of its task: :meth:`at` is called as the loop goes on;
    when the run changes (the queue's next message, or the end) the span of the last one ends and the next
    one starts, made current in the loop's task so its steps, tool calls and transactions nest under it. The
    first run continues the trace of the call that started it; runs the queue sends after it start their own."""

    __slots__ = ("_parent", "_run", "_span", "_token", "session_id")

    def __init__(self, session: str) -> None:
        self.session_id = session
        self._run: str | None = None
        self._span: Any = None
        self._token: Any = None
        self._parent: Any = None
        if _tracer is not None:
            from opentelemetry import context

            self._parent = context.get_current()  # the call that started the run, when one did

    def at(self, run: str | None) -> None:
        if run == self._run:
            return
        self.close()
        self._run = run
        session_id.set(self.session_id)
        run_id.set(run)
        if run is None:
            return
        if _tracer is not None:
            from opentelemetry import context, trace

            attributes = _ids({"session_id": self.session_id, "run_id": run})
            self._span = _tracer.start_span("run", context=self._parent, attributes=attributes)
            self._token = context.attach(trace.set_span_in_context(self._span))
            # A run the queue sends after this one is no part of the call that started this one: its own trace.
            self._parent = context.Context()
        log.debug("run started")  # with the session, run and trace ids (server.logformat)

    def close(self) -> None:
        if self._span is not None:
            from opentelemetry import context

            context.detach(self._token)
            self._span.end()
            self._span = self._token = None
        self._run = None


# --- carried over the bus ---------------------------------------------------------------------------------


def stamp(env: Any) -> None:
    """Mark the first event of a committed batch with the time (for ``chatsync_delivery_latency_seconds``)
    and, while tracing, the current trace context, which the bus carries to every replica."""
    env.published_at = time.time()
    if _tracer is not None:
        env.trace_parent = traceparent()


def traceparent() -> str | None:
    """The current span's W3C ``traceparent``, or None."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _remote_parent(value: str) -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": value})


@contextmanager
def _delivery(parent: str, session: str, count: int) -> Iterator[None]:
    with span("deliver", _remote_parent(parent), session_id=session, events=count):
        yield


def delivery(env: Any, session: str, count: int) -> AbstractContextManager[Any]:
    """The ``deliver`` span of one fan-out, continuing the trace the batch was committed in."""
    parent = env.trace_parent
    if _tracer is None or parent is None:
        return _NULL
    return _delivery(parent, session, count)


def current_ids() -> tuple[str, str] | None:
    """``(trace id, span id)`` of the current span, in hex (for logs), or None."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    return (f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}") if ctx.is_valid else None
