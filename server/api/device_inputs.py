"""Inputs of the procedures through which a user's devices know about each other: presence, drafts, unread
marks and push notifications (``api/devices.py``). Validated here, at the boundary, like ``inputs.py``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..domain.models import StrictInput
from .inputs import FileRef, SessionRef

PushEvent = Literal["approval-needed", "answer-finished", "run-failed"]


class PresenceUpdate(SessionRef):
    """``presence.update``: this client's state in a session (open, in view, focused, typing)."""

    visible: bool
    focused: bool = False
    typing: bool = False


class DraftSave(SessionRef):
    """``draft.save``: the composer's text and files, refused if the draft changed since ``baseVersion``."""

    text: str = Field(max_length=1_000_000)  # bounded again, tighter, by CHATSYNC_MAX_CONTENT_CHARS
    attachments: list[FileRef] = Field(default_factory=list, max_length=32)
    base_version: int = Field(ge=0)


class DraftClear(SessionRef):
    """``draft.clear``: empty the draft, refused if it changed since ``baseVersion``."""

    base_version: int = Field(ge=0)


class PushKeys(StrictInput):
    """A push subscription's keys, as the browser gives them."""

    p256dh: str = Field(alias="p256dh", min_length=1, max_length=200)  # as browsers name it, not camelCased
    auth: str = Field(min_length=1, max_length=100)


class PushSubscribe(StrictInput):
    """``push.subscribe``: a browser's push subscription and the events it wants."""

    endpoint: str = Field(min_length=1, max_length=2048)
    keys: PushKeys
    events: list[PushEvent] | None = Field(default=None, max_length=3)


class PushUnsubscribe(StrictInput):
    """``push.unsubscribe``: the push subscription to forget, by endpoint."""

    endpoint: str = Field(min_length=1, max_length=2048)


class PushDecide(StrictInput):
    """``push.decide``: approve or deny a tool call from a notification, with the capability it carried."""

    capability: str = Field(min_length=1, max_length=2000)
    approved: bool
