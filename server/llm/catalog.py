"""Which providers this server can use, and the models it knows for each (``provider.list``).

A provider is available when its credentials are in the server's environment (the same variables its adapter
reads); otherwise the entry says which variable is missing, so a client can offer it greyed out with that hint.
The model lists are suggestions, not a limit: a model name is free text, and for an OpenAI-compatible server
(``OPENAI_BASE_URL`` not on api.openai.com) or Ollama only the operator knows the names, so the list holds only
the deployment's default model (``CHATSYNC_DEFAULT_MODEL``) when it belongs to that provider.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..domain.outputs import ProviderInfo
from .providers import PROVIDER_IDS

# Models of each hosted provider that a person is likely to pick; any other name can be typed.
KNOWN_MODELS: dict[str, tuple[str, ...]] = {
    "echo": ("echo",),
    "openai": ("gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini", "o4-mini"),
    "anthropic": ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"),
    "google": ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"),
    "ollama": (),
}
LABELS: dict[str, str] = {
    "echo": "Echo (offline test model)",
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "google": "Google Gemini",
    "ollama": "Ollama",
}


def _missing(provider_id: str, env: Mapping[str, str]) -> str | None:
    """Why ``provider_id`` cannot be used with ``env`` (a sentence), or ``None`` when it can."""
    if provider_id == "openai" and not (env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL")):
        return "No API key: the server needs OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible server)."
    if provider_id == "anthropic" and not env.get("ANTHROPIC_API_KEY"):
        return "No API key: the server needs ANTHROPIC_API_KEY."
    if provider_id == "google" and not (env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY")):
        return "No API key: the server needs GEMINI_API_KEY or GOOGLE_API_KEY."
    if provider_id == "ollama" and not env.get("OLLAMA_HOST"):
        return "No Ollama server configured: the server needs OLLAMA_HOST."
    return None


def provider_catalog(
    default_provider: str | None = None, default_model: str | None = None, environ: Mapping[str, str] | None = None
) -> list[ProviderInfo]:
    """One entry per provider id: ``{id, label, available, reason, models, freeText}`` (``reason`` is ``None``
    when available; ``freeText`` says the known list is empty or incomplete by nature, so the model is typed)."""
    env = os.environ if environ is None else environ
    out: list[ProviderInfo] = []
    for provider_id in PROVIDER_IDS:
        reason = _missing(provider_id, env)
        base_url = env.get("OPENAI_BASE_URL") or ""
        compatible = provider_id == "openai" and bool(base_url) and "api.openai.com" not in base_url
        models = [] if compatible else list(KNOWN_MODELS.get(provider_id, ()))
        if default_model and provider_id == default_provider and default_model not in models:
            models.insert(0, default_model)
        out.append(
            {
                "id": provider_id,
                "label": "OpenAI-compatible server" if compatible else LABELS.get(provider_id, provider_id),
                "available": reason is None,
                "reason": reason,
                "models": models,
                "freeText": compatible or provider_id == "ollama" or provider_id not in KNOWN_MODELS,
            }
        )
    return out
