"""One consolidation's prompt tokens and wall time as MEMORY.md grows, before and after the bounded prompt (issue 41.3).

    python benchmarks/bench_consolidation.py [--sizes 100,1000,10000] [--before-ref main] [--repeats 3]

For each size, a workspace whose MEMORY.md holds that many facts (tests/agent/many_facts.py) is written and synced
once. Then each code version consolidates a three-turn conversation ("I moved from Lisbon to Porto ...") in a fresh
copy of it, in its own process. The model is the scripted server of tests/llm_server.py on loopback, answering at
once: the wall time is memclaw's own work (reading the facts, recalling, the HTTP call, writing, the index sync),
not a model's. The prompt tokens are counted on the request the server received (memclaw.llm.tokens).

"before" is the code of `--before-ref`, taken with `git archive` into a temporary folder; "after" is this checkout.
The index is built with the "hash-test" embedder: the bundled model took 465 s to embed 10,000 facts on the
2-core machine of the committed run. Writes benchmarks/results/consolidation.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "openai/gpt-4o-mini"
OWN = {
    "About me": ["Lives in Lisbon, in a flat near the cathedral", "Allergic to penicillin"],
    "Work": ["Works at Solaris Energy as a battery engineer"],
}
TURNS = [
    ("I moved from Lisbon to Porto last month", "Congratulations on the move!"),
    ("The new flat is near the river", "That sounds lovely."),
    ("Work is the same as before", "Good to hear."),
]


def config(root: Path):  # noqa: ANN201 - a memclaw Config of whichever code version runs
    from memclaw.config import Config, EmbeddingsConfig

    cfg = Config(workspace=root)
    cfg.embeddings = EmbeddingsConfig(model="hash-test")
    cfg.agent.model = MODEL
    cfg.agent.max_retries = 0
    return cfg


def build(root: Path, n: int) -> float:
    """Write and sync a workspace of n facts (plus OWN); the sync's seconds."""
    sys.path.insert(0, str(ROOT))
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace
    from tests.agent.many_facts import write_memory

    write_memory(root, n - sum(len(v) for v in OWN.values()), OWN)
    mem = MemoryService(Workspace(root), config(root))
    t = time.perf_counter()
    mem.sync()
    mem.close()
    return time.perf_counter() - t


def worker(root: Path) -> dict[str, float]:
    """Consolidate the conversation once in `root` with the memclaw on sys.path; tokens and seconds."""
    from memclaw.agent.consolidate import Consolidator
    from memclaw.agent.sessions import SessionStore
    from memclaw.llm.client import LLMClient, litellm_module
    from memclaw.llm.tokens import count_messages
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace
    from tests.llm_server import ScriptedLLMServer

    server = ScriptedLLMServer().start()
    os.environ["OPENAI_API_BASE"] = server.url
    os.environ["OPENAI_API_KEY"] = "sk-bench-not-a-real-key"
    server.reply(json.dumps({"history_entry": "Moved from Lisbon to Porto.", "facts": []}))
    cfg = config(root)
    mem = MemoryService(Workspace(root), cfg)
    mem.sync()
    sessions = SessionStore(root / "sessions")
    session = sessions.load("cli", "cli")
    for i, (said, answer) in enumerate(TURNS):
        ts = f"2026-11-2{i}T10:00:00+00:00"
        sessions.append(session, {"role": "user", "content": said, "ts": ts}, {"role": "assistant", "content": answer})
    consolidator = Consolidator(cfg, LLMClient(cfg), mem, sessions)
    # one-time costs of a process are not a consolidation's: litellm's import, the token encoding, the store
    litellm_module()
    count_messages([{"role": "user", "content": "warm"}], MODEL)
    mem.store.count("owner")
    t = time.perf_counter()
    report = asyncio.run(consolidator.consolidate(session, everything=True))
    seconds = time.perf_counter() - t
    assert report.ok, report.error
    tokens = count_messages(server.requests[0]["messages"], MODEL)
    mem.close()
    server.stop()
    import memclaw

    return {"tokens": tokens, "seconds": seconds, "code": str(Path(memclaw.__file__).parents[1])}


def run_worker(code: Path, root: Path, home: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(code), MEMCLAW_HOME=str(home))
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", str(root)],
        env=env, cwd=code, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"the worker failed ({code}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def old_code(ref: str, into: Path) -> Path:
    """The memclaw package and the scripted server of git ref `ref`, in a folder of their own."""
    into.mkdir(parents=True)
    tar = subprocess.run(
        ["git", "archive", ref, "memclaw", "tests/__init__.py", "tests/llm_server.py"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into


def machine() -> str:
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in ln),
        platform.processor() or "unknown CPU",
    )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, load average {load}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--before-ref", default="main")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "consolidation.md")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, os.getcwd())
        print(json.dumps(worker(args.worker)))
        return
    from memclaw.runtime import set_offline_env

    set_offline_env()
    tmp = Path(tempfile.mkdtemp(prefix="bench-consolidation-"))
    os.environ["MEMCLAW_HOME"] = str(tmp / "home")
    codes = {"before": old_code(args.before_ref, tmp / "before"), "after": ROOT}
    ref, before = (
        subprocess.run(["git", "rev-parse", "--short", r], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        for r in ("HEAD", args.before_ref)
    )
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        base = tmp / f"n{n}"
        synced = build(base, n)
        row = {"facts": n, "sync_s": synced}
        for name, code in codes.items():
            runs = []
            for r in range(args.repeats):
                copy = tmp / f"run-{n}-{name}-{r}"
                shutil.copytree(base, copy)
                got = run_worker(code, copy, tmp / "home")
                assert Path(got["code"]).resolve() == code.resolve(), got
                runs.append(got)
                shutil.rmtree(copy)
            row[f"{name}_tokens"] = runs[0]["tokens"]
            row[f"{name}_s"] = statistics.median(x["seconds"] for x in runs)
        print(json.dumps(row), flush=True)
        rows.append(row)
    lines = [
        "# One consolidation as MEMORY.md grows: prompt tokens and wall time, before and after",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `benchmarks/bench_consolidation.py`.",
        f"Before: `{args.before_ref}` (`{before}`); after: `{ref}` (this checkout, with its uncommitted changes).",
        f"Machine: {machine()}; shared with other jobs.",
        f"Each time is the median of {args.repeats} runs, each in a fresh copy of the workspace.",
        "The model is the scripted server on loopback: a real model adds its own time, which grows with the prompt.",
        "",
        "| facts | prompt tokens before | prompt tokens after | seconds before | seconds after |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['facts']:,} | {r['before_tokens']:,} | {r['after_tokens']:,} | {r['before_s']:.2f} | "
            f"{r['after_s']:.2f} |"
        )
    args.out.write_text("\n".join(lines) + "\n", "utf-8")
    print(args.out.read_text())
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
