"""The configuration reference, generated from the config model (memclaw/config/__init__.py) and recall's presets
(memclaw/config/presets.py), so it cannot drift.

It is an MkDocs hook: `docs/configuration.md` holds the marker line, and each build puts the tables in its place.
`python tools/config_reference.py` prints the tables.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

MARKER = "<!-- config-reference -->"


def _attribute_docs(module_file: Path) -> dict[str, dict[str, str]]:
    """Each class's field docstrings: the string literal right under a field's annotated assignment."""
    docs: dict[str, dict[str, str]] = {}
    for node in ast.walk(ast.parse(module_file.read_text("utf-8"))):
        if not isinstance(node, ast.ClassDef):
            continue
        fields: dict[str, str] = {}
        for a, b in zip(node.body, node.body[1:], strict=False):
            is_doc = isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)
            if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and is_doc:
                fields[a.target.id] = " ".join(b.value.value.split())
        docs[node.name] = fields
    return docs


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation)
    text = re.sub(r"\b(typing|pathlib|pydantic\.types)\.", "", text)
    return text.replace("NoneType", "None").replace("'", '"')


def _default(value: Any) -> str:
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Path):
        value = str(value)
    return json.dumps(value, ensure_ascii=False)


def _limits(field: Any) -> str:
    marks = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    out = []
    for m in field.metadata:
        for name, sign in marks.items():
            bound = getattr(m, name, None)
            if bound is not None:
                out.append(f"{sign} {bound}")
    return ", ".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


def render() -> str:
    """The reference as Markdown: one table per section, every key with its type, default, limits and meaning."""
    from memclaw import config as config_module
    from memclaw.config import Config

    docs = _attribute_docs(Path(inspect.getfile(config_module)))
    sections: list[tuple[str, type[BaseModel]]] = [("", Config)]
    out: list[str] = []
    while sections:
        prefix, model = sections.pop(0)
        rows = []
        for name, field in model.model_fields.items():
            key = f"{prefix}{name}"
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                sections.append((f"{key}.", ann))
                continue
            default = field.get_default(call_default_factory=True)
            doc = docs.get(model.__name__, {}).get(name, "")
            rows.append(
                f"| `{key}` | `{_cell(_type_name(ann))}` | `{_cell(_default(default))}` | "
                f"{_cell(_limits(field))} | {_cell(doc)} |"
            )
        if not rows:
            continue
        title = f"`[{prefix.rstrip('.')}]`" if prefix else "Top level"
        out += [f"### {title}", "", "| key | type | default | limits | meaning |", "| --- | --- | --- | --- | --- |"]
        out += [*rows, ""]
        if prefix == "recall.":
            out += _presets()
    return "\n".join(out)


def _presets() -> list[str]:
    """The presets table: each tuning constant's value in every preset, its limits and meaning."""
    from dataclasses import asdict

    from memclaw.config import presets

    docs = _attribute_docs(Path(inspect.getfile(presets))).get("RecallTuning", {})
    names = list(presets.PRESETS)
    values = {name: asdict(tuning) for name, tuning in presets.PRESETS.items()}
    out = ["### Recall presets (`recall.preset`)", ""]
    out += ["| tuning value | " + " | ".join(f"`{n}`" for n in names) + " | limits | meaning |"]
    out += ["| --- | " + "--- | " * len(names) + "--- | --- |"]
    for name, field in presets.RecallTuning.__pydantic_fields__.items():
        cells = " | ".join(f"`{_cell(_default(values[p][name]))}`" for p in names)
        out.append(f"| `{name}` | {cells} | {_cell(_limits(field))} | {_cell(docs.get(name, ''))} |")
    return [*out, ""]


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs hook: the marker line becomes the generated reference."""
    return markdown.replace(MARKER, render()) if MARKER in markdown else markdown


if __name__ == "__main__":
    print(render())
