"""Notifications routed by presence: Web Push to the user's devices when a session needs them and none of them
has it in view.

**When.** A committed transaction whose events include ``tool-approval-requested`` (``approval-needed``),
``run-finished`` (``answer-finished``) or ``run-failed`` (``run-failed``) is handed to :meth:`PushService.observe`
after it was published (``uow.UnitOfWork.observers``). If a device of the owner had the session visible when
the event committed (the same check that keeps it from showing as unread, ``services.unread``), nothing is
sent. Otherwise each subscribed device that wants that kind gets one message, and each kind at most once per
run over every replica: the first process to record ``(run, kind)`` in ``push_sent`` sends it. Messages of
one kind for one session share a ``Topic``, so a push service keeps only the newest one for a device it has not
reached yet.

**Never on the run's path.** ``observe`` only puts a job on a bounded queue (``CHATSYNC_PUSH_QUEUE_SIZE``; a
full queue drops the job and logs it). One task takes jobs off and starts a delivery per subscription, at most
:data:`MAX_CONCURRENT_SENDS` at once. A push service answering 404 or 410 has forgotten the subscription: it is
deleted. 429 and 5xx (or no answer) are tried again, :data:`MAX_ATTEMPTS` times in all, after ``Retry-After``
(at most :data:`MAX_RETRY_AFTER_SECONDS`) or a doubling backoff. Nothing here can fail or slow down a run.

**Approve from the notification.** An ``approval-needed`` message carries ``actions`` (Approve, Deny) and a
``capability``: a token signed by the server (HMAC-SHA256 with a key derived from the VAPID private key) naming
the session, the call, the user and the device it was sent to, valid for ``CHATSYNC_PUSH_ACTION_SECONDS``. The
service worker posts it to ``push.decide`` without a bearer token; the decision is the device's (its name is
in ``tool-approval-resolved``), the first decision wins as in the app, and a revoked device's token decides
nothing.

**Keys.** The VAPID key pair is ``CHATSYNC_PUSH_VAPID_PRIVATE_KEY`` when set, else made on first start and kept in
``push_keys`` (one row, so every replica signs with the same key).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import orjson
from sqlalchemy import Select, delete, select
from sqlalchemy.exc import IntegrityError

from ..domain import outputs
from ..protocol.errors import RpcError
from ..settings import Settings
from ..store.db import Database, listed
from ..store.models import (
    ApiToken,
    ChatSession,
    Message,
    PushKey,
    PushSent,
    PushSubscription,
    ToolCallRow,
    User,
    utcnow,
)
from . import webpush
from .webpush import Delivery, EndpointRefused, Sender, b64url, b64url_decode

if TYPE_CHECKING:
    from .uow import SessionTx

log = logging.getLogger(__name__)

KINDS: dict[str, str] = {
    "tool-approval-requested": "approval-needed",
    "run-finished": "answer-finished",
    "run-failed": "run-failed",
}
EVENTS = ("approval-needed", "answer-finished", "run-failed")
MAX_SUBSCRIPTIONS_PER_USER = 20
MAX_CONCURRENT_SENDS = 16
MAX_ATTEMPTS = 4
FIRST_BACKOFF_SECONDS = 1.0
MAX_RETRY_AFTER_SECONDS = 60.0
ANSWER_TTL_SECONDS = 24 * 3600
BODY_CHARS = 240
SENT_KEEP = timedelta(days=2)  # ``push_sent`` rows older than this go (runs do not last that long)
SENT_TRIM_EVERY = 100  # records between two trims of ``push_sent``, per process

Approve = Callable[[User, str, str, bool, str | None], Awaitable[outputs.Resolved]]
"""``(user, session id, call id, approved, device name)``: decide an approval as ``tool.approve`` does."""


class Subscription(NamedTuple):
    """What sending to one subscribed device takes (a row of ``push_subscriptions``)."""

    id: str
    user_id: str
    device_id: str
    endpoint: str
    p256dh: str
    auth: str
    events: list[str] | None


def _subscriptions(*, sqlite: bool) -> Select[Any]:
    """The live subscriptions of some users' devices (a revoked device's subscription is kept but not sent to),
    the users listed in one parameter (``db.listed``): one constant statement, prepared once."""
    subs = PushSubscription.__table__
    return (
        select(*(subs.c[name] for name in Subscription._fields))
        .join(ApiToken.__table__, ApiToken.id == subs.c.device_id)
        .where(listed(subs.c.user_id, "users", sqlite=sqlite), ApiToken.revoked_at.is_(None))
    )


_SUBSCRIPTIONS = {True: _subscriptions(sqlite=True), False: _subscriptions(sqlite=False)}
DISPATCH_BATCH = 200  # jobs taken off the queue together, whose users' subscriptions are read at once
# After a job arrives alone, how long more jobs are gathered for the same read of subscriptions. Answers end one
# at a time; without it every finished answer of a busy server costs a read of its own. A notification goes to a
# push service that delivers it in seconds, so a tenth of a second more is not felt.
GATHER_SECONDS = 0.1


@dataclass(frozen=True)
class Job:
    """One notification to send: who, which session and run, and why (``kind``)."""

    user_id: str
    session_id: str
    run_id: str
    kind: str
    call_id: str | None = None
    error: str | None = None


def topic(session_id: str, kind: str) -> str:
    """RFC 8030 ``Topic``: at most 32 characters of the URL-safe base64 alphabet, one per session and kind."""
    return b64url(hashlib.sha256(f"{session_id}:{kind}".encode()).digest()[:24])


def _clip(text: str, limit: int = BODY_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class PushService:
    """Web Push: subscriptions of the user's devices, and the queue of notifications sent when a session needs
    its owner and no device has it in view (module docstring)."""

    def __init__(self, db: Database, settings: Settings, approve: Approve) -> None:
        self.db = db
        self.settings = settings
        self.approve = approve
        self.allow_insecure = settings.push_allow_insecure_endpoints
        self.queue: asyncio.Queue[Job] = asyncio.Queue(maxsize=settings.push_queue_size)
        self.public_key = ""
        self._capability_key = b""
        self._sender: Sender | None = None
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_SENDS)
        self.dropped = 0  # jobs a full queue refused
        self._recorded = 0
        self.handled = 0  # jobs taken off the queue and decided (sent, or nobody to send to)
        self.backoff = FIRST_BACKOFF_SECONDS

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        key = webpush.load_private_key(self.settings.push_vapid_private_key or await self._stored_key())
        self.public_key = webpush.public_key_of(key)
        scalar = key.private_numbers().private_value.to_bytes(32, "big")
        self._capability_key = hashlib.sha256(b"chatsync approval capability\0" + scalar).digest()
        self._sender = Sender(key, self.settings.push_vapid_subject, self.allow_insecure)
        self._task = asyncio.create_task(self._work(), name="push")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._sends) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._sender is not None:
            await self._sender.close()

    async def _stored_key(self) -> str:
        """The key pair kept in the database, made now if there is none (two replicas racing agree on one)."""
        async with self.db.read() as s:
            row = await s.get(PushKey, 1)
        if row is not None:
            return row.private_key
        try:
            async with self.db.write() as s:
                s.add(PushKey(id=1, private_key=webpush.new_private_key(), created_at=utcnow()))
        except IntegrityError:
            pass  # another replica made it first
        async with self.db.read() as s:
            row = await s.get(PushKey, 1)
        assert row is not None
        return row.private_key

    # --- subscriptions ------------------------------------------------------------------------------------

    async def subscribe(
        self, user: User, device_id: str | None, endpoint: str, p256dh: str, auth: str, events: list[str] | None
    ) -> outputs.PushSubscribed:
        """Store (or update) the device's subscription. An endpoint another device held moves to this one."""
        if device_id is None:
            raise RpcError("BAD_REQUEST", "Push needs a device token")
        try:
            await webpush.check_endpoint(endpoint, self.allow_insecure)
        except EndpointRefused as exc:
            raise RpcError("BAD_REQUEST", f"Invalid push endpoint: {exc}") from None
        _check_keys(p256dh, auth)
        wanted = list(dict.fromkeys(events)) if events is not None else list(EVENTS)
        async with self.db.write() as s:
            existing = (
                await s.execute(select(PushSubscription).where(PushSubscription.endpoint == endpoint))
            ).scalar_one_or_none()
            if existing is not None and existing.user_id != user.id:
                await s.delete(existing)
                await s.flush()
                existing = None
            if existing is None:
                count = len(
                    (await s.execute(select(PushSubscription.id).where(PushSubscription.user_id == user.id))).all()
                )
                if count >= MAX_SUBSCRIPTIONS_PER_USER:
                    raise RpcError(
                        "PRECONDITION_FAILED", f"At most {MAX_SUBSCRIPTIONS_PER_USER} push subscriptions per user"
                    )
                existing = PushSubscription(
                    id=str(uuid.uuid4()), user_id=user.id, endpoint=endpoint, created_at=utcnow()
                )
                s.add(existing)
            existing.device_id = device_id
            existing.p256dh = p256dh
            existing.auth = auth
            existing.events = wanted
            await s.flush()
            return {"endpoint": endpoint, "deviceId": device_id, "events": cast("list[outputs.PushEvent]", wanted)}

    async def unsubscribe(self, user: User, endpoint: str) -> None:
        async with self.db.write() as s:
            mine = PushSubscription.user_id == user.id
            await s.execute(delete(PushSubscription).where(mine, PushSubscription.endpoint == endpoint))

    async def subscriptions(self, user: User, current_device: str | None) -> list[outputs.PushSubscriptionInfo]:
        async with self.db.read() as s:
            rows = (
                await s.execute(
                    select(PushSubscription, ApiToken.name)
                    .join(ApiToken, ApiToken.id == PushSubscription.device_id)
                    .where(PushSubscription.user_id == user.id, ApiToken.revoked_at.is_(None))
                    .order_by(PushSubscription.created_at)
                )
            ).all()
        return [
            {
                "endpoint": sub.endpoint,
                "deviceId": sub.device_id,
                "deviceName": name,
                "events": cast("list[outputs.PushEvent]", list(sub.events or [])),
                "current": sub.device_id == current_device,
            }
            for sub, name in rows
        ]

    # --- from committed events to jobs (on the committing path: no waiting here) ---------------------------

    def observe(self, tx: SessionTx) -> None:
        if tx.seen_in_view:
            return  # a device had the session in view when it happened
        for env in tx.events:
            kind = KINDS.get(env.type)
            if kind is None:
                continue
            body = orjson.loads(env.json)
            run_id = body.get("runId") or tx.row.run_id
            if not run_id:
                continue
            error = (body.get("error") or {}).get("message") if kind == "run-failed" else None
            job = Job(tx.row.owner_id, tx.row.id, str(run_id), kind, body.get("callId"), error)
            try:
                self.queue.put_nowait(job)
            except asyncio.QueueFull:
                self.dropped += 1
                log.warning("push queue full; %s of session %s not notified", kind, tx.row.id)

    async def _work(self) -> None:
        while True:
            jobs = [await self.queue.get()]
            if self.queue.empty():
                await asyncio.sleep(GATHER_SECONDS)
            while len(jobs) < DISPATCH_BATCH and not self.queue.empty():
                jobs.append(self.queue.get_nowait())
            try:
                subscribed = await self._subscriptions({job.user_id for job in jobs})
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("reading push subscriptions failed; %d notifications not sent", len(jobs), exc_info=True)
                self.handled += len(jobs)
                continue
            for job in jobs:
                wanted = [sub for sub in subscribed.get(job.user_id, ()) if job.kind in (sub.events or [])]
                try:
                    await self._dispatch(job, wanted)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.warning("preparing a %s notification failed", job.kind, exc_info=True)
                self.handled += 1

    async def _subscriptions(self, users: set[str]) -> dict[str, list[Subscription]]:
        """The live subscriptions of ``users``' devices, by user: one read for every job taken off the queue
        together. Most users subscribe no device, and for them a finished answer costs a share of that read
        (one prepared statement on SQLite), not a write to ``push_sent`` that would take its turn with the runs'
        writers."""
        out: dict[str, list[Subscription]] = {}
        db = self.db
        for row in await db.read_rows(_SUBSCRIPTIONS[db.is_sqlite], {"users": db.listed_value(sorted(users))}):
            sub = Subscription(*row)
            out.setdefault(sub.user_id, []).append(sub)
        return out

    async def _dispatch(self, job: Job, subs: list[Subscription]) -> None:
        if subs and await self._first(job):
            async with self.db.read() as s:
                payload = await self._payload(s, job)
            for sub in subs:
                body = dict(payload)
                if job.kind == "approval-needed" and job.call_id is not None:
                    body["capability"] = self.capability(job.session_id, job.call_id, job.user_id, sub.device_id)
                await self._slots.acquire()
                task = asyncio.create_task(self._deliver(sub.id, sub.endpoint, sub.p256dh, sub.auth, job, body))
                self._sends.add(task)
                task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sends.discard(task)
        self._slots.release()

    async def _first(self, job: Job) -> bool:
        """Record ``(run, kind)``; False when some process recorded it already (it sent that one)."""
        now = utcnow()
        try:
            async with self.db.write() as s:
                s.add(PushSent(run_id=job.run_id, kind=job.kind, created_at=now))
                await s.flush()
                self._recorded += 1
                if self._recorded % SENT_TRIM_EVERY == 0:  # now and then: forget what no run can still need
                    await s.execute(delete(PushSent).where(PushSent.created_at < now - SENT_KEEP))
        except IntegrityError:
            return False
        return True

    async def _payload(self, s: Any, job: Job) -> dict[str, Any]:
        session = await s.get(ChatSession, job.session_id)
        title = (session.title if session is not None else "") or "chatsync"
        payload: dict[str, Any] = {
            "type": job.kind,
            "sessionId": job.session_id,
            "runId": job.run_id,
            "title": title,
            "tag": f"{job.session_id}:{job.kind}",
        }
        if job.kind == "approval-needed":
            call = await s.get(ToolCallRow, (job.session_id, job.call_id)) if job.call_id else None
            name = call.name if call is not None else "a tool"
            payload["body"] = _clip(f"Approve {name}? {call.arguments if call is not None else ''}")
            payload["callId"] = job.call_id
            payload["toolName"] = name
            payload["actions"] = [{"action": "approve", "title": "Approve"}, {"action": "deny", "title": "Deny"}]
        elif job.kind == "answer-finished":
            answer = (
                await s.execute(
                    select(Message.content)
                    .where(Message.session_id == job.session_id, Message.run_id == job.run_id)
                    .where(Message.role == "assistant")
                    .order_by(Message.ordinal.desc())
                    .limit(1)
                )
            ).scalar_one_or_none()
            payload["body"] = _clip(answer or "The answer is ready.")
        else:
            payload["body"] = _clip(job.error or "The run failed.")
        return payload

    async def _deliver(
        self, sub_id: str, endpoint: str, p256dh: str, auth: str, job: Job, payload: dict[str, Any]
    ) -> None:
        assert self._sender is not None
        data = orjson.dumps(payload)
        ttl = int(self.settings.push_action_seconds) if job.kind == "approval-needed" else ANSWER_TTL_SECONDS
        urgency = "high" if job.kind == "approval-needed" else "normal"
        delay = self.backoff
        try:
            for attempt in range(1, MAX_ATTEMPTS + 1):
                result = await self._sender.send(
                    endpoint, p256dh, auth, data, ttl=ttl, topic=topic(job.session_id, job.kind), urgency=urgency
                )
                if result.status is not None and 200 <= result.status < 300:
                    return
                if result.status in (404, 410):
                    await self._drop(sub_id)
                    return
                if not _retryable(result) or attempt == MAX_ATTEMPTS:
                    log.warning("push to a device failed (%s); not retried", result.status or result.error)
                    return
                await asyncio.sleep(_wait(result, delay))
                delay *= 2
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("push delivery failed", exc_info=True)

    async def _drop(self, sub_id: str) -> None:
        async with self.db.write() as s:
            await s.execute(delete(PushSubscription).where(PushSubscription.id == sub_id))
        log.info("push service forgot a subscription; dropped it")

    # --- approving from a notification --------------------------------------------------------------------

    def capability(self, session_id: str, call_id: str, user_id: str, device_id: str) -> str:
        exp = int(time.time() + self.settings.push_action_seconds)
        body = b64url(orjson.dumps({"s": session_id, "c": call_id, "u": user_id, "d": device_id, "e": exp}))
        return body + "." + b64url(hmac.new(self._capability_key, body.encode(), hashlib.sha256).digest())

    async def decide(self, capability: str, approved: bool) -> outputs.Resolved:
        """Decide the approval a notification's capability names, as the device it was sent to."""
        body, _, signature = capability.partition(".")
        expected = b64url(hmac.new(self._capability_key, body.encode(), hashlib.sha256).digest())
        if not signature or not hmac.compare_digest(signature, expected):
            raise RpcError("UNAUTHORIZED", "Invalid approval capability")
        claims = orjson.loads(b64url_decode(body))
        if int(claims["e"]) < time.time():
            raise RpcError("UNAUTHORIZED", "This approval capability has expired; open the app to decide")
        async with self.db.read() as s:
            found = (
                await s.execute(
                    select(User, ApiToken.name)
                    .join(ApiToken, ApiToken.user_id == User.id)
                    .where(User.id == claims["u"], ApiToken.id == claims["d"], ApiToken.revoked_at.is_(None))
                )
            ).first()
        if found is None:
            raise RpcError("UNAUTHORIZED", "The device this notification was sent to is no longer signed in")
        user, device_name = found
        return await self.approve(user, str(claims["s"]), str(claims["c"]), approved, device_name)


def _check_keys(p256dh: str, auth: str) -> None:
    try:
        point, secret = b64url_decode(p256dh), b64url_decode(auth)
    except ValueError:
        raise RpcError("BAD_REQUEST", "Invalid input: keys must be base64url") from None
    if len(point) != 65 or point[0] != 4:
        raise RpcError("BAD_REQUEST", "Invalid input: keys.p256dh must be an uncompressed P-256 point")
    if len(secret) != 16:
        raise RpcError("BAD_REQUEST", "Invalid input: keys.auth must be 16 bytes")
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except ValueError:
        raise RpcError("BAD_REQUEST", "Invalid input: keys.p256dh is not a point on P-256") from None


def _retryable(result: Delivery) -> bool:
    if result.refused:
        return False
    return result.status is None or result.status == 429 or result.status >= 500


def _wait(result: Delivery, backoff: float) -> float:
    if result.retry_after is not None:
        try:
            return min(MAX_RETRY_AFTER_SECONDS, max(0.0, float(result.retry_after)))
        except ValueError:
            pass
    return backoff
