"""The BM25 tokenizer: words, apostrophes, stop words, stemming, numbers, Unicode, fingerprint."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memclaw.index.tokenizer as tokmod
from memclaw.errors import ConfigError
from memclaw.index.tokenizer import Tokenizer

TOK = Tokenizer()
PLAIN = Tokenizer(stem=False)
SHIPPED = Path(tokmod.__file__).resolve().parents[1] / "data" / "stopwords_en.txt"


def test_example_sentence() -> None:
    assert TOK.tokenize("Caroline's dog doesn't like running!") == ["carolin", "dog", "like", "run"]


def test_lowercase_and_punctuation() -> None:
    assert PLAIN.tokenize("HELLO, World!!! (Tea)... foo-bar snake_case") == [
        "hello",
        "world",
        "tea",
        "foo",
        "bar",
        "snake",
        "case",
    ]


@pytest.mark.parametrize(
    "a,b",
    [
        ("don't", "dont"),
        ("don't", "DON\u2019T"),  # typographic apostrophe
        ("o'clock", "oclock"),
        ("Caroline's", "Caroline"),
        ("Caroline\u2019s", "caroline"),
    ],
)
def test_apostrophes_give_the_same_token_with_or_without(a: str, b: str) -> None:
    t = Tokenizer(stopwords=False)
    assert t.tokenize(a) == t.tokenize(b)
    assert TOK.tokenize(a) == TOK.tokenize(b)


def test_possessive_and_clitics() -> None:
    assert PLAIN.tokenize("Caroline's") == ["caroline"]
    assert Tokenizer(stopwords=False, stem=False).tokenize("don't") == ["dont"]
    # A clitic is dropped, not glued on: "we'll" is not the word "well", "I'd" is not "id", "she'd" not "shed".
    assert PLAIN.tokenize("we'll feel well, I'd be ill, she'd paint the shed") == [
        "feel",
        "well",
        "ill",
        "paint",
        "shed",
    ]


def test_stop_word_only_text_gives_empty_list() -> None:
    assert TOK.tokenize("What did they do when it was there?") == []
    assert TOK.tokenize("") == []
    assert TOK.tokenize("   ...!?  ") == []


def test_every_shipped_stop_word_is_dropped() -> None:
    words = [w.strip() for w in SHIPPED.read_text().splitlines() if w.strip() and not w.startswith("#")]
    assert len(words) > 100
    for w in words:
        assert TOK.tokenize(w) == [], w
    # Content words that contraction fragments could collide with stay.
    for w in ("won", "don", "well", "ill", "shed"):
        assert TOK.tokenize(w) != []


def test_stemming_conflates_inflections() -> None:
    assert TOK.tokenize("running runs") == ["run", "run"]
    assert TOK.tokenize("painting paintings painted") == ["paint", "paint", "paint"]
    assert PLAIN.tokenize("running") == ["running"]


def test_numbers_and_years() -> None:
    assert TOK.tokenize("Met on 2023-05-07 at 10:30") == ["met", "2023", "5", "7", "10", "30"]
    assert TOK.tokenize("7 May 2023") == ["7", "may", "2023"]
    assert TOK.tokenize("007 0") == ["7", "0"]
    no_num = Tokenizer(keep_numbers=False)
    assert no_num.tokenize("Met on 2023-05-07 with 3 mp3 files") == ["met", "mp3", "file"]


def test_unicode_words() -> None:
    assert PLAIN.tokenize("Café naïve Straße \ufb01ne") == ["café", "naïve", "strasse", "fine"]
    assert PLAIN.tokenize("Zoë’s café") == ["zoë", "café"]
    # Han and kana have no spaces: one token per character.
    assert TOK.tokenize("東京に行った") == ["東", "京", "に", "行", "っ", "た"]
    assert Tokenizer(split_cjk=False).tokenize("東京に行った") == ["東京に行った"]
    assert PLAIN.tokenize("Привет, мир") == ["привет", "мир"]


def test_min_length() -> None:
    assert Tokenizer(min_length=3, stem=False).tokenize("ox cat 42 x") == ["cat", "42"]


def test_lowercase_off_keeps_case_but_still_drops_stop_words() -> None:
    t = Tokenizer(lowercase=False, stem=False)
    assert t.tokenize("The Paris trip") == ["Paris", "trip"]


def test_custom_stopword_file(tmp_path: Path) -> None:
    f = tmp_path / "stop.txt"
    f.write_text("# mine\npizza\nDon't\n", "utf-8")
    t = Tokenizer(stopwords_file=str(f))
    assert t.tokenize("the pizza dont") == ["the"]
    with pytest.raises(ConfigError, match="stop word list"):
        Tokenizer(stopwords_file=str(tmp_path / "missing.txt"))


def test_unknown_stemmer_language() -> None:
    with pytest.raises(ConfigError, match="unknown stemmer language"):
        Tokenizer(language="klingon")


def test_fingerprint_is_stable_and_tracks_every_setting(tmp_path: Path) -> None:
    fp = Tokenizer().fingerprint
    assert fp == Tokenizer().fingerprint
    assert fp.startswith(f"tok{tokmod.TOKENIZER_VERSION}-")
    variants = [
        Tokenizer(lowercase=False),
        Tokenizer(stem=False),
        Tokenizer(language="porter"),
        Tokenizer(stopwords=False),
        Tokenizer(keep_numbers=False),
        Tokenizer(split_cjk=False),
        Tokenizer(min_length=2),
    ]
    fps = {v.fingerprint for v in variants}
    assert fp not in fps and len(fps) == len(variants)
    # The stop word list's content is part of it.
    f = tmp_path / "stop.txt"
    f.write_text(SHIPPED.read_text())
    assert Tokenizer(stopwords_file=str(f)).fingerprint == fp
    f.write_text(SHIPPED.read_text() + "pizza\n")
    assert Tokenizer(stopwords_file=str(f)).fingerprint != fp


def test_cache_eviction_keeps_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokmod, "_CACHE_MAX", 8)
    t = Tokenizer()
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda running Caroline's"
    first = t.tokenize(text)
    assert t.tokenize(text) == first == Tokenizer().tokenize(text)
    assert len(t._cache) <= 8


_TOKEN_RE = re.compile(r"^[^\W_]+$")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_tokenizes_to_clean_tokens(text: str) -> None:
    tokens = TOK.tokenize(text)
    for t in tokens:
        # letters and digits; case folding may add a combining mark ("ὐ" folds to "υ" + U+0313), never a space,
        # punctuation or "_"
        assert t and _TOKEN_RE.match("".join(c for c in t if not unicodedata.category(c).startswith("M"))), t
    # Documents and queries agree: the same text always gives the same tokens.
    assert Tokenizer().tokenize(text) == tokens


def test_case_folding_that_adds_a_mark_gives_the_same_token_for_documents_and_queries() -> None:
    """Found by hypothesis: "ὐ" (U+1F50) folds to "υ" + a combining mark; the token keeps it, the same both ways."""
    assert TOK.tokenize("ὐ") == Tokenizer().tokenize("ὐ") == ["υ\u0313"]
