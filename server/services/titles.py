"""Session titles: when the server sets them, and how they are regenerated.

``titleSource`` says who wrote the title: ``none`` (empty), ``truncate`` (the first user message, cut),
``model`` (the session's model), ``user`` (``session.setTitle``, or a title given to ``session.create``).
Every change is exactly one ``title-changed {title, source}`` event, written by :func:`apply_title` in the
transaction that makes it; a "change" to the same title and source writes nothing.

Automatic steps, and what they never do:

* **First message** — when a user message is stored (``message.send``, auto-send from the queue, a steered
  message) and ``titleSource`` is ``none``, the same transaction sets the truncated first user message as
  the title (source ``truncate``). After ``session.clearTitle`` (source ``none``) the next stored user
  message therefore names the session again, from the *first* user message.
* **Model title** (``CHATSYNC_TITLE_MODE=model``) — when the run that answered the first user message
  finishes (``run-finished``), a background task asks the session's provider and model for a 3–5 word title
  from the first exchange. The answer and the auto-send of the queue never wait for it: it starts after the
  run's transaction committed, so its ``title-changed`` comes after that ``run-finished``. It applies only
  if the title is still the one it started from (source ``truncate``); a title set, cleared or regenerated
  meanwhile wins. On any failure (provider error, timeout, an empty answer) the truncated title stays.
  A failed or aborted first answer gets no model title; ``session.regenerateTitle`` can ask again.
* A ``user`` title is never replaced automatically: neither step runs unless the source is ``none`` /
  ``truncate``. Only explicit requests replace it: ``session.setTitle``, ``session.clearTitle``,
  ``session.regenerateTitle`` and ``session.switchContext {regenerateTitle: true}``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Literal

from ..domain import events
from ..domain import models as wire
from ..domain.models import TitleSource
from ..domain.titles import clean_model_title, truncate_title
from ..llm import ChatRequest, Message, Provider, RequestOptions
from ..protocol.errors import RpcError
from ..store import repo
from ..store.models import User, utcnow
from .uow import SessionTx, UnitOfWork

log = logging.getLogger(__name__)

TitleMethod = Literal["truncate", "model"]

MODEL_TITLE_TIMEOUT_SECONDS = 30.0
# How much of the first exchange the title request quotes; a title needs the gist, not a whole paste.
EXCERPT_CHARS = 2000
# The instruction goes as system text and the exchange as the user turn, first the user's own words: a real
# model titles the exchange, and the offline echo model, which repeats the last user turn, yields the first
# words of the first message — a deterministic title for tests.
TITLE_INSTRUCTION = (
    "You name chat sessions. The next message holds the start of a conversation: the user's first message, "
    "then, after a line '---', the assistant's answer. Reply with a title of 3 to 5 words that says what the "
    "conversation is about, in the user's language. Reply with the title only: no quotes, no punctuation at "
    "the end, no explanation."
)
TITLE_MAX_TOKENS = 32


def apply_title(tx: SessionTx, title: str, source: TitleSource) -> bool:
    """Set the title in ``tx`` with its one ``title-changed`` event; False (and nothing written) if unchanged."""
    if tx.row.title == title and tx.row.title_source == source:
        return False
    tx.row.title, tx.row.title_source = title, source
    tx.row.updated_at = utcnow()
    tx.emit(events.title_changed(title, source))
    return True


async def title_from_first_message(tx: SessionTx) -> None:
    """Called when a user message is stored: an untitled session takes its first user message as title."""
    if tx.row.title_source != "none":
        return
    first = await repo.first_user_text(await tx.plain(), tx.row.id)
    if first is not None:
        apply_title(tx, truncate_title(first), "truncate")


async def follow_active_path(tx: SessionTx) -> None:
    """After the active path changed (an edit, a switch): a title that was made from the first user message, or
    none, follows the first user message of the path now; one the user gave or the model made stays."""
    if tx.row.title_source not in ("none", "truncate"):
        return
    first = await repo.first_user_message(await tx.orm(), tx.row.id)
    if first is not None:
        apply_title(tx, truncate_title(first.content), "truncate")


def title_request(model: str, first_message: str, answer: str | None) -> ChatRequest:
    """The separate, non-streamed completion that asks for a title of a first exchange."""
    text = first_message[:EXCERPT_CHARS]
    if answer:
        text += "\n\n---\n" + answer[:EXCERPT_CHARS]
    return ChatRequest(
        messages=(Message(role="user", content=text),),
        options=RequestOptions(model=model, system_prompt=TITLE_INSTRUCTION, max_tokens=TITLE_MAX_TOKENS),
    )


class TitleError(Exception):
    """The model gave no usable title."""


class TitleService:
    """Model titles and ``session.regenerateTitle``. ``provider`` is the orchestrator's provider lookup."""

    def __init__(
        self,
        uow: UnitOfWork,
        mode: TitleMethod,
        provider: Callable[[str], Provider],
        *,
        timeout: float = MODEL_TITLE_TIMEOUT_SECONDS,
    ) -> None:
        self.uow = uow
        self.mode = mode
        self.provider = provider
        self.timeout = timeout

    async def ask_model(self, provider_id: str, model: str, first_message: str, answer: str | None) -> str:
        """One non-streamed completion; the cleaned title, or :class:`TitleError`."""
        try:
            # Not ``asyncio.wait_for`` (Python 3.11 returns the answer to a caller cancelled as it arrives: the
            # title would be written by a task that is to stop, e.g. at shutdown).
            async with asyncio.timeout(self.timeout):
                completion = await self.provider(provider_id).complete(title_request(model, first_message, answer))
        except TimeoutError as exc:
            raise TitleError("the model did not answer in time") from exc
        if completion.error is not None:
            raise TitleError(f"{completion.error.code}: {completion.error.message}")
        try:
            return clean_model_title(completion.text)
        except ValueError as exc:
            raise TitleError(str(exc)) from exc

    # --- automatic: after the first answer (model mode) ---------------------------------------------------

    async def after_run_finished(self, session_id: str, run_id: str) -> None:
        """Background task started after a run's ``run-finished`` committed (see the module docstring)."""
        if self.mode != "model":
            return
        try:
            async with self.uow.db.read() as s:
                row = await repo.get_session(s, session_id)
                if row is None or row.title_source != "truncate":
                    return
                first = await repo.first_user_message(s, session_id)
                if first is None or first.run_id != run_id:
                    return  # not the first answer
                answer = await repo.first_answer_after(s, session_id, first.ordinal)
                started_from = (row.title, row.title_source)
                provider_id, model = row.provider, row.model
            try:
                title = await self.ask_model(provider_id, model, first.content, answer.content if answer else None)
            except Exception as exc:
                log.warning("session %s: no model title (%s); the truncated title stays", session_id, exc)
                return
            async with self.uow.session(None, session_id, head_only=True) as tx:
                if (tx.row.title, tx.row.title_source) == started_from:
                    apply_title(tx, title, "model")
        except RpcError:
            pass  # the session was deleted meanwhile
        except Exception:
            log.exception("session %s: model title failed", session_id)

    # --- explicit: session.regenerateTitle, session.switchContext -----------------------------------------

    async def truncate_in(self, tx: SessionTx, *, required: bool = True) -> None:
        """Regenerate by truncation inside ``tx``; no user message yet is ``PRECONDITION_FAILED`` if required."""
        first = await repo.first_user_message(await tx.orm(), tx.row.id)
        if first is None:
            if required:
                raise RpcError("PRECONDITION_FAILED", "The session has no user message to take a title from")
            return
        apply_title(tx, truncate_title(first.content), "truncate")

    async def regenerate(
        self, user: User, session_id: str, method: TitleMethod | None = None, *, required: bool = True
    ) -> wire.Session:
        """``session.regenerateTitle``: recompute from the first user message (``model``: the first
        exchange), replacing whatever title the session has — the caller asked for it."""
        if (method or self.mode) == "truncate":
            async with self.uow.session(user, session_id) as tx:
                await self.truncate_in(tx, required=required)
                return repo.session_wire(tx.row)
        async with self.uow.db.read() as s:
            row = await repo.get_session(s, session_id)
            if row is None or row.owner_id != user.id:
                raise RpcError("NOT_FOUND", "Session not found")
            first = await repo.first_user_message(s, session_id)
            answer = await repo.first_answer_after(s, session_id, first.ordinal) if first else None
            provider_id, model = row.provider, row.model
        if first is None:
            if required:
                raise RpcError("PRECONDITION_FAILED", "The session has no user message to take a title from")
            return repo.session_wire(row)
        # The model call happens outside any transaction: a slow provider must not hold the session lock.
        source: TitleSource = "model"
        try:
            title = await self.ask_model(provider_id, model, first.content, answer.content if answer else None)
        except Exception as exc:
            log.warning("session %s: no model title (%s); falling back to truncation", session_id, exc)
            title, source = truncate_title(first.content), "truncate"
        async with self.uow.session(user, session_id) as tx:
            apply_title(tx, title, source)
            return repo.session_wire(tx.row)
