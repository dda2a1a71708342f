"""Environment overrides of the config (`MEMCLAW_<SECTION>__<KEY>`), read as the typed values they stand for.

The config models are strict, but a variable is always text. So `MEMCLAW_RECALL__K=3` is the number 3.
`MEMCLAW_MEMORY__AUTO_SYNC=false` switches it off: true/false, 1/0, yes/no and on/off are read as switches.
Text that is not such a value stays text and fails validation, which names the variable.

A name no config key has is an error, not a silent no-op: `check_env_names` refuses it (ConfigError, exit 2).
The variables memclaw reads that are not config keys (OWN_VARIABLES) are left alone.

`env_values` reads names in any case, `__` nesting to any depth, and JSON for a section, table or list.
It does so without pydantic-settings, whose imports cost every command about 60 ms.
A list key also takes comma-separated text: `MEMCLAW_OWNERS__DISCORD=111,222` is ["111", "222"].
Text that starts with `[` or `{` is JSON and must parse.
"""

from __future__ import annotations

import json
import os
import re
import types
from collections import deque
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr

from memclaw.errors import ConfigError

ENV_PREFIX = "MEMCLAW_"
NESTED = "__"
OWN_VARIABLES = frozenset(
    {"MEMCLAW_HOME", "MEMCLAW_DISCORD_TOKEN", "MEMCLAW_MCP_TOKEN", "MEMCLAW_TEST_CHROMA_URL", "MEMCLAW_BENCH_TUNING"}
)
"""memclaw's variables that are not config keys: where its home is, the Discord and MCP tokens' own variables, the
test suite's Chroma server, and the benchmarks' tuning values (memclaw.bench.run_config)."""

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


def env_values(model: type[BaseModel], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The values the environment sets for `model` (the whole config), typed for the strict sections: a top-level
    key from `MEMCLAW_<KEY>` (JSON for a section, table or list), a key inside one from `MEMCLAW_<KEY>__<SUBKEY>`
    (nested to any depth; JSON where the key holds a table or list), names in any case, nested variables merged
    over a section's JSON. ConfigError for JSON that does not parse, naming the variables."""
    env = {k.lower(): v for k, v in (os.environ if environ is None else environ).items()}
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = (ENV_PREFIX + name).lower()
        raw = env.get(key)
        if not _is_complex(field.annotation):
            if raw is not None:
                out[name] = raw
            continue
        try:
            value = json.loads(raw) if raw is not None else _nested(key + NESTED, field.annotation, env) or None
            if raw is not None and isinstance(value, dict):
                value = merged(value, _nested(key + NESTED, field.annotation, env))
        except ValueError:
            raise _not_json(name, env) from None
        if value is not None:
            out[name] = _field_names(field.annotation, value) if isinstance(value, dict) else value
    return typed_env_values(model, out)


def merged(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `update`'s values, tables merged key by key (a value that is not a table replaces)."""
    out = dict(base)
    for k, v in update.items():
        out[k] = merged(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out


# a key that names nothing in the model
_NO_FIELD = object()


def _nested(prefix: str, annotation: Any, env: Mapping[str, str]) -> dict[str, Any]:
    """The `<prefix><KEY>[__<KEY>...]` variables as nested tables, in the environment's order (a later variable for
    a key replaces an earlier one). A value is read as JSON where its key holds a table, a list or a section (text
    that is not JSON is an error where the model says so, else kept as text)."""
    top_is_table = _is_table(annotation)
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith(prefix):
            continue
        *path, last = name[len(prefix) :].split(NESTED)
        table: Any = out
        target: Any = annotation
        for k in path:
            target = _child(target, k)
            if isinstance(table, dict):
                table = table.setdefault(k, {})
        target = _child(target, last)
        if _is_list(target.annotation if isinstance(target, _Field) else target) and not _json_shaped(value):
            value = list_items(value)
        elif value and (target is not _NO_FIELD or top_is_table):
            strict = isinstance(target, _Field)
            kind = target.annotation if strict else target
            if target is _NO_FIELD or _is_complex(kind):
                try:
                    value = json.loads(value)
                except ValueError:
                    if strict:
                        raise
        if isinstance(table, dict):
            table[last] = value
    return out


class _Field:
    """A model's field met on the way down a variable's name (its JSON must parse), as opposed to a bare type (the
    values of a table: JSON if it parses)."""

    def __init__(self, annotation: Any) -> None:
        self.annotation = annotation


def _child(target: Any, key: str) -> Any:
    """What `key` names inside `target` (a _Field, a bare type, or _NO_FIELD)."""
    if target is _NO_FIELD:
        return _NO_FIELD
    annotation = target.annotation if isinstance(target, _Field) else target
    if _is_table(annotation):
        args = get_args(annotation)
        return args[-1] if args else _NO_FIELD
    for arg in get_args(annotation):
        found = _child(arg, key)
        if found is not _NO_FIELD:
            return found
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, f in annotation.model_fields.items():
            if name.lower() == key:
                return _Field(f.annotation)
    return _NO_FIELD


def list_items(text: str) -> list[str]:
    """A list set as comma-separated text: `111,222` is ["111", "222"]; items are stripped, empty ones dropped (an
    empty value is the empty list)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _json_shaped(text: str) -> bool:
    """Text that is meant as JSON (a list or a table): it must parse."""
    return text.lstrip()[:1] in ("[", "{")


def _is_list(annotation: Any) -> bool:
    kind = _scalar_type(annotation)
    return kind in (list, set, tuple, frozenset) or get_origin(kind) in (list, set, tuple, frozenset)


def _is_table(annotation: Any) -> bool:
    origin = get_origin(annotation)
    return annotation is dict or (isinstance(origin, type) and issubclass(origin, dict))


def _is_complex(annotation: Any) -> bool:
    """A section, table or list (read from JSON); not text, a number, a switch, a path or a secret. A union is
    complex when a member is."""
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_is_complex(a) for a in get_args(annotation))
    return any(
        isinstance(kind, type)
        and not issubclass(kind, (str, bytes, SecretStr))
        and issubclass(kind, (BaseModel, Mapping, Sequence, AbstractSet, tuple, deque))
        for kind in (annotation, get_origin(annotation))
    )


def _field_names(annotation: Any, value: dict[str, Any]) -> dict[str, Any]:
    """A section's table with its keys spelt as the model's fields (in any case in the environment)."""
    kind = _scalar_type(annotation)
    if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
        return value
    fields = {n.lower(): (n, f) for n, f in kind.model_fields.items()}
    out: dict[str, Any] = {}
    for k, v in value.items():
        name, f = fields.get(str(k).lower(), (k, None))
        out[name] = _field_names(f.annotation, v) if f is not None and isinstance(v, dict) else v
    return out


def _not_json(name: str, env: Mapping[str, str]) -> ConfigError:
    base = f"{ENV_PREFIX}{name.upper()}"
    names = sorted(k.upper() for k in env if k.upper() == base or k.upper().startswith(base + NESTED)) or [base]
    return ConfigError(
        f"environment variable {' / '.join(names)} is not valid JSON (sections, tables and lists are set as "
        f"JSON, e.g. {base}='{{\"k\": 5}}'); fix or unset it, or set one key as {base}__<KEY>"
    )


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
