"""Procedure registry: names, kinds, pydantic-validated inputs, and one place that calls a handler.

Handlers are ``async def handler(ctx, input_model)``. Query and mutation handlers return a JSON-able value
(pydantic models are dumped camelCase). Subscription handlers return a :class:`Subscription`, whose
``run(send_item)`` pushes items synchronously into the transport (no queue hop per event: fan-out is the hot
path) and returns when the stream ends.

A mutation may also have a *batch handler* (``@router.batch(path)``): ``async def many(ctx, inputs)``
returning one result or exception per input, in order, with the same effect as calling the handler on
each input in turn. Transports use it for consecutive calls of that procedure that queued up behind each
other (:func:`call_many`), so a client that sends faster than the database commits gets one transaction
for the lot instead of one each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from .. import metrics, tracing
from ..domain.models import jsonable as to_jsonable
from ..protocol.errors import RpcError, to_rpc_error
from ..protocol.inputs import check_json
from ..sync.writer import SubscriptionWriter
from .context import Context

log = logging.getLogger(__name__)

Kind = Literal["query", "mutation", "subscription"]


Item = TypeVar("Item", covariant=True)


class Subscription(Protocol[Item]):
    """What a subscription handler returns: a stream the transport runs. ``Subscription[X]`` pushes items of type
    ``X`` (the procedure's output in the generated TypeScript)."""

    async def run(
        self, send_item: Callable[[str | None, Item], None], writer: SubscriptionWriter | None = None
    ) -> None:
        """Push ``(tracked id or None, item)`` into ``send_item`` until the stream ends. A WebSocket also passes
        the subscription's ``writer`` for durable events (whose tracked id is their own): fan-out's fast path."""


Handler = Callable[[Context, Any], Awaitable[Any]]
BatchHandler = Callable[[Context, list[Any]], Awaitable[list[Any]]]
"""Takes parsed inputs; returns, in the same order, each call's result or the exception it failed with."""


@dataclass(frozen=True)
class Procedure:
    """One registered procedure: its path, kind, input model, handler and optional batch handler."""

    path: str
    kind: Kind
    input_model: type[BaseModel] | None
    handler: Handler
    batch: BatchHandler | None = None

    def parse_input(self, raw: Any) -> Any:
        """Validate the input at the boundary; any failure is ``BAD_REQUEST`` naming the fields."""
        if self.input_model is None:
            return None
        check_json(raw)
        try:
            return self.input_model.model_validate({} if raw is None else raw)
        except ValidationError as exc:
            raise RpcError("BAD_REQUEST", _validation_message(exc)) from None


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "input"
        parts.append(f"{where}: {err['msg']}")
    return "Invalid input: " + "; ".join(parts)


class Router:
    """The procedures of the API by path; handlers register with ``@router.query``/``mutation``/``subscription``."""

    def __init__(self) -> None:
        self.procedures: dict[str, Procedure] = {}

    def _add(self, kind: Kind, path: str, input_model: type[BaseModel] | None) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            if path in self.procedures:
                raise ValueError(f"duplicate procedure {path}")
            self.procedures[path] = Procedure(path, kind, input_model, fn)
            return fn

        return register

    def query(self, path: str, input: type[BaseModel] | None = None) -> Callable[[Handler], Handler]:
        return self._add("query", path, input)

    def mutation(self, path: str, input: type[BaseModel] | None = None) -> Callable[[Handler], Handler]:
        return self._add("mutation", path, input)

    def subscription(self, path: str, input: type[BaseModel] | None = None) -> Callable[[Handler], Handler]:
        return self._add("subscription", path, input)

    def batch(self, path: str) -> Callable[[BatchHandler], BatchHandler]:
        """Give the (already registered) mutation ``path`` a batch handler: see the module docstring."""

        def register(fn: BatchHandler) -> BatchHandler:
            proc = self.procedures[path]
            if proc.kind != "mutation":
                raise ValueError(f"only mutations take batches, not {path}")
            self.procedures[path] = replace(proc, batch=fn)
            return fn

        return register

    def lookup(self, path: str, kind: Kind | None = None) -> Procedure:
        proc = self.procedures.get(path)
        if proc is None or (kind is not None and proc.kind != kind):
            label = f'"{kind}"-procedure' if kind else "procedure"
            raise RpcError("NOT_FOUND", f'No {label} on path "{path}"')
        return proc


def merge_last_event_id(raw_input: Any, last_event_id: str | None) -> Any:
    """tRPC's resume rule: an object input gains ``lastEventId``; a missing input becomes ``{lastEventId}``."""
    if last_event_id is None:
        return raw_input
    if raw_input is None:
        return {"lastEventId": last_event_id}
    if isinstance(raw_input, dict):
        return {**raw_input, "lastEventId": last_event_id}
    return raw_input


async def _admit(proc: Procedure, ctx: Context, n: int = 1) -> None:
    """The caller's rate limit, for mutations (``rpc.limits``)."""
    limiter = getattr(ctx.services, "limiter", None)
    if proc.kind == "mutation" and limiter is not None and ctx.user is not None:
        await limiter.admit(ctx.user.id, n)


def _outcome(exc: BaseException) -> str:
    """The ``outcome`` label of a failed call: its tRPC error code (``cancelled`` when it was)."""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return exc.code if isinstance(exc, RpcError) else to_rpc_error(exc).code


async def call(proc: Procedure, ctx: Context, raw_input: Any) -> Any:
    """Validate, run, and make the result JSON-able (queries and mutations). Timed (``metrics``), traced
    (``tracing``), and its log lines carry a request id."""
    started, outcome = time.perf_counter(), "ok"
    tokens = tracing.begin_request()
    try:
        with tracing.span("rpc " + proc.path, procedure=proc.path, transport=ctx.transport):
            await _admit(proc, ctx)
            parsed = proc.parse_input(raw_input)
            tracing.annotate(session_id=getattr(parsed, "session_id", None))
            return to_jsonable(await proc.handler(ctx, parsed))
    except BaseException as exc:
        outcome = _outcome(exc)
        raise
    finally:
        took = time.perf_counter() - started
        metrics.RPC_DURATION.labels(proc.path, outcome).observe(took)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s %s %s in %.1f ms", ctx.transport, proc.path, outcome, took * 1000)
        tracing.end_request(tokens)


async def call_many(proc: Procedure, ctx: Context, raw_inputs: Sequence[Any]) -> list[Any]:
    """Several calls of a mutation with a batch handler, in order: one JSON-able result or one exception per
    input. An input that fails validation fails alone."""
    assert proc.batch is not None, f"{proc.path} has no batch handler"
    try:
        await _admit(proc, ctx, len(raw_inputs))
    except RpcError as exc:
        return [exc] * len(raw_inputs)
    parsed: list[Any] = []
    for raw in raw_inputs:
        try:
            parsed.append(proc.parse_input(raw))
        except RpcError as exc:
            parsed.append(exc)
    started = time.perf_counter()
    out = await _call_batch(proc, ctx, parsed)
    elapsed, histogram = time.perf_counter() - started, metrics.RPC_DURATION
    for result in out:
        histogram.labels(proc.path, _outcome(result) if isinstance(result, BaseException) else "ok").observe(elapsed)
    return out


async def _call_batch(proc: Procedure, ctx: Context, parsed: list[Any]) -> list[Any]:
    assert proc.batch is not None
    valid = [p for p in parsed if not isinstance(p, RpcError)]
    tokens = tracing.begin_request()
    try:
        with tracing.span("rpc " + proc.path, procedure=proc.path, transport=ctx.transport, calls=len(parsed)):
            done = iter(await proc.batch(ctx, valid)) if valid else iter(())
    except Exception as exc:  # nothing in the batch happened
        return [p if isinstance(p, RpcError) else exc for p in parsed]
    finally:
        tracing.end_request(tokens)
    out: list[Any] = []
    for p in parsed:
        if isinstance(p, RpcError):
            out.append(p)
        else:
            result = next(done)
            out.append(result if isinstance(result, BaseException) else to_jsonable(result))
    return out
