"""The one helper that turns what a model wrote into JSON: code fences stripped, the JSON value extracted.

Models wrap JSON in ```json fences, put a sentence before it, or leave a trailing comma. `extract_json` tries, in
order: the whole text, the text without fences, the first balanced {...} or [...] value, and that value without
trailing commas. It raises `ValueError` with a short reason when nothing parses (callers turn that into a retry).
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE_RE = re.compile(r"```[A-Za-z0-9_+\-]*[ \t]*\n?(.*?)\n?[ \t]*```", re.S)
_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")


def strip_fences(text: str) -> str:
    """The content of the first fenced block if there is one, else the text; surrounding whitespace removed."""
    text = text.strip()
    m = _FENCE_RE.search(text)
    if m:
        return m.group(1).strip()
    # An unclosed fence
    if text.startswith("```"):
        return text.split("\n", 1)[1].strip() if "\n" in text else ""
    return text


def _balanced(text: str) -> str | None:
    """The first balanced JSON object or array in `text`, respecting strings. A bracket pair that does not match
    ("see [note} ...") is skipped and the search goes on after it; an unterminated value ends the search."""
    for start, ch in enumerate(text):
        if ch not in "{[":
            continue
        stack = []
        in_str = False
        esc = False
        mismatch = False
        for i in range(start, len(text)):
            c = text[i]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
                continue
            if c == '"':
                in_str = True
            elif c in "{[":
                stack.append("}" if c == "{" else "]")
            elif c in "}]":
                if not stack or stack.pop() != c:
                    mismatch = True
                    break
                if not stack:
                    return text[start : i + 1]
        if not mismatch:
            return None
    return None


def extract_json(text: str | None) -> Any:
    """Parse the JSON value a model wrote. Raises ValueError when there is none."""
    if text is None or not text.strip():
        raise ValueError("the reply was empty; expected a JSON object")
    candidates = [text.strip(), strip_fences(text)]
    inner = _balanced(candidates[1]) or _balanced(text)
    if inner:
        candidates.append(inner)
        candidates.append(_TRAILING_COMMA_RE.sub(r"\1", inner))
    err: json.JSONDecodeError | None = None
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError as e:
            err = err or e
    raise ValueError(f"the reply is not valid JSON ({err.msg if err else 'no JSON value found'})")


def extract_object(text: str | None) -> dict[str, Any]:
    """Like `extract_json` but the value must be a JSON object."""
    v = extract_json(text)
    if not isinstance(v, dict):
        raise ValueError(f"expected a JSON object, got {type(v).__name__}")
    return v
