"""Users, devices and sign-in. Every token is a device (a browser, a phone, a terminal): random, shown once,
stored as a sha256 hash, revocable on its own. New devices sign in with one-time links
(:mod:`server.services.links`), which die with the device that made them.

Revocation sets ``revoked_at``; the token is refused from then on. What it already opened (WebSockets, SSE
streams) is closed by :mod:`server.sync.revocation` on every replica.

Every connection and every SSE subscribe checks its token, so a reconnect storm is mostly token checks.
:meth:`AuthService.identify` reads every check from the database, but checks that arrive together share one
query, and a token seen in the last :data:`PRINCIPAL_TTL` is checked by its device id alone (its principal is
kept). A revocation is therefore refused on the very next check wherever it was made; revocations also evict
at once (here, and through :mod:`server.sync.revocation` on every replica). ``lastUsedAt`` is written in the
background, many devices per statement.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal, cast

from sqlalchemy import CursorResult, select, update
from sqlalchemy.exc import IntegrityError

from ..domain import outputs
from ..files import Files
from ..protocol.errors import RpcError
from ..store import repo
from ..store.db import Database
from ..store.models import ApiToken, FileBlob, User, utcnow
from ..sync import admission

log = logging.getLogger(__name__)

TOKEN_PREFIX = "cs_"
# lastUsedAt is written at most this often per device, so authenticating stays a read.
LAST_USED_RESOLUTION = timedelta(minutes=1)
MAX_DEVICE_NAME = 200
# How long a token's principal (its user row, device name) is kept; whether it is live is read on every check.
PRINCIPAL_TTL = 30.0
PRINCIPAL_CACHE_SIZE = 100_000
# Token checks answered by one query at most.
CHECK_BATCH = 500
# lastUsedAt updates wait this long to be written together.
TOUCH_DELAY = 1.0
_TOUCH_CHUNK = 500


REVOKED: Final = "revoked"
"""What :meth:`AuthService.check_token` answers for a token that was a device's and is no longer live (revoked,
or its user deleted while its principal was cached): the client is told it was signed out, not that the
token was never good."""


def hash_token(token: str) -> str:
    # Tokens and codes carry 256 / 192 bits of randomness, so a fast hash is enough: nothing to brute-force.
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _ms(ts: datetime | None) -> int | None:
    return None if ts is None else int(ts.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling, and with which device."""

    user: User
    device_id: str
    device_name: str


Checked = Principal | Literal["revoked"] | None


def signed_out_error() -> RpcError:
    """The error for a call whose device was signed out (its token revoked): UNAUTHORIZED, with the reason a
    client shows ("this device was signed out") rather than "that token was not accepted"."""
    return RpcError("UNAUTHORIZED", "This device was signed out", reason="TOKEN_REVOKED")


