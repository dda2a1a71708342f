"""Token counts without litellm (issue 19, item 5): memclaw.llm.tokens counts with tiktoken on litellm's bundled BPE
files, and every count must equal litellm's `token_counter` (the prompt budget and the benchmarks' budgeted recall
figures depend on it). Compared here on the repository's own texts, edge cases and random text, both families."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memclaw.llm import tokens
from memclaw.llm.client import litellm_module

ROOT = Path(__file__).resolve().parents[2]
MODELS = {"o200k": "gpt-4o", "cl100k": "gpt-4"}  # what litellm counts each family as


def litellm_count(family: str, text: str) -> int:
    return int(litellm_module().token_counter(model=MODELS[family], text=text))


def sample_texts() -> list[str]:
    texts: list[str] = []
    for path in sorted([*ROOT.glob("*.md"), *ROOT.glob("memclaw/prompts/*.md"), *ROOT.glob("skills/**/*.md")]):
        body = path.read_text("utf-8")
        texts.append(body)  # whole files: several 1024-character chunks each
        texts += [p for p in body.split("\n\n") if p.strip()]
    texts += [
        "I am allergic to penicillin (2023-05-08)",
        "Der Zug nach München fährt um 14:30 ab; naïve café ☕ 東京で寿司を食べた 🍣🍣",
        "<|endoftext|> and <|fim_prefix|> are plain text here",
        "a" * 5000,
        "." * 3000 + " " * 2100 + "\n" * 7,
        "x" * 1023 + "é" + "y" * 1025,  # a multi-byte character right at a chunk boundary
        "\ud800 lone surrogate",
        "",
    ]
    return texts


def test_the_bpe_files_litellm_ships_are_used():
    assert tokens.encoding("o200k") is not None and tokens.encoding("cl100k") is not None


def test_counts_equal_litellms_on_the_repository_texts():
    texts = sample_texts()
    assert len(texts) > 100 and sum(map(len, texts)) > 50_000
    for family, model in MODELS.items():
        mine = [tokens.count_tokens(t, model) for t in texts]
        theirs = [litellm_count(family, t) if t else 0 for t in texts]
        assert mine == theirs, family


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=1, max_size=3000))
def test_counts_equal_litellms_on_random_text(text):
    for family, model in MODELS.items():
        assert tokens.counter_for(model)(text) == litellm_count(family, text)


def test_a_text_above_the_exact_limit_is_extrapolated_as_litellm_does():
    text = ("The quarterly planning meeting covered budgets, hiring and the roadmap. " * 60_000)[:4_300_001]
    assert len(text) > tokens.MAX_EXACT_CHARS
    assert tokens.counter_for("gpt-4")(text) == litellm_count("cl100k", text)


def test_counting_does_not_import_litellm():
    code = (
        "import sys; from memclaw.llm.tokens import count_tokens; "
        "n = count_tokens('hello world', 'openai/gpt-4o-mini'); "
        "assert 'litellm' not in sys.modules, 'litellm imported'; print(n)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) == litellm_count("o200k", "hello world")
