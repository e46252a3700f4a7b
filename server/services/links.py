"""Device sign-in links: a signed-in device (``auth.createLink``) or the server's CLI (``chatsync link``) makes a
one-time code, valid :data:`LINK_TTL`, shown as ``<public URL>/link#<code>`` (in the fragment, so it never
reaches a server log). Codes are stored hashed like tokens.

A link is *pending* while it is unused, unrevoked and unexpired and the device that made it is live
(:func:`_pending`). It dies with that device: revoking the device refuses its links from the same moment,
without a write of their own, because every check joins the maker's token row. Deleting the user deletes them.

Two steps, so a link cannot sign a browser into an account it did not choose (login CSRF: a page navigating a
signed-in user to the attacker's link): :meth:`SignInLinks.info` names the account without spending the code,
the app asks, and only then :meth:`SignInLinks.exchange` spends it, once — one conditional UPDATE that repeats
every pending condition, so two exchanges racing each other (or an exchange racing a revocation) give at most
one token.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, and_, delete, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from ..domain import outputs
from ..protocol.errors import RpcError
from ..store import repo
from ..store.db import Database
from ..store.models import ApiToken, LinkCode, User, utcnow
from .auth import MAX_DEVICE_NAME, hash_token, new_token

LINK_TTL = timedelta(minutes=10)
# Links a user's devices may have waiting at once (the CLI is not counted: it is the server's operator).
MAX_PENDING_LINKS = 20
MAX_CODE_CHARS = 200

_INVALID = "This sign-in link is not valid."
_USED = "This sign-in link was already used; make a new one."
_REVOKED = "This sign-in link was revoked; make a new one."
_MAKER_REVOKED = "The device that made this sign-in link was signed out, so the link no longer works; make a new one."
_EXPIRED = "This sign-in link has expired; make a new one."

_Maker = aliased(ApiToken, name="maker")


class LinkError(Exception):
    """A sign-in code that cannot be used (unknown, used, revoked, made by a revoked device, or expired)."""


def _ms(ts: datetime) -> int:
    return int(ts.timestamp() * 1000)


def _pending(now: datetime) -> ColumnElement[bool]:
    """The one definition of a link that may still be spent, as SQL on ``link_codes``."""
    maker_live = exists().where(ApiToken.id == LinkCode.made_by, ApiToken.revoked_at.is_(None))
    return and_(
        LinkCode.used_at.is_(None),
        LinkCode.revoked_at.is_(None),
        LinkCode.expires_at > now,
        or_(LinkCode.made_by.is_(None), maker_live),
    )


def _refusal(link: LinkCode, maker_revoked: bool, now: datetime) -> str | None:
    """Why ``link`` cannot be spent, in the user's words, or None (the same conditions as :func:`_pending`)."""
    if link.used_at is not None:
        return _USED
    if link.revoked_at is not None:
        return _REVOKED
    if maker_revoked:
        return _MAKER_REVOKED
    if link.expires_at <= now:
        return _EXPIRED
    return None


