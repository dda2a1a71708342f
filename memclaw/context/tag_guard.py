"""The runtime tag is memclaw's: a sender's text never carries it as it is (pure: no I/O). Nor do memories and
conversations quoted into a prompt carry the tags that quote them (`unforgeable`).

memclaw tells the model who is speaking in a message of its own, opened by RUNTIME_TAG, right before the sender's
message. A sender could type that tag themselves to pass for the owner. `own_words` rewrites every opening of a
look-alike tag in a sender's text, so that it reads as what it is: text the sender typed. A look-alike is the
bracket and the words "runtime context" in any case and spacing. Dashes, invisible characters, full-width and
Cyrillic or Greek look-alike letters count too.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

QUOTED = "[typed by the sender, not metadata: "
"""What replaces the opening of a look-alike tag in a sender's text."""

_BRACKETS = "[({<⟦⟨〈《「『【〔〖〘〚⁅❨❪❬❮❰❲❴"
_OPENERS = frozenset(_BRACKETS)
# letters that look like the Latin ones of "runtime context" (after NFKC and casefold)
_LOOKALIKE = str.maketrans("еосітмрхуոսοιτυϲ", "eocitmpxynuoituc")
# the opening of a tag: an opening bracket (or one like it) or the start of a line, then "runtime" and "context"
# with anything but letters and digits before and between them. Found in linear time: first the words (each match
# ends at a letter, so matches cannot share a run), then back over the run of non-word characters before each.
_TAG_WORDS = re.compile(r"runtime[\W_]*context")
_NON_WORD = re.compile(r"[\W_]")


def _leads(skeleton: str) -> list[tuple[int, int]]:
    """(start, end) in `skeleton` of each tag opening: from the first bracket, or line start, of the run of
    non-word characters before "runtime", to "runtime". Each character is looked at a bounded number of times."""
    out = []
    for m in _TAG_WORDS.finditer(skeleton):
        end = m.start()
        run = end
        while run > 0 and _NON_WORD.match(skeleton, run - 1):
            run -= 1
        start = next(
            (i for i in range(run, end + 1) if i == 0 or skeleton[i - 1] == "\n" or skeleton[i : i + 1] in _OPENERS),
            None,
        )
        if start is not None:
            out.append((start, end))
            if start < end and skeleton[end - 1] == "\n":
                # (as a regex scan would: the line "runtime" starts opens a tag of its own)
                out.append((end, end))
    return out


def _skeleton(text: str) -> tuple[str, list[int]]:
    """`text` as matched: NFKC, casefolded, look-alike letters as Latin ones, invisible format characters (zero
    width space and the like) left out; with the index in `text` each character came from."""
    chars: list[str] = []
    where: list[int] = []
    for i, c in enumerate(text):
        if unicodedata.category(c) == "Cf":
            continue
        for n in unicodedata.normalize("NFKC", c).casefold().translate(_LOOKALIKE):
            chars.append(n)
            where.append(i)
    return "".join(chars), where


def _unbracketed(lead: str) -> str:
    return "".join(c for c in lead if not set(unicodedata.normalize("NFKC", c)) & set(_BRACKETS))


def own_words(text: str) -> str:
    """A sender's text as it goes into the prompt, never passing for memclaw's metadata.

    Every opening of a look-alike runtime tag becomes QUOTED, brackets dropped. An opening is its bracket, or the
    start of its line. Any other text is unchanged."""
    skeleton, where = _skeleton(text)
    leads = [(where[start], where[end]) for start, end in _leads(skeleton)]
    if not leads:
        return text
    out: list[str] = []
    last = 0
    for start, end in leads:
        out += [text[last:start], QUOTED, _unbracketed(text[start:end])]
        last = end
    out.append(text[last:])
    return "".join(out)


def own_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a history message, a user's text (a string, or the text parts of a list) through `own_words`."""
    out = dict(message)
    content = out.get("content")
    if out.get("role") != "user":
        return out
    if isinstance(content, str):
        out["content"] = own_words(content)
    elif isinstance(content, list):
        out["content"] = [_own_part(p) for p in content]
    return out


def _own_part(part: Any) -> Any:
    if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return {**part, "text": own_words(part["text"])}
    return part


# an opening angle bracket (or one like it) that starts a tag named `tag`, open or close, in any case and spacing
_ANGLES = "<\uff1c\ufe64\u2039\u2329\u27e8\u3008"
_GAP = r"[\s\u200b-\u200f\u2060\ufeff]*"


def unforgeable(text: str, tag: str) -> str:
    """`text` as it goes inside memclaw's `<tag>...</tag>` quoting.

    Every bracket that would open or close that tag becomes `&lt;`, in any case, spacing or look-alike bracket.
    So the text can neither end the quote nor open another. Everything else reaches the model as written."""
    words = r"[\W_]*".join(re.escape(w) for w in re.split(r"[\W_]+", tag) if w)
    pattern = re.compile(rf"[{_ANGLES}](?={_GAP}/?{_GAP}{words}(?![\w-]))", re.IGNORECASE)
    return pattern.sub("&lt;", text)
