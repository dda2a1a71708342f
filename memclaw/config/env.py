"""Environment overrides of the config (`MEMCLAW_<SECTION>__<KEY>`): read as the typed values they stand for, and
a name no config key has is an error, not a silent no-op.

* The config models are strict (`recall.k = true` in the file is an error, not 1), but an environment variable is
  always text: `MEMCLAW_RECALL__K=3` is the number 3, `MEMCLAW_MEMORY__AUTO_SYNC=false` the switch off (true/false,
  1/0, yes/no, on/off), `MEMCLAW_RECALL__BM25_WEIGHT=0.5` the number 0.5. Text that is not such a value stays text
  and fails validation naming the variable.
* `MEMCLAW_RECAL__K=3` (a section that does not exist) or `MEMCLAW_RECALL_K=3` (one underscore where the
  section ends) would otherwise be ignored: `check_env_names` refuses them (ConfigError, exit 2) naming the
  variable. memclaw's own variables that are not config keys (OWN_VARIABLES) are left alone.
"""

from __future__ import annotations

import os
import re
import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_settings import EnvSettingsSource

from memclaw.errors import ConfigError

ENV_PREFIX = "MEMCLAW_"
NESTED = "__"
OWN_VARIABLES = frozenset({"MEMCLAW_HOME", "MEMCLAW_DISCORD_TOKEN", "MEMCLAW_TEST_CHROMA_URL"})
"""memclaw's variables that are not config keys: where its home is, the Discord token's own variable, and the test
suite's Chroma server."""

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _scalar_type(annotation: Any) -> Any:
    """`int` for `int`, `int | None`, `Optional[int]`; the annotation itself otherwise."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _typed(annotation: Any, value: Any) -> Any:
    kind = _scalar_type(annotation)
    if isinstance(value, dict) and isinstance(kind, type) and issubclass(kind, BaseModel):
        return typed_env_values(kind, value)
    if not isinstance(value, str):
        return value
    text = value.strip()
    if kind is bool:
        low = text.lower()
        return True if low in _TRUE else False if low in _FALSE else value
    if kind is int and _INT_RE.fullmatch(text):
        return int(text)
    if kind is float and _FLOAT_RE.fullmatch(text):
        return float(text)
    return value


def typed_env_values(model: type[BaseModel], data: Mapping[str, Any]) -> dict[str, Any]:
    """The environment's values for `model` with the text of number and switch keys read as numbers and switches."""
    fields = model.model_fields
    return {k: (_typed(fields[k].annotation, v) if k in fields else v) for k, v in data.items()}


class TypedEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source, its values typed by `typed_env_values` for the strict models."""

    def __call__(self) -> dict[str, Any]:
        return typed_env_values(self.settings_cls, super().__call__())


def check_env_names(sections: Mapping[str, bool], environ: Mapping[str, str] | None = None) -> None:
    """ConfigError naming the first MEMCLAW_* variable that looks like a config override but names no config key
    (`sections`: the top-level config keys, True for those that are sections)."""
    env = os.environ if environ is None else environ
    for name in sorted(env):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in OWN_VARIABLES:
            continue
        rest = upper[len(ENV_PREFIX) :]
        head = rest.split(NESTED, 1)[0].lower()
        if NESTED in rest and head not in sections:
            known = ", ".join(k for k, is_section in sections.items() if is_section)
            raise ConfigError(
                f"environment variable {name} names no config section {head!r} (the sections: {known}); "
                "fix the name or unset it"
            )
        if NESTED not in rest and head not in sections:
            section = next((s for s, is_section in sections.items() if is_section and head.startswith(s + "_")), None)
            if section is not None:
                key = rest[len(section) + 1 :]
                raise ConfigError(
                    f"environment variable {name} is not a config key: a section and its key are joined by two "
                    f"underscores, e.g. {ENV_PREFIX}{section.upper()}{NESTED}{key}; fix the name or unset it"
                )
