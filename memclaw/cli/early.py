"""Start loading the embedding model first thing for the commands that embed a query at once (`recall`, `context`).

The load starts before the CLI framework parses the arguments and before pydantic and the config are imported.
So the model's ONNX Runtime session, which does not hold the GIL, is made beside that start-up, not after it.

This is a guess, read cheaply and without validating anything: the command from argv, and the few settings it needs.
They are read with the validated config's precedence: the key's variable, the section's JSON variable, the file.
The defaults come from memclaw.defaults, the module the config builds its fields from.
The validated config then decides: the command asks for its model again (memclaw.cli.common.memory_service).
That is the one already loading when the guess was right. Anything unclear and nothing starts early.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memclaw.defaults import CONTEXT_RECALL_K, EMBEDDINGS_BACKEND, EMBEDDINGS_MODEL, RECALL_MODE
from memclaw.util.home import config_path
from memclaw.util.safepath import read_regular

log = logging.getLogger(__name__)

EMBEDS_AT_ONCE = frozenset({"recall", "context"})
"""Commands whose first real work is embedding a query (`agent` checks its API key first, `chat` waits for input)."""

# the root's options before a command; `-v`, `-vv`... too; none takes a value
_ROOT_OPTIONS = frozenset({"--verbose"})
_NOT_A_RUN = frozenset({"--help", "--version"})


@dataclass(frozen=True)
class EarlyChoice:
    """The settings that name the embedding model (memclaw.embedding.load.ModelChoice), with the config's defaults."""

    model: str = EMBEDDINGS_MODEL
    backend: str = EMBEDDINGS_BACKEND
    cache_dir: Path | None = None


def load_model_early(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> bool:
    """Start loading the embedding model now if the command in `argv` (without the program) will embed a query
    at once and the settings are clear; whether a load started. A guess never fails the command: whatever goes
    wrong here (an unreadable home, a missing library) is left for the command to meet and say."""
    try:
        choice = early_choice(argv, os.environ if environ is None else environ)
        if choice is None:
            return False
        from memclaw.embedding.load import load_in_background

        return load_in_background(choice)
    except Exception:
        log.debug("no early load", exc_info=True)
        return False


def early_choice(argv: Sequence[str], environ: Mapping[str, str]) -> EarlyChoice | None:
    """The model `argv`'s command will load first thing, by the environment and the config file; None when it
    will not embed a query at once, or when that is unclear."""
    rest = _after_command(argv)
    if rest is None or _NOT_A_RUN & set(argv):
        return None
    command, options = rest[0], rest[1:]
    if command not in EMBEDS_AT_ONCE:
        return None
    setting = _settings(environ)
    if setting is None:
        return None
    try:
        mode = (_option(options, "--mode") if command == "recall" else None) or setting("recall", "mode", RECALL_MODE)
        recall_k = setting("context", "recall_k", CONTEXT_RECALL_K)
        model = setting("embeddings", "model", EarlyChoice.model)
        backend = setting("embeddings", "backend", EarlyChoice.backend)
        cache_dir = setting("embeddings", "cache_dir", None)
    except (TypeError, ValueError):
        return None
    if mode == "bm25" or (command == "context" and int(recall_k) == 0):
        return None
    if not all(isinstance(v, str) and v for v in (model, backend, *([cache_dir] if cache_dir is not None else []))):
        return None
    return EarlyChoice(model, backend, Path(cache_dir) if cache_dir else None)


def _after_command(argv: Sequence[str]) -> list[str] | None:
    """argv from the command on (the root's options skipped); None if something else comes first."""
    for i, arg in enumerate(argv):
        if arg in _ROOT_OPTIONS or (arg.startswith("-v") and set(arg[1:]) == {"v"}):
            continue
        return None if arg.startswith("-") else list(argv[i:])
    return None


def _option(options: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(options):
        if arg == name and i + 1 < len(options):
            return options[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None


def _settings(environ: Mapping[str, str]) -> Any:
    """A reader of `(section, key, default)` by the validated config's precedence, or None when the config file
    does not read as tables (a section's JSON variable that does not: ValueError or TypeError from the reader)."""
    env = {k.lower(): v for k, v in environ.items()}
    file = _config_file()
    if file is None:
        return None

    def setting(section: str, key: str, default: Any) -> Any:
        for value in (
            env.get(f"memclaw_{section}__{key}"),
            _lower_keys(json.loads(env.get(f"memclaw_{section}") or "{}")).get(key),
            _lower_keys(file.get(section, {})).get(key),
        ):
            if value is not None:
                return value
        return default

    return setting


def _config_file() -> dict[str, Any] | None:
    """The config file's tables by lower-case name ({} without a file); None if it does not read as one (or its
    folder cannot be looked into: the command says so itself)."""
    try:
        path = config_path()
        if path is None:
            return {}
        text = read_regular(path, follow=True).decode("utf-8")
        if path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
        return _lower_keys(data)
    except (OSError, ValueError, TypeError, RecursionError):
        return None


def _lower_keys(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError("not a table")
    out: dict[str, Any] = {}
    for k, v in data.items():
        out.setdefault(str(k).lower(), v)
    return out
