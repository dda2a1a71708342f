"""The lexical tokenizer behind BM25: Unicode words, lowercase, stop words, Snowball stemming.

`Tokenizer().tokenize("Caroline's dog doesn't like running!")` -> `['carolin', 'dog', 'like', 'run']`.

Rules, in order (one place, so documents and queries always agree):
- NFKC normalisation (non-ASCII text only), typographic apostrophes (’ ‘ ʼ ′ `) become `'`, case folding.
- Words are runs of Unicode letters and digits (`_` and punctuation split), joined by inner apostrophes.
  Han and kana characters are one token each (CJK has no spaces).
- Apostrophes: a trailing clitic `'s 'll 'd 're 've 'm` is dropped ("Caroline's" -> "caroline",
  "we'll" -> "we"); any other apostrophe is removed ("don't" -> "dont", "o'clock" -> "oclock"), so a word
  typed with or without its apostrophe gives the same token.
- Numbers: pure digit tokens lose leading zeros ("05" -> "5", so "2023-05-07" meets "7 May 2023");
  `keep_numbers=False` drops them.
- Stop words (the shipped `memclaw/data/stopwords_en.txt`, normalised by the same rules) are dropped before
  stemming; then Snowball stemming (PyStemmer).

A query made only of stop words gives `[]`: recall refuses it as it does an empty query (nothing to search
for; a vector of "the and of" would only bring back an arbitrary memory). The `fingerprint` changes with
any setting, the stop word list or the stemmer version; the index records it and rebuilds when it changes.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memclaw.errors import ConfigError

TOKENIZER_VERSION = 1
"""Bump when the rules above change in a way that changes tokens."""

DEFAULT_STOPWORDS = "stopwords_en.txt"
_CACHE_MAX = 200_000

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "`": "'"})
_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_CJK_RE = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])")
_CLITIC_RE = re.compile(r"'(?:s|ll|d|re|ve|m)$", re.IGNORECASE)


def _normalise_word(word: str) -> str:
    """Apostrophe rules for one lowercased word."""
    if "'" not in word:
        return word
    word = _CLITIC_RE.sub("", word)
    return word.replace("'", "")


def _read_stopwords(path: str | None) -> tuple[str, ...]:
    try:
        if path is None:
            text = (Path(__file__).resolve().parents[1] / "data" / DEFAULT_STOPWORDS).read_text("utf-8")
        else:
            text = Path(path).expanduser().read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        where = path or f"memclaw/data/{DEFAULT_STOPWORDS}"
        raise ConfigError(f"cannot read the stop word list {where}: {e}; fix the path or reinstall memclaw") from e
    words: set[str] = set()
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            w = _normalise_word(unicodedata.normalize("NFKC", line).translate(_APOSTROPHES).casefold())
            if w:
                words.add(w)
    return tuple(sorted(words))


@dataclass(frozen=True)
class Tokenizer:
    """Text -> BM25 tokens. Immutable settings; a per-instance word cache makes repeated words cheap."""

    lowercase: bool = True
    stem: bool = True
    language: str = "english"
    """A Snowball algorithm name as PyStemmer knows it (`Stemmer.algorithms()`)."""
    stopwords: bool = True
    stopwords_file: str | None = None
    """A custom stop word list (one word a line, `#` comments); None: the shipped English list."""
    keep_numbers: bool = True
    split_cjk: bool = True
    min_length: int = 1
    """Tokens shorter than this (after stemming) are dropped; pure numbers are always kept if keep_numbers."""

    _stop: frozenset[str] = field(init=False, repr=False, compare=False)
    _stopword_list: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _stemmer: Any = field(init=False, repr=False, compare=False)
    _stemmer_version: str = field(init=False, repr=False, compare=False)
    _cache: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        words = _read_stopwords(self.stopwords_file) if self.stopwords else ()
        object.__setattr__(self, "_stopword_list", words)
        object.__setattr__(self, "_stop", frozenset(words))
        stemmer = None
        version = "none"
        if self.stem:
            import Stemmer

            try:
                stemmer = Stemmer.Stemmer(self.language)
            except KeyError as e:
                raise ConfigError(
                    f"unknown stemmer language {self.language!r}: use one of {', '.join(Stemmer.algorithms())}"
                ) from e
            version = f"pystemmer-{Stemmer.version()}-{self.language}"
        object.__setattr__(self, "_stemmer", stemmer)
        object.__setattr__(self, "_stemmer_version", version)
        object.__setattr__(self, "_cache", {})

    @property
    def fingerprint(self) -> str:
        """Changes with any setting, the stop word list or the stemmer version."""
        data = {
            "version": TOKENIZER_VERSION,
            "lowercase": self.lowercase,
            "stem": self.stem,
            "language": self.language,
            "keep_numbers": self.keep_numbers,
            "split_cjk": self.split_cjk,
            "min_length": self.min_length,
            "stemmer": self._stemmer_version,
            "stopwords": list(self._stopword_list),
        }
        digest = hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        return f"tok{TOKENIZER_VERSION}-{digest[:16]}"

    def _token(self, raw: str) -> str:
        """One matched word -> its token ('' when dropped). Cached."""
        tok = self._cache.get(raw)
        if tok is not None:
            return tok
        w = raw.casefold() if self.lowercase else raw
        w = _normalise_word(w)
        if w.isdigit():
            w = (w.lstrip("0") or "0") if self.keep_numbers else ""
        elif not w or (w.casefold() if not self.lowercase else w) in self._stop:
            w = ""
        else:
            if self._stemmer is not None:
                w = self._stemmer.stemWord(w)
            if len(w) < self.min_length:
                w = ""
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[raw] = w
        return w

    def tokenize(self, text: str) -> list[str]:
        """The BM25 tokens of `text`, in order, duplicates kept. [] for empty or stop-word-only text."""
        if not text:
            return []
        if not text.isascii():
            text = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)
            if self.split_cjk:
                text = _CJK_RE.sub(r" \1 ", text)
        elif "`" in text:
            text = text.translate(_APOSTROPHES)
        out: list[str] = []
        token = self._token
        for raw in _WORD_RE.findall(text):
            t = token(raw)
            if t:
                out.append(t)
        return out
