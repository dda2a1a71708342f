"""`--embeddings MODEL[,MODEL...]`: the same benchmark under several embedding models, side by side.

Each model gets its own run (its own indexes); the results merge into one dict whose memclaw systems are named
"<system> · <model>" (grep systems do not embed: listed once), so one table and one plot compare them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memclaw.errors import UsageError

if TYPE_CHECKING:
    from memclaw.config import Config


def parse_models(value: str | None) -> list[str]:
    """ "a,b" -> ["a", "b"] (duplicates dropped); None or "" -> [] (the configured model)."""
    models = list(dict.fromkeys(m.strip() for m in (value or "").split(",") if m.strip()))
    if value is not None and value.strip() and not models:
        raise UsageError("--embeddings needs a model name, e.g. --embeddings openai/text-embedding-3-small")
    return models


def with_model(base: Config, model: str) -> Config:
    """`base` with embeddings.model = `model` (validated like the config file)."""
    from memclaw.config import EmbeddingsConfig

    emb = EmbeddingsConfig.model_validate({**base.embeddings.model_dump(), "model": model})
    return base.model_copy(update={"embeddings": emb})


def side_by_side(models: list[str], results: list[dict[str, Any]]) -> dict[str, Any]:
    """One results dict from one run per model."""
    merged = dict(results[0])
    systems: dict[str, Any] = {}
    for model, res in zip(models, results, strict=True):
        for name, s in res["systems"].items():
            grep = name.startswith("grep")
            if grep and name in systems:
                continue
            systems[name if grep else f"{name} · {model}"] = s
    merged["systems"] = systems
    merged["config"] = {**results[0]["config"], "embeddings_model": ", ".join(models)}
    merged["index_seconds_by_model"] = {m: r["index_seconds"] for m, r in zip(models, results, strict=True)}
    merged["index_seconds"] = round(sum(r["index_seconds"] for r in results), 2)
    return merged


def run_per_model(value: str | None, base: Config, run: Callable[[Config], dict[str, Any]]) -> dict[str, Any]:
    """`run(config)` once per model named in `value` (once with `base` when none is), merged side by side."""
    models = parse_models(value)
    if not models:
        return run(base)
    return side_by_side(models, [run(with_model(base, m)) for m in models])
