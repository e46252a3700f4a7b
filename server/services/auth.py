"""Users and API tokens. Tokens are random, shown once, and stored as sha256 hashes."""
from __future__ import annotations

import hashlib
import secrets
import uuid

from sqlalchemy.exc import IntegrityError

from ..store import repo
from ..store.db import Database
from ..store.models import ApiToken, User

TOKEN_PREFIX = "cs_"


def hash_token(token: str) -> str:
    # Tokens carry 256 bits of randomness, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class AuthService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def authenticate(self, token: str | None) -> User | None:
        if not token or len(token) > 256:
            return None
        async with self.db.read() as s:
            return await repo.user_by_token_hash(s, hash_token(token))

    async def create_user(self, name: str, *, admin: bool = False) -> tuple[User, str]:
        """Create a user with one token; returns the token (the only time it exists in clear)."""
        token = new_token()
        async with self.db.write() as s:
            if await repo.user_by_name(s, name) is not None:
                raise ValueError(f"user {name!r} already exists")
            user = User(id=str(uuid.uuid4()), name=name, role="admin" if admin else "user")
            s.add(user)
            await s.flush()
            s.add(ApiToken(id=str(uuid.uuid4()), user_id=user.id, token_hash=hash_token(token)))
        return user, token

    async def create_token(self, name: str) -> str:
        token = new_token()
        async with self.db.write() as s:
            user = await repo.user_by_name(s, name)
            if user is None:
                raise ValueError(f"no user named {name!r}")
            s.add(ApiToken(id=str(uuid.uuid4()), user_id=user.id, token_hash=hash_token(token)))
        return token

    async def ensure_owner(self) -> str | None:
        """On a database with no users, create the local owner (an admin) and return its token."""
        async with self.db.read() as s:
            if await repo.count_users(s) > 0:
                return None
        try:
            _user, token = await self.create_user("owner", admin=True)
        except (ValueError, IntegrityError):  # another replica created it first
            return None
        return token
