"""Process-wide setup shared by every entry point: offline switches and logging."""

from __future__ import annotations

import logging
import os

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "ANONYMIZED_TELEMETRY": "False",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    # third-party progress bars ("Loading weights 0/103") never reach the user's terminal
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}


def set_offline_env() -> None:
    """Set before any heavy import: nothing may try the network for models, cost maps or telemetry."""
    for k, v in OFFLINE_ENV.items():
        os.environ.setdefault(k, v)


def setup_logging(verbose: int = 0) -> None:
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "chromadb", "sentence_transformers", "LiteLLM", "litellm", "discord"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
