"""Process-wide setup shared by every entry point: offline switches and logging."""

from __future__ import annotations

import gc
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


THIRD_PARTY_LOGGERS = (
    "httpx",
    "httpcore",
    "openai",
    "chromadb",
    "sentence_transformers",
    "LiteLLM",
    "LiteLLM Router",
    "LiteLLM Proxy",
    "litellm",
    "discord",
)
"""Libraries whose DEBUG/INFO lines dump requests (bodies, headers: whatever a tool read, the API key's header):
they stay at WARNING whatever -v/-vv asks; memclaw's own lines follow the verbosity."""


class VisibleFormatter(logging.Formatter):
    """Log lines as a terminal should show them: a control character in a memory, a path or a query is drawn as a
    symbol, never sent to the terminal (memclaw.util.visible)."""

    def format(self, record: logging.LogRecord) -> str:
        from memclaw.util.visible import visible

        return visible(super().format(record))


def setup_logging(verbose: int = 0) -> None:
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler()
    handler.setFormatter(VisibleFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    for noisy in THIRD_PARTY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    redact_logs()


def redact_logs() -> None:
    """Every line memclaw's log handlers print (and litellm's own handler) goes through memclaw.util.redact: no URL
    credentials, no known secret value. Idempotent."""
    from memclaw.util.redact import RedactingFilter

    targets: list[logging.Filterer] = list(logging.getLogger().handlers)
    # Own handlers
    targets += [logging.getLogger(n) for n in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")]
    for t in targets:
        if not any(isinstance(f, RedactingFilter) for f in t.filters):
            t.addFilter(RedactingFilter())


STARTUP_GC_THRESHOLD = (100_000, 50, 100)
_steady_gc: tuple[int, ...] | None = None


def startup_gc() -> None:
    """A command's start: Python's cyclic garbage collector runs far less often while the libraries load (litellm's
    import creates some 10^5 objects and triggers dozens of full collections, 0.4 s of CPU)."""
    global _steady_gc
    if _steady_gc is None:
        _steady_gc = gc.get_threshold()
    gc.set_threshold(*STARTUP_GC_THRESHOLD)


def steady_gc() -> None:
    """A long-running command (chat, gateway) once started: the usual collector again, the start-up's objects
    frozen out of its way."""
    if _steady_gc is not None:
        gc.freeze()
        gc.set_threshold(*_steady_gc)


def leave_quickly() -> None:
    """At a command's end: freeze what is alive, so that the interpreter's exit does not walk it all once more
    (0.1 s of CPU after a recall, 0.8 s once litellm is loaded). Exit handlers, flushing and threads are as usual."""
    gc.freeze()