class AuthService:
    """Users, devices and tokens: sign-in, token checks (batched and cached, see the module docstring),
    renaming and revoking devices."""

    def __init__(
        self,
        db: Database,
        *,
        clock: Callable[[], datetime] = utcnow,
        on_revoked: Callable[[list[str]], Any] | None = None,
    ) -> None:
        self.db = db
        self.clock = clock  # tests move time with it (link expiry)
        # Called after a commit that revoked devices (``server.sync.revocation`` closes their connections).
        self.on_revoked = on_revoked
        # token hash -> (principal, monotonic expiry, lastUsedAt as last written or read)
        self._cache: dict[str, tuple[Principal, float, datetime | None]] = {}
        self._hash_of_device: dict[str, str] = {}
        # Token checks waiting for the next batch: token hash -> their futures (``_check_batches``).
        self._waiting: dict[str, list[asyncio.Future[Checked]]] = {}
        self._checker: asyncio.Task[None] | None = None
        self._touches: dict[str, None] = {}  # devices used, in order
        self._touch_task: asyncio.Task[None] | None = None

    # --- authentication ---------------------------------------------------------------------------------

    async def identify(self, token: str | None) -> Principal | None:
        """The user and device of a live token, or None (unknown, revoked, or malformed)."""
        checked = await self.check_token(token)
        return checked if isinstance(checked, Principal) else None

    async def check_token(self, token: str | None) -> Checked:
        """The user and device of a live token; :data:`REVOKED` for a device's token that was revoked; None
        for an unknown or malformed one.

        Every call is answered from the database as of a moment after the call began, so a revocation that
        committed before it (in this process, on another replica, or by the CLI) is always seen. Calls
        that arrive together share that read: the checks waiting when a batch starts go in one query (up to
        :data:`CHECK_BATCH`), a cached principal's as a look-up of its device id alone, an unknown token's
        with its user (:meth:`_check_batches`). A burst of thousands of sign-ins costs a few dozen queries.
        """
        if not token or len(token) > 256:
            return None
        token_hash = hash_token(token)
        fut: asyncio.Future[Checked] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(token_hash, []).append(fut)
        if self._checker is None:
            self._checker = asyncio.get_running_loop().create_task(self._check_batches())
        return await fut

    async def _check_batches(self) -> None:
        try:
            while self._waiting:
                hashes = list(itertools.islice(self._waiting, CHECK_BATCH))
                batch = {h: self._waiting.pop(h) for h in hashes}
                try:
                    found = await self._check(hashes)
                except Exception as exc:
                    for futs in batch.values():
                        for f in futs:
                            if not f.done():
                                f.set_exception(exc)
                    continue
                for h, futs in batch.items():
                    principal = found.get(h)
                    for f in futs:
                        if not f.done():
                            f.set_result(principal)
        finally:
            self._checker = None

    async def _check(self, hashes: list[str]) -> dict[str, Checked]:
        """The live principals among ``hashes`` and the revoked ones, read in one transaction (cached ones by
        device id only)."""
        now = time.monotonic()
        cached: dict[str, tuple[str, Principal, datetime | None]] = {}  # device id -> (hash, principal, used)
        unknown: list[str] = []
        for h in hashes:
            entry = self._cache.get(h)
            if entry is not None and entry[1] > now:
                cached[entry[0].device_id] = (h, entry[0], entry[2])
            else:
                unknown.append(h)
        found: dict[str, Checked] = {}
        async with admission.resume_read(self.db) as s:
            if cached:
                live = set(
                    (
                        await s.execute(
                            select(ApiToken.id).where(ApiToken.id.in_(list(cached)), ApiToken.revoked_at.is_(None))
                        )
                    ).scalars()
                )
            if unknown:
                rows = (
                    await s.execute(
                        select(
                            User,
                            ApiToken.id,
                            ApiToken.name,
                            ApiToken.last_used_at,
                            ApiToken.token_hash,
                            ApiToken.revoked_at,
                        )
                        .join(ApiToken, ApiToken.user_id == User.id)
                        .where(ApiToken.token_hash.in_(unknown))
                    )
                ).all()
        if cached:
            for device_id, (h, principal, last_used) in cached.items():
                if device_id in live:
                    found[h] = principal
                    self._touch(device_id, last_used)
                else:
                    found[h] = REVOKED
                    self.forget_devices([device_id])
        if unknown:
            for user, device_id, device_name, last_used, h, revoked_at in rows:
                if revoked_at is not None:
                    found[h] = REVOKED
                    continue
                principal = found[h] = Principal(user, device_id, device_name)
                self._remember(h, principal, last_used)
                self._touch(device_id, last_used)
        return found

    def forget_devices(self, device_ids: list[str]) -> None:
        """Evict these devices' tokens from the cache (they were revoked, here or on another replica)."""
        for device_id in device_ids:
            token_hash = self._hash_of_device.pop(device_id, None)
            if token_hash is not None:
                self._cache.pop(token_hash, None)

    def _remember(self, token_hash: str, principal: Principal, last_used: datetime | None) -> None:
        cache = self._cache
        if token_hash not in cache and len(cache) >= PRINCIPAL_CACHE_SIZE:
            old_hash = next(iter(cache))
            self._hash_of_device.pop(cache.pop(old_hash)[0].device_id, None)
        cache[token_hash] = (principal, time.monotonic() + PRINCIPAL_TTL, last_used)
        self._hash_of_device[principal.device_id] = token_hash

    def _touch(self, device_id: str, last_used: datetime | None) -> None:
        """Record a use: ``lastUsedAt`` is written (in the background, batched) when it is a minute old."""
        now = self.clock()
        if last_used is not None and now - last_used < LAST_USED_RESOLUTION:
            return
        self._touches[device_id] = None
        token_hash = self._hash_of_device.get(device_id)
        entry = self._cache.get(token_hash) if token_hash is not None else None
        if entry is not None:
            self._cache[token_hash] = (entry[0], entry[1], now)  # type: ignore[index]
        if self._touch_task is None or self._touch_task.done():
            self._touch_task = asyncio.get_running_loop().create_task(self._write_touches())

    async def _write_touches(self) -> None:
        await asyncio.sleep(TOUCH_DELAY)
        await self._flush()

    async def _flush(self) -> None:
        """Every pending device gets the time of this write (``lastUsedAt`` has a minute's resolution anyway):
        one statement per :data:`_TOUCH_CHUNK` devices."""
        ids, self._touches = list(self._touches), {}
        if not ids:
            return
        at = self.clock()
        try:
            for i in range(0, len(ids), _TOUCH_CHUNK):
                async with self.db.write() as s:
                    await s.execute(
                        update(ApiToken).where(ApiToken.id.in_(ids[i : i + _TOUCH_CHUNK])).values(last_used_at=at)
                    )
        except Exception:  # advisory: the next use writes it again
            log.warning("writing lastUsedAt failed", exc_info=True)

    async def flush_touches(self) -> None:
        """Write pending ``lastUsedAt`` updates now (tests; shutdown)."""
        task = self._touch_task
        if task is not None and not task.done():
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        self._touch_task = None
        await self._flush()

    async def authenticate(self, token: str | None) -> User | None:
        principal = await self.identify(token)
        return None if principal is None else principal.user

    # --- users and tokens (server side: the CLI) --------------------------------------------------------------

    async def create_user(
        self, name: str, *, admin: bool = False, device_name: str = "first token"
    ) -> tuple[User, str]:
        """Create a user with one token; returns the token (the only time it exists in clear)."""
        token = new_token()
        async with self.db.write() as s:
            if await repo.user_by_name(s, name) is not None:
                raise ValueError(f"user {name!r} already exists")
            user = User(id=str(uuid.uuid4()), name=name, role="admin" if admin else "user", feed_seq=0)
            s.add(user)
            await s.flush()
            s.add(ApiToken(id=str(uuid.uuid4()), user_id=user.id, token_hash=hash_token(token), name=device_name))
        return user, token

    async def create_token(self, name: str, device_name: str = "") -> str:
        token = new_token()
        async with self.db.write() as s:
            user = await repo.user_by_name(s, name)
            if user is None:
                raise ValueError(f"no user named {name!r}")
            s.add(ApiToken(id=str(uuid.uuid4()), user_id=user.id, token_hash=hash_token(token), name=device_name))
        return token

    async def ensure_owner(self) -> str | None:
        """On a database with no users, create the local owner (an admin) and return its token."""
        async with self.db.read() as s:
            if await repo.count_users(s) > 0:
                return None
        try:
            _user, token = await self.create_user("owner", admin=True, device_name="owner (first start)")
        except (ValueError, IntegrityError):  # another replica created it first
            return None
        return token

    async def delete_user(self, name: str, files: Files) -> list[str]:
        """Delete a user with everything they own, their files' bytes in ``files`` storage too (the database's
        cascade cannot reach those); every device is revoked first. Returns the device ids."""
        async with self.db.write() as s:
            user = await repo.user_by_name(s, name)
            if user is None:
                raise ValueError(f"no user named {name!r}")
            ids = list((await s.execute(select(ApiToken.id).where(ApiToken.user_id == user.id))).scalars())
            blobs = list((await s.execute(select(FileBlob.id).where(FileBlob.user_id == user.id))).scalars())
            await s.delete(user)
        await self._revoked(ids)
        await files.remove_blobs(blobs)
        return ids

    async def tokens(self, user_name: str | None = None) -> list[dict[str, Any]]:
        """Every live device (of one user, or everyone's), for ``chatsync tokens list``."""
        stmt = (
            select(ApiToken, User.name)
            .join(User, User.id == ApiToken.user_id)
            .where(ApiToken.revoked_at.is_(None))
            .order_by(User.name, ApiToken.created_at)
        )
        if user_name is not None:
            stmt = stmt.where(User.name == user_name)
        async with self.db.read() as s:
            rows = (await s.execute(stmt)).all()
        return [{**_device(t), "user": n} for t, n in rows]

    async def revoke_token(self, device_id: str) -> None:
        """Revoke any user's device (the CLI; admins)."""
        if not await self._revoke(None, device_id):
            raise ValueError(f"no live token with id {device_id!r}")

    # --- devices (the caller's own) -----------------------------------------------------------------------

    async def devices(self, user: User, current: str | None) -> list[outputs.Device]:
        stmt = (
            select(ApiToken)
            .where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
            .order_by(ApiToken.created_at)
        )
        async with self.db.read() as s:
            rows = (await s.execute(stmt)).scalars().all()
        return [_own(t, current) for t in rows]

    async def revoke_device(self, user: User, device_id: str) -> None:
        if not await self._revoke(user.id, device_id):
            raise RpcError("NOT_FOUND", "Device not found")

    async def rename_device(self, user: User, device_id: str, name: str, current: str | None) -> outputs.Device:
        async with self.db.write() as s:
            row = (
                await s.execute(
                    select(ApiToken).where(
                        ApiToken.id == device_id, ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None)
                    )
                )
            ).scalar()
            if row is None:
                raise RpcError("NOT_FOUND", "Device not found")
            row.name = name
            return _own(row, current)

    async def _revoke(self, user_id: str | None, device_id: str) -> bool:
        stmt = update(ApiToken).where(ApiToken.id == device_id, ApiToken.revoked_at.is_(None))
        if user_id is not None:
            stmt = stmt.where(ApiToken.user_id == user_id)
        async with self.db.write() as s:
            # An UPDATE's result is a CursorResult (the ORM session declares the general Result).
            done: bool = cast(CursorResult[Any], await s.execute(stmt.values(revoked_at=self.clock()))).rowcount == 1
        if done:
            await self._revoked([device_id])
        return done

    async def _revoked(self, device_ids: list[str]) -> None:
        self.forget_devices(device_ids)
        if device_ids and self.on_revoked is not None:
            await self.on_revoked(device_ids)


def _own(row: ApiToken, current: str | None) -> outputs.Device:
    """One of the caller's devices; ``current``: the one the caller signed in with."""
    return cast("outputs.Device", {**_device(row), "current": row.id == current})


def _device(row: ApiToken) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "createdAt": _ms(row.created_at), "lastUsedAt": _ms(row.last_used_at)}
