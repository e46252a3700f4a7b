"""Inputs of the procedures through which a user's devices know about each other: presence, drafts, unread
marks and push notifications (``api/devices.py``). Validated here, at the boundary, like ``inputs.py``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..domain.models import StrictInput
from .inputs import FileRef, SessionRef

PushEvent = Literal["approval-needed", "answer-finished", "run-failed"]


class PresenceUpdate(SessionRef):
    visible: bool
    focused: bool = False
    typing: bool = False


class DraftSave(SessionRef):
    text: str = Field(max_length=1_000_000)  # bounded again, tighter, by CHATSYNC_MAX_CONTENT_CHARS
    attachments: list[FileRef] = Field(default_factory=list, max_length=32)
    base_version: int = Field(ge=0)


class DraftClear(SessionRef):
    base_version: int = Field(ge=0)


class PushKeys(StrictInput):
    p256dh: str = Field(alias="p256dh", min_length=1, max_length=200)  # as browsers name it, not camelCased
    auth: str = Field(min_length=1, max_length=100)


class PushSubscribe(StrictInput):
    endpoint: str = Field(min_length=1, max_length=2048)
    keys: PushKeys
    events: list[PushEvent] | None = Field(default=None, max_length=3)


class PushUnsubscribe(StrictInput):
    endpoint: str = Field(min_length=1, max_length=2048)


class PushDecide(StrictInput):
    capability: str = Field(min_length=1, max_length=2000)
    approved: bool
