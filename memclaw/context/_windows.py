"""The model's side of the context: how many tokens its window holds, and whether it reads images."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from memclaw.errors import ConfigError

if TYPE_CHECKING:
    from memclaw.config import Config

DEFAULT_CONTEXT_WINDOW = 8192

# Max input tokens of common models (provider prefix stripped; longest matching prefix wins).
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 272_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude-3-5": 200_000,
    "claude-3-7": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2": 1_048_576,
    "gemini-2.5": 1_048_576,
    "deepseek-chat": 64_000,
    "deepseek-reasoner": 64_000,
    "mistral-large": 128_000,
    "llama3.1": 128_000,
    "llama3.2": 128_000,
    "llama3.3": 128_000,
    "llama3": 8_192,
    "llama-3.1": 128_000,
    "llama-3.3": 128_000,
    "qwen2.5": 32_768,
    "qwen3": 40_960,
}

_VISION_MARKERS = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4-turbo",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "claude-3",
    "claude-sonnet-4",
    "claude-opus-4",
    "claude-haiku-4",
    "gemini",
    "llava",
    "vision",
    "pixtral",
    "-vl",
    "qwen2.5vl",
    "gemma3",
)


def _bare_model(model: str) -> str:
    """'openrouter/meta-llama/llama-3.1-70b' -> 'llama-3.1-70b'; 'ollama/llama3.1:8b' -> 'llama3.1'."""
    return model.lower().rsplit("/", 1)[-1].split(":", 1)[0]


@lru_cache(maxsize=64)
def _litellm_window(model: str) -> int | None:
    # Imports litellm: only for a model the table above does not know
    from memclaw.llm.client import model_info

    info = model_info(model)
    n = info.get("max_input_tokens") or info.get("max_tokens")
    return int(n) if isinstance(n, int) and n > 0 else None


def context_window(config: Config, model: str | None = None) -> int:
    """The model's context window: `agent.model_overrides[model]["context_window"]`, else
    `agent.context_window` (for the configured model), else the defaults table, else litellm's offline model
    info (not for a model asked without litellm), else 8192."""
    model = model or config.agent.model
    override = config.agent.model_overrides.get(model, {}).get("context_window")
    if override is not None:
        try:
            return int(override)
        except (TypeError, ValueError):
            raise ConfigError(
                f"agent.model_overrides[{model!r}].context_window must be an integer, got {override!r}"
            ) from None
    if config.agent.context_window and model == config.agent.model:
        return config.agent.context_window
    bare = _bare_model(model)
    best = max((p for p in CONTEXT_WINDOWS if bare.startswith(p)), key=len, default=None)
    if best:
        return CONTEXT_WINDOWS[best]
    from memclaw.llm.client import direct_transport

    if direct_transport(config, model):
        # A model asked without litellm is not looked up in litellm's table: set agent.context_window for it.
        return DEFAULT_CONTEXT_WINDOW
    return _litellm_window(model) or DEFAULT_CONTEXT_WINDOW


def supports_vision(config: Config, model: str) -> bool:
    """`agent.model_overrides[model]["vision"]` if set, else a table of known vision model names."""
    v = config.agent.model_overrides.get(model, {}).get("vision")
    if isinstance(v, bool):
        return v
    bare = model.lower()
    if any(x in bare for x in ("o1-mini", "o3-mini", "gpt-3.5", "embedding")):
        return False
    return any(m in bare for m in _VISION_MARKERS)
