"""Which models take images and PDF documents: one small rule per target, overridable by configuration.

Targets are the conversion targets: ``openai`` (api.openai.com), ``compatible`` (any other OpenAI-compatible
server), ``anthropic``, ``google``, ``ollama`` and ``echo``. The rule (docs/attachments.md "Which models see images"):

- ``anthropic``: every model but the pre-Claude-3 families (``claude-instant*``, ``claude-1*``, ``claude-2*``) takes
  images and PDF documents;
- ``google``: every Gemini model takes both;
- ``openai``: every model takes both except the text-only families listed in ``_OPENAI_TEXT_ONLY``; PDF input
  needs vision on OpenAI, so documents follow images;
- ``compatible`` and ``ollama``: images only for model names of known vision families (``_LOCAL_VISION``), never
  document parts (those servers have none: PDFs go as their text);
- ``echo`` takes everything (it only describes what it got).

An override is ``provider:glob=on|off`` (``CHATSYNC_VISION_MODELS``), matched case-insensitively against the model
name, first match wins; it decides images (and, where the target has document parts, documents with them).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .types import ModelInputs

TARGETS = ("openai", "compatible", "anthropic", "google", "ollama", "echo")

_OPENAI_TEXT_ONLY = re.compile(
    r"^(gpt-3\.5|gpt-4(-0314|-0613|-32k)?$|gpt-4-(0314|0613|32k)|o1-mini|o1-preview|o3-mini|gpt-oss"
    r"|.*davinci|.*babbage)"
)
_ANTHROPIC_TEXT_ONLY = re.compile(r"^(claude-instant|claude-1|claude-2)")
# Open-weight families whose published models take images (Ollama's library "vision" tag, vLLM's multimodal list).
_LOCAL_VISION = re.compile(
    r"llava|vision|moondream|minicpm-v|pixtral|gemma-?3|llama-?4|mistral-small-?3\.[12]|qwen[0-9.]*-?vl"
    r"|internvl|smolvlm|idefics|kimi-vl|glm-?4\.[0-9]v|granite.*vision|[-_/:.]vl\b"
)

ALL = ModelInputs(images=True, documents=True)
TEXT_ONLY = ModelInputs(images=False, documents=False)
IMAGES_ONLY = ModelInputs(images=True, documents=False)


@dataclass(frozen=True)
class Override:
    """``provider:glob=on|off``: the model names of ``provider`` matching ``glob`` take images or not."""

    provider: str
    pattern: str
    images: bool

    def matches(self, provider: str, model: str) -> bool:
        return provider == self.provider and fnmatch.fnmatchcase(model.lower(), self.pattern.lower())


def parse_overrides(items: Iterable[str]) -> tuple[Override, ...]:
    """Parse ``provider:glob=on|off`` items. Raises ``ValueError`` naming the item that is malformed."""
    out: list[Override] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        head, sep, value = item.rpartition("=")
        provider, colon, pattern = head.partition(":")
        if not sep or not colon or not provider or not pattern or value.lower() not in ("on", "off"):
            raise ValueError(f"{item!r}: expected provider:glob=on|off, e.g. ollama:my-llava*=on")
        out.append(Override(provider.strip(), pattern.strip(), value.lower() == "on"))
    return tuple(out)


def default_inputs(target: str, model: str) -> ModelInputs:
    """The documented rule for ``target`` and ``model`` (see the module docstring)."""
    name = model.strip().lower()
    if target == "anthropic":
        return TEXT_ONLY if _ANTHROPIC_TEXT_ONLY.match(name) else ALL
    if target == "openai":
        return TEXT_ONLY if _OPENAI_TEXT_ONLY.match(name) else ALL
    if target in ("compatible", "ollama"):
        return IMAGES_ONLY if _LOCAL_VISION.search(name) else TEXT_ONLY
    return ALL  # google, echo and anything new: sending is what shows whether it works


def model_inputs(target: str, provider: str, model: str, overrides: Sequence[Override] = ()) -> ModelInputs:
    """What ``model`` of ``provider`` (rendered for ``target``) takes, overrides first."""
    rule = default_inputs(target, model)
    for override in overrides:
        if override.matches(provider, model):
            documents = override.images and target in ("openai", "anthropic", "google", "echo")
            return ModelInputs(images=override.images, documents=documents)
    return rule
