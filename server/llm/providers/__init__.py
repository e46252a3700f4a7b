"""Provider adapters behind one interface, and the registry that builds them by id.

SDK modules are imported lazily by ``get_provider`` so that importing ``server.llm`` stays cheap and the echo
model works even where an SDK is broken or absent.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from .base import Provider

# id -> (module, class); one table, so adding a provider is one line.
_PROVIDERS: dict[str, tuple[str, str]] = {
    "echo": (".echo", "EchoProvider"),
    "openai": (".openai", "OpenAIProvider"),
    "anthropic": (".anthropic", "AnthropicProvider"),
    "google": (".google", "GoogleProvider"),
    "ollama": (".ollama", "OllamaProvider"),
}
PROVIDER_IDS: tuple[str, ...] = tuple(_PROVIDERS)

# Which environment variables make a provider usable without arguments (ollama needs none: it defaults to
# localhost, but it is never picked implicitly because nothing says a server runs there).
_KEY_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}


def get_provider(provider_id: str, **config: Any) -> Provider:
    """Build the provider ``provider_id`` (``echo|openai|anthropic|google|ollama``) with ``config`` passed to its
    constructor (e.g. ``http_client=``, ``retry_policy=``, ``delay=``). Raises ``KeyError`` for an unknown id and
    ``ProviderError(not_configured)`` when the provider's credentials are missing."""
    try:
        module_name, class_name = _PROVIDERS[provider_id]
    except KeyError:
        raise KeyError(f"unknown provider {provider_id!r}; known: {', '.join(PROVIDER_IDS)}") from None
    module = importlib.import_module(module_name, __name__)
    provider: Provider = getattr(module, class_name)(**config)
    return provider


def register_provider(provider_id: str, module: str, class_name: str) -> None:
    """Make another provider available by id (an absolute module path and a :class:`Provider` subclass)."""
    _PROVIDERS[provider_id] = (module, class_name)


def known_provider(provider_id: str) -> bool:
    return provider_id in _PROVIDERS


def default_provider_id(environ: Any = None) -> str:
    """The first provider whose credentials are in the environment (openai, anthropic, google), else ``echo``."""
    env = os.environ if environ is None else environ
    for provider_id, names in _KEY_VARS.items():
        if any(env.get(name) for name in names):
            return provider_id
    return "echo"


__all__ = ["PROVIDER_IDS", "Provider", "default_provider_id", "get_provider", "known_provider", "register_provider"]
