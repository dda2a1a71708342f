"""What a user waits for in a one-shot `memclaw agent -m`, new code against old, in one run.

    .venv/bin/python benchmarks/bench_agent_turn.py --baseline /path/to/old-checkout [--runs 10]

Each run is a fresh `python -m memclaw.cli.main agent -m ...` process against the scripted OpenAI-compatible
server (tests/llm_server.py) answering at once, the first turn of a fresh session, on the demo's memories. Runs
alternate new, old, new, old... so drift on the machine hits both sides alike. The time inside `LLMClient.chat` is
measured in the child (benchmarks/bench_startup.AGENT): with litellm imported in the call it holds the ~2.8 s
import, which is not the model's. p95 of 10 runs is the nearest rank (the slowest but none).
Writes benchmarks/results/agent-turn.md.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_startup import AGENT, MESSAGE, _cpu_name, _dirty, child_env, timed  # noqa: E402


def _p95(values: list[float]) -> float:
    return sorted(values)[math.ceil(0.95 * len(values)) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="an older memclaw checkout (its repository root)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "agent-turn.md")
    ap.add_argument("--baseline-note", default="as it was", help="what the baseline checkout does, for the report")
    args = ap.parse_args()
    from memclaw.runtime import set_offline_env

    set_offline_env()
    from memclaw.workspace import build_demo_workspace
    from tests.llm_server import Scripted, ScriptedLLMServer

    sides = {"new": ROOT, "old": args.baseline.resolve()}
    py = sys.executable
    llm = ScriptedLLMServer().start()
    llm.default = Scripted(message={"role": "assistant", "content": "Pasta with the basil from the balcony."})
    rows: dict[str, list[tuple[float, float, float]]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="memclaw-agent-turn-") as tmp:
        base = Path(tmp)
        demo = build_demo_workspace(base / "demo")
        envs = {}
        for side, checkout in sides.items():
            home = base / f"home-{side}"
            home.mkdir()
            ws = base / f"ws-{side}"
            shutil.copytree(demo.root, ws)
            envs[side] = child_env(checkout, home, {"OPENAI_API_BASE": llm.url, "MEMCLAW_WORKSPACE": str(ws),
                                                    "OPENAI_API_KEY": "sk-bench-not-a-real-key"})  # fmt: skip
        llm_file = base / "llm-seconds"
        argv = [py, "-c", AGENT, "agent", "-m", MESSAGE]
        for side in sides:  # warm-up: the export, the index and the bytecode exist on both sides
            timed(argv, {**envs[side], "MEMCLAW_BENCH_LLM_FILE": str(llm_file)})
        load_start = os.getloadavg()
        for _ in range(args.runs):
            for side in sides:
                llm_file.unlink(missing_ok=True)
                shutil.rmtree(Path(envs[side]["MEMCLAW_WORKSPACE"]) / "sessions", ignore_errors=True)
                wall, cpu = timed(argv, {**envs[side], "MEMCLAW_BENCH_LLM_FILE": str(llm_file)})
                rows[side].append((wall, cpu, float(llm_file.read_text())))
        load_end = os.getloadavg()
    llm.stop()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    lines = [
        "# A one-shot agent turn: what the user waits for, new code against old, one run",
        "",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"Machine: {platform.system()} {platform.release()}, {platform.machine()}, {os.cpu_count()} CPUs "
        f"({_cpu_name()}), Python {platform.python_version()}",
        f"Command: `python benchmarks/bench_agent_turn.py --baseline <old checkout> --runs {args.runs}`",
        f"new: {commit}{' + uncommitted changes' if _dirty(ROOT) else ''}; "
        f"old: the baseline checkout ({args.baseline_note})",
        f"Machine load (1-min load average) at the start / end: {load_start[0]:.2f} / {load_end[0]:.2f} on "
        f"{os.cpu_count()} CPUs (a shared machine: wall times include waiting for a CPU)",
        "",
        f"{args.runs} fresh processes per side, interleaved; the demo's memories; the scripted chat server answers at "
        "once, so the model itself costs nothing here.",
        "",
        "| side | wall p50 s | wall p95 s | CPU p50 s | inside LLMClient.chat p50 s | outside it p50 s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for side, rs in rows.items():
        walls = [r[0] for r in rs]
        lines.append(
            f"| {side} | {statistics.median(walls):.2f} | {_p95(walls):.2f} | {statistics.median(r[1] for r in rs):.2f}"
            f" | {statistics.median(r[2] for r in rs):.2f} | {statistics.median(r[0] - r[2] for r in rs):.2f} |"
        )
    lines += ["", "Raw (wall s, CPU s, inside the call s) per run:", "", "```", repr(rows), "```", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
