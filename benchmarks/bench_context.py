"""ContextBuilder benchmark: building the context for one reply, recall excluded, warm caches.

    python benchmarks/bench_context.py [--iterations N]

A typical workspace: 5 bootstrap files, 20 skills (one always on), 50 history turns (some with tool calls),
6 recalled memories handed in by a recall seam that returns precomputed hits (so recall time is excluded but
formatting and budgeting of memories are included). Target: p95 <= 10 ms. Writes benchmarks/results/context.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from memclaw.runtime import set_offline_env  # noqa: E402

set_offline_env()

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memclaw.config import Config  # noqa: E402
from memclaw.context.builder import build_messages  # noqa: E402
from memclaw.context.senders import Sender  # noqa: E402
from memclaw.markdown.units import MemoryUnit, unit_id  # noqa: E402
from memclaw.recall.results import RecallHit, Signal  # noqa: E402

TARGET_MS = 10.0


def para(i: int, words: int = 40) -> str:
    return " ".join(f"word{i}_{j}" for j in range(words))


def make_workspace(root: Path) -> tuple[Path, Path]:
    root.mkdir(parents=True, exist_ok=True)
    for name in ("AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md"):
        body = "\n\n".join(para(i) for i in range(8))
        (root / name).write_text(f"# {name}\n\n- Name: Clawdia\n\n{body}\n", encoding="utf-8")
    bundled = root.parent / "bundled-skills"
    for i in range(20):
        d = bundled / f"skill-{i:02d}"
        d.mkdir(parents=True, exist_ok=True)
        fm = f"name: skill-{i:02d}\ndescription: Skill number {i} does useful thing {i}."
        if i == 0:
            fm += "\nalways: true"
        if i % 5 == 1:
            fm += "\nrequires:\n  bins: [sh]\n  env: [HOME]"
        (d / "SKILL.md").write_text(f"---\n{fm}\n---\n\n{para(i, 120)}\n", encoding="utf-8")
    (root / "skills").mkdir(exist_ok=True)
    return root, bundled


def make_history(turns: int = 50) -> list[dict]:
    out: list[dict] = []
    for i in range(turns):
        out.append({"role": "user", "content": f"Question {i}: " + para(i, 25)})
        if i % 5 == 0:
            cid = f"call_{i}"
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": '{"p":"x"}'}}
                    ],
                }
            )
            out.append({"role": "tool", "tool_call_id": cid, "content": para(i, 60)})
        out.append({"role": "assistant", "content": "Answer: " + para(i, 30)})
    return out


def make_hits(n: int = 6) -> list[RecallHit]:
    hits = []
    for i in range(n):
        text = f"Fact {i}: " + para(i, 15)
        u = MemoryUnit(unit_id("owner", "memory/MEMORY.md", "fact", text), "fact", "owner", "memory/MEMORY.md", i, text)
        hits.append(RecallHit(unit=u, score=1.0 / (i + 1), bm25=Signal(i + 1, 1.0), vector=Signal(i + 1, 0.5)))
    return hits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=500)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "context.md")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        ws, bundled = make_workspace(Path(tmp) / "ws")
        history = make_history()
        hits = make_hits()

        def recall(query: str, *, scope: str, k: int) -> list[RecallHit]:
            return hits[:k]

        cfg = Config()
        sender = Sender.cli("Maya")
        kw = dict(config=cfg, workspace=ws, sender=sender, history=history, recall=recall, bundled_skills=bundled)

        t0 = time.perf_counter()
        first = build_messages(message="What did we decide about the trip?", **kw)
        cold_ms = (time.perf_counter() - t0) * 1000  # includes importing litellm and loading the encoding
        for _ in range(20):
            build_messages(message="What did we decide about the trip?", **kw)

        times = []
        for i in range(args.iterations):
            msg = f"What did we decide about the trip, take {i % 10}?"  # a few distinct messages, like real use
            t = time.perf_counter()
            build_messages(message=msg, **kw)
            times.append((time.perf_counter() - t) * 1000)

    times.sort()
    p50 = statistics.median(times)
    p95 = times[int(0.95 * (len(times) - 1))]
    verdict = "PASS" if p95 <= TARGET_MS else "FAIL"
    machine = f"{platform.system()} {platform.release()}, {platform.machine()}, {os.cpu_count()} CPUs, Python "
    machine += platform.python_version()
    report = f"""# ContextBuilder benchmark

Date: {datetime.now(UTC):%Y-%m-%d %H:%M UTC}
Machine: {machine}
Command: `python benchmarks/bench_context.py --iterations {args.iterations}`

Workload: 5 bootstrap files (~8 paragraphs each), 20 skills (1 always on, 4 with requirements), 50 history turns
(10 with a tool call and its result, {len(history)} messages), 6 recalled memories from a precomputed recall seam
(recall itself excluded). Model {cfg.agent.model}; the assembled context is {first.total_tokens} tokens.
Warm caches (bootstrap files and skills by file signature, token counts by text); 20 warm-up builds.

| metric | value |
| --- | --- |
| p50 | {p50:.2f} ms |
| p95 | {p95:.2f} ms |
| max | {times[-1]:.2f} ms |
| first build (cold: litellm import, encoding load) | {cold_ms:.0f} ms |
| target p95 | <= {TARGET_MS:.0f} ms: **{verdict}** |
"""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(report)


if __name__ == "__main__":
    main()