class SignInLinks:
    """One-time device sign-in links: create, look up, exchange for a device token, list pending, revoke
    (module docstring)."""

    def __init__(self, db: Database, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.db = db
        self.clock = clock  # tests move time with it (expiry)

    async def create(
        self, user_id: str, device_name: str | None, public_url: str, *, made_by: str | None
    ) -> outputs.NewLink:
        """A one-time sign-in link for ``user_id``, made by device ``made_by`` (None: the CLI):
        ``{id, url, code, expiresAt}``. ``PRECONDITION_FAILED`` past :data:`MAX_PENDING_LINKS`."""
        code = secrets.token_urlsafe(24)
        now = self.clock()
        expires = now + LINK_TTL
        link_id = str(uuid.uuid4())
        async with self.db.write() as s:
            # Expired codes go as new ones are made: the table holds at most what ten minutes produce.
            await s.execute(delete(LinkCode).where(LinkCode.expires_at < now))
            if made_by is not None:
                await repo.lock_user(s, user_id)  # concurrent creates re-check the bound one after another
                count = select(func.count()).select_from(LinkCode).where(LinkCode.user_id == user_id, _pending(now))
                if (await s.execute(count)).scalar_one() >= MAX_PENDING_LINKS:
                    raise RpcError(
                        "PRECONDITION_FAILED",
                        f"{MAX_PENDING_LINKS} sign-in links are waiting to be used; revoke one (Devices) or wait "
                        "until one expires",
                    )
            s.add(
                LinkCode(
                    code_hash=hash_token(code),
                    id=link_id,
                    user_id=user_id,
                    made_by=made_by,
                    device_name=device_name,
                    created_at=now,
                    expires_at=expires,
                )
            )
        url = public_url.rstrip("/") + "/link#" + code
        return {"id": link_id, "url": url, "code": code, "expiresAt": _ms(expires)}

    async def create_for(self, user_name: str, device_name: str | None, public_url: str) -> outputs.NewLink:
        """A link for the user named ``user_name``, made on the server's command line."""
        async with self.db.read() as s:
            user = await repo.user_by_name(s, user_name)
        if user is None:
            raise ValueError(f"no user named {user_name!r}")
        return await self.create(user.id, device_name, public_url, made_by=None)

    async def _spendable(self, s: AsyncSession, code: str) -> tuple[LinkCode, User]:
        """The link of ``code`` and its user, or :class:`LinkError` saying why it cannot be spent."""
        if not code or len(code) > MAX_CODE_CHARS:
            raise LinkError(_INVALID)
        row = (
            await s.execute(
                select(LinkCode, User, _Maker.revoked_at)
                .join(User, User.id == LinkCode.user_id)
                .outerjoin(_Maker, _Maker.id == LinkCode.made_by)
                .where(LinkCode.code_hash == hash_token(code))
            )
        ).first()
        if row is None:
            raise LinkError(_INVALID)
        link, user, maker_revoked_at = row
        reason = _refusal(link, maker_revoked_at is not None, self.clock())
        if reason is not None:
            raise LinkError(reason)
        return link, user

    async def info(self, code: str) -> dict[str, Any]:
        """What a code signs in to, without spending it: ``{userName, deviceName, expiresAt}``, or
        :class:`LinkError`."""
        async with self.db.read() as s:
            link, user = await self._spendable(s, code)
        return {"userName": user.name, "deviceName": link.device_name, "expiresAt": _ms(link.expires_at)}

    async def exchange(self, code: str, device_name: str | None) -> dict[str, Any]:
        """Spend a sign-in code: ``{token, deviceId, user: {id, name}}``, or :class:`LinkError`."""
        now = self.clock()
        token = new_token()
        device_id = str(uuid.uuid4())
        async with self.db.write() as s:
            link, user = await self._spendable(s, code)
            spent = cast(
                CursorResult[Any],
                await s.execute(
                    update(LinkCode)
                    .where(LinkCode.code_hash == link.code_hash, _pending(now))
                    .values(used_at=now)
                    .execution_options(synchronize_session=False)
                ),
            )
            if spent.rowcount != 1:
                # Spent, revoked, or its device revoked since the read above (PostgreSQL): say which.
                s.expire(link)
                await self._spendable(s, code)
                raise LinkError(_USED)
            # The name given when the link was made wins: the person who made it chose it for this device.
            name = (link.device_name or device_name or "linked device")[:MAX_DEVICE_NAME]
            s.add(ApiToken(id=device_id, user_id=user.id, token_hash=hash_token(token), name=name, created_at=now))
        return {"token": token, "deviceId": device_id, "user": {"id": user.id, "name": user.name}}

    async def pending(self, user: User, current_device: str | None) -> list[outputs.PendingLink]:
        """The user's pending links, oldest first: ``[{id, deviceName, createdAt, expiresAt, madeBy}]``, where
        ``madeBy`` is the device that made it ``{id, name, current}``, or None for the CLI."""
        now = self.clock()
        stmt = (
            select(LinkCode, _Maker.name)
            .outerjoin(_Maker, _Maker.id == LinkCode.made_by)
            .where(LinkCode.user_id == user.id, _pending(now))
            .order_by(LinkCode.created_at, LinkCode.id)
        )
        async with self.db.read() as s:
            rows = (await s.execute(stmt)).all()
        return [
            {
                "id": link.id,
                "deviceName": link.device_name,
                "createdAt": _ms(link.created_at),
                "expiresAt": _ms(link.expires_at),
                "madeBy": None
                if link.made_by is None
                else {"id": link.made_by, "name": maker_name, "current": link.made_by == current_device},
            }
            for link, maker_name in rows
        ]

    async def revoke(self, user: User, link_id: str) -> None:
        """Revoke one of the user's pending links; ``NOT_FOUND`` for any other id (spent, expired, not theirs)."""
        now = self.clock()
        stmt = (
            update(LinkCode)
            .where(LinkCode.id == link_id, LinkCode.user_id == user.id, _pending(now))
            .values(revoked_at=now)
            .execution_options(synchronize_session=False)
        )
        async with self.db.write() as s:
            done = cast(CursorResult[Any], await s.execute(stmt)).rowcount == 1
        if not done:
            raise RpcError("NOT_FOUND", "Sign-in link not found (used, expired or revoked)")
