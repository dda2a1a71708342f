"""Ingest benchmark: how fast the archive's turns are embedded, and what a year's reindex would take.

    python benchmarks/bench_ingest.py [--texts 3000] [--rounds 2]

A fixed sample of real texts: LongMemEval dev sessions (seeded order), each turn cut by memclaw's own passage code
(memclaw.index.passages) into the texts a sync embeds: passages, heads, and a short turn's context. The variants run
alternately in one process, round after round, so a change in the machine's load hits them alike. Each variant's
vectors are compared with the shipped encoder's: max abs difference and cosine.

Variants: `shipped` is the encoder as it was before this benchmark (batches of 64 texts sorted by characters);
the next sorts by word pieces, as memclaw.embedding._onnx does now; `int8` is the all-MiniLM-L6-v2-int8 model;
"agent replies by head" is memory.agent_reply_vectors = "head" (both give other vectors: recall decisions,
docs/decisions/0043-ingest-speed.md). Turns/s and vectors/s count the sample's turns and stored vectors.
Writes benchmarks/results/ingest.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from memclaw.runtime import set_offline_env

set_offline_env()

import numpy as np  # noqa: E402

from memclaw.config import EmbeddingsConfig  # noqa: E402
from memclaw.embedding.load import load_embedder  # noqa: E402
from memclaw.index.passages import turn_context, unit_vectors  # noqa: E402
from memclaw.markdown.formats import clean_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = next((p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()), ROOT.parent)
LME = DATA / "longmemeval" / "lme-s-dev.json.gz"
YEAR_TURNS = 97_000


def _sessions(seed: int) -> list[list[dict]]:
    """The distinct sessions of the LongMemEval dev file, in a seeded order."""
    raw = json.loads(gzip.decompress(LME.read_bytes()))
    seen: dict[str, list[dict]] = {}
    for q in raw:
        for sid, sess in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True):
            seen.setdefault(sid, sess)
    out = list(seen.values())
    random.Random(seed).shuffle(out)
    return out


def _texts(session: list[dict], *, agent_head: bool) -> tuple[int, int, list[str]]:
    """(turns, stored vectors, texts embedded) of one session as the archive indexes it."""
    turns = [(t["role"], f"{t['role']}: {' '.join(t['content'].split())}") for t in session if t["content"].strip()]
    vectors, texts = 0, []
    for i, (role, text) in enumerate(turns):
        own = unit_vectors(f"u{i}", text, whole=agent_head and role == "assistant")
        vectors += len(own)
        texts += [t for _id, t in own]
        before = turns[i - 1][1] if i else None
        after = turns[i + 1][1] if i + 1 < len(turns) else None
        context = turn_context(before, text, after)
        if context is not None:
            texts.append(context)
    return len(turns), vectors, texts


def _sample(sessions: list[list[dict]], n: int, *, agent_head: bool) -> tuple[int, int, list[str]]:
    """(turns, vectors, texts) of the first sessions whose texts (agent replies as passages) reach `n`."""
    turns = vectors = 0
    texts: list[str] = []
    full = 0
    for s in sessions:
        t, v, x = _texts(s, agent_head=agent_head)
        turns, vectors, texts = turns + t, vectors + v, texts + x
        full += len(_texts(s, agent_head=False)[2])
        if full >= n:
            break
    return turns, vectors, texts


def _shipped(emb, texts: list[str], batch_size: int = 64) -> np.ndarray:
    """The encoder as shipped before: batches cut from the texts sorted by characters, longest first."""
    texts = [clean_text(t) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out = np.zeros((len(texts), emb.dim), np.float32)
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        out[idx] = emb.encode([texts[i] for i in idx], batch_size=batch_size)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=3000, help="about this many texts with replies as passages")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "ingest.md")
    a = ap.parse_args()
    sessions = _sessions(a.seed)
    shapes = {k: _sample(sessions, a.texts, agent_head=k == "head") for k in ("passages", "head")}
    fp32 = load_embedder(EmbeddingsConfig())
    int8 = load_embedder(EmbeddingsConfig(model="all-MiniLM-L6-v2-int8"))
    # name: (setting of memory.agent_reply_vectors, how its texts are embedded)
    variants = {
        "fp32, shipped (batches of 64 by characters)": ("passages", lambda x: _shipped(fp32, x)),
        "fp32 (batches of 64 by word pieces)": ("passages", lambda x: fp32.encode(x, batch_size=64)),
        "int8": ("passages", lambda x: int8.encode(x, batch_size=64)),
        "fp32, agent replies by head": ("head", lambda x: fp32.encode(x, batch_size=64)),
        "int8, agent replies by head": ("head", lambda x: int8.encode(x, batch_size=64)),
    }
    fp32.encode(shapes["passages"][2][:64])
    int8.encode(shapes["passages"][2][:64])
    seconds: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    vectors: dict[str, np.ndarray] = {}
    load_start = os.getloadavg()
    for _ in range(a.rounds):
        for name, (setting, run) in variants.items():
            texts = shapes[setting][2]
            t, c = time.perf_counter(), time.process_time()
            vectors[name] = run(texts)
            seconds[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
            print(name, f"{len(texts) / seconds[name][-1]:.1f} texts/s", flush=True)
    load_end = os.getloadavg()
    refs = {"passages": vectors["fp32, shipped (batches of 64 by characters)"],
            "head": vectors["fp32, agent replies by head"]}  # fmt: skip
    n_texts = len(shapes["passages"][2])
    words = sum(len(t.split()) for t in shapes["passages"][2])
    lines = [
        "# Ingest: texts, turns and vectors a second, and a year's reindex",
        "",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M UTC}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.processor() or platform.platform()}; "
        f"Python {platform.python_version()}",
        f"- load average at start {load_start[0]:.1f}, at end {load_end[0]:.1f}. The machine is shared: the rates are "
        "this load's, the ratios between variants are what holds.",
        f"- command: `python benchmarks/bench_ingest.py --texts {a.texts} --rounds {a.rounds}`",
        f"- sample: the turns of LongMemEval dev sessions (seed {a.seed}) until their texts reach {a.texts}, cut by "
        f"memclaw's passage code: {shapes['passages'][0]} turns, {n_texts} texts of {words / n_texts:.0f} words on "
        "average. Each variant embeds all of them once a round, the variants alternating.",
        "- cosine and max abs diff: against the first fp32 variant of the same setting (the same texts)",
        "",
        "| variant | agent_reply_vectors | vectors/turn | texts/s per round | turns/s | vectors/s | vs shipped "
        "| texts per CPU-second | max abs diff | min cosine | mean cosine |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    base_s = min(seconds["fp32, shipped (batches of 64 by characters)"])
    projections = []
    for name, (setting, _run) in variants.items():
        turns, nvec, texts = shapes[setting]
        best = min(seconds[name])
        cos = (vectors[name] * refs[setting]).sum(axis=1)
        tps = " / ".join(f"{len(texts) / s:.1f}" for s in seconds[name])
        lines.append(
            f"| {name} | {setting} | {nvec / turns:.2f} | {tps} | {turns / best:.2f} | {nvec / best:.1f} "
            f"| {base_s / best:.2f}x | {len(texts) / min(cpu[name]):.1f} "
            f"| {np.abs(vectors[name] - refs[setting]).max():.1e} | {cos.min():.4f} "
            f"| {cos.mean():.5f} |"
        )
        # CPU-seconds a turn costs; two idle cores give two of them a second
        cpu_turn = min(cpu[name]) / turns
        projections.append((name, YEAR_TURNS / (turns / best) / 3600, YEAR_TURNS * cpu_turn / 2 / 60, nvec / turns))
    lines += ["", f"## A year's reindex ({YEAR_TURNS:,} turns): projections, not measurements", ""]
    lines += [
        "At this load (wall time of the sample scaled), and on 2 idle cores (the CPU-seconds the sample took, "
        "two a second; ONNX Runtime's threads spin, so a loaded machine counts some waiting as CPU).",
        "",
        "| variant | vectors/turn | hours at this load | minutes on 2 idle cores | vectors/s on 2 idle cores |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {name} | {vpt:.2f} | {hours:.2f} | {minutes:.0f} | {YEAR_TURNS * vpt / (minutes * 60):.0f} |"
        for name, hours, minutes, vpt in projections
    ]
    lines.append("")
    a.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
