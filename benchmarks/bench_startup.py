"""Cold start of memclaw's commands, A/B against an older checkout and against the bare parts, in one run.

    .venv/bin/python benchmarks/bench_startup.py --baseline /path/to/old-checkout [--runs 7]
    # on a shared machine, ahead of its other jobs. Linux schedules each session as a group ("autogroup"), so a
    # process's niceness alone does not do it: run in a session of its own and give that group the niceness too
    sudo setsid sh -c 'echo -20 >/proc/self/autogroup; exec nice -n -20 "$@"' - \
        .venv/bin/python benchmarks/bench_startup.py --baseline /path/to/old-checkout --runs 11

Every measurement is a fresh process (`python -m memclaw.cli.main ...` with PYTHONPATH set to the checkout), run
`--runs` times, interleaved (bare, new, old, new, old, ...), so drift on the machine hits both sides alike; the
figures are medians, with the median CPU time (user + sys) of the child beside each, since on a shared machine the
wall time also holds waiting for a CPU. Each side has its own MEMCLAW_HOME and its own copy of the same workspace
(the demo's memories), indexed and warmed once before timing (the ONNX export, the index, the query cache exist).

- bare parts: python + onnxruntime + tokenizers + numpy + the ONNX model + one query embedded and pooled (what a
  recall cannot avoid), from the current checkout's export.
- `memclaw recall`, `memclaw context`, `memclaw status` on the workspace.
- an agent turn: `memclaw agent -m` against the scripted OpenAI-compatible server (tests/llm_server.py) answering at
  once, each the first turn of a fresh session; the time inside `LLMClient.chat` is measured in the child (the
  console script's code, with chat wrapped by a timer), and "outside the model call" is the wall time minus it. The
  new code imports litellm in the call (the old one did before, to count tokens); `import litellm` alone is
  measured too.
- `memclaw recall` with a provider embedding model (tests/embedding_server.py), the query already asked: the
  server counts requests during the timed runs.

Targets (issue 19): recall <= 1.3x the bare parts, context <= 1.5 s, an agent turn outside the model call <= 2 s.
Writes benchmarks/results/startup.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BARE = r"""
import sys, numpy as np, onnxruntime as ort
from tokenizers import Tokenizer
d = sys.argv[1]
o = ort.SessionOptions(); o.intra_op_num_threads = 2; o.inter_op_num_threads = 1; o.log_severity_level = 3
o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(d + "/model.onnx", o, providers=["CPUExecutionProvider"])
t = Tokenizer.from_file(d + "/tokenizer.json"); t.enable_truncation(256)
e = t.encode("where does my sister live")
ids = np.asarray([e.ids], dtype=np.int64); m = np.asarray([e.attention_mask], dtype=np.int64)
feed = {"input_ids": ids, "attention_mask": m}
if "token_type_ids" in [i.name for i in s.get_inputs()]:
    feed["token_type_ids"] = np.zeros_like(ids)
h = s.run(None, feed)[0]
v = (h * m[..., None]).sum(1) / m.sum(); v /= np.linalg.norm(v)
"""

# The CLI, with the model call timed (written to the file named by MEMCLAW_BENCH_LLM_FILE at exit).
AGENT = r"""
import atexit, os, sys, time
try:
    from memclaw.llm.client import LLMClient  # the pipeline layout (issue 20)
except ImportError:
    from memclaw.llm import LLMClient  # the flat layout before it
inner, spent = LLMClient.chat, [0.0]
async def timed(self, *a, **k):
    t = time.perf_counter()
    try:
        return await inner(self, *a, **k)
    finally:
        spent[0] += time.perf_counter() - t
LLMClient.chat = timed
atexit.register(lambda: open(os.environ["MEMCLAW_BENCH_LLM_FILE"], "w").write(str(spent[0])))
from memclaw.cli import main as cli
sys.argv = ["memclaw", *sys.argv[1:]]
(getattr(cli, "main", None) or cli.run)()  # what the console script calls
"""

QUERY = "where does my sister live"
MESSAGE = "what should I cook tonight?"


def child_env(checkout: Path, home: Path, extra: dict[str, str]) -> dict[str, str]:
    # (bytecode is cached, as in any install: PYTHONDONTWRITEBYTECODE would make every start compile memclaw anew)
    drop = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCLAW_") and k not in drop}
    env.update(
        PYTHONPATH=str(checkout),
        MEMCLAW_HOME=str(home),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini",
        MEMCLAW_AGENT__MAX_RETRIES="0",
        COLUMNS="120",
    )
    env.update(extra)
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one fresh process; fails loudly on a non-zero exit. It runs in
    MEMCLAW_HOME: `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, cwd=env["MEMCLAW_HOME"])
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} failed ({p.returncode}): {p.stderr.strip()[-800:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="an older memclaw checkout (its repository root)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "startup.md")
    args = ap.parse_args()
    from memclaw.runtime import set_offline_env

    set_offline_env()
    from memclaw.embedding._onnx import export_dir_for
    from memclaw.embedding._registry import find_spec, load_registry
    from memclaw.embedding.load import default_cache_dir
    from memclaw.workspace import build_demo_workspace
    from tests.embedding_server import embedding_server
    from tests.llm_server import Scripted, ScriptedLLMServer

    sides = {"new": ROOT, "old": args.baseline.resolve()}
    commits = {
        k: subprocess.run(
            ["git", "-C", str(v), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        for k, v in sides.items()
    }
    spec = find_spec("all-MiniLM-L6-v2", load_registry())
    assert spec is not None
    export = export_dir_for(spec, default_cache_dir())
    py = sys.executable
    llm = ScriptedLLMServer().start()
    llm.default = Scripted(message={"role": "assistant", "content": "Pasta with the basil from the balcony."})
    with tempfile.TemporaryDirectory(prefix="memclaw-startup-") as tmp, embedding_server() as emb:
        base = Path(tmp)
        demo = build_demo_workspace(base / "demo")
        units = _count_units(demo.root)
        envs: dict[str, dict[str, dict[str, str]]] = {}
        for side, checkout in sides.items():
            home = base / f"home-{side}"
            home.mkdir()
            ws, pws = base / f"ws-{side}", base / f"ws-provider-{side}"
            shutil.copytree(demo.root, ws)
            shutil.copytree(demo.root, pws)
            common = {"OPENAI_API_BASE": llm.url, "OPENAI_API_KEY": "sk-bench-not-a-real-key"}
            envs[side] = {
                "local": child_env(checkout, home, {**common, "MEMCLAW_WORKSPACE": str(ws)}),
                "provider": child_env(
                    checkout,
                    home,
                    {
                        **common,
                        "MEMCLAW_WORKSPACE": str(pws),
                        "MEMCLAW_EMBEDDINGS__MODEL": "openai/text-embedding-hashed",
                        "MEMCLAW_EMBEDDINGS__API_BASE": emb.url,
                    },
                ),
            }
        llm_file = base / "llm-seconds"
        cases: list[tuple[str, str, list[str], str]] = []  # (name, side, argv, env kind)
        for side in sides:
            cli = [py, "-m", "memclaw.cli.main"]
            cases += [
                ("recall", side, [*cli, "recall", QUERY], "local"),
                ("context", side, [*cli, "context", MESSAGE], "local"),
                ("status", side, [*cli, "status"], "local"),
                ("agent turn", side, [py, "-c", AGENT, "agent", "-m", MESSAGE], "local"),
                ("recall, provider model, query asked before", side, [*cli, "recall", QUERY], "provider"),
            ]
        # warm-up: exports, indexes, query caches, session files exist on both sides
        for _name, side, argv, kind in cases:
            timed(argv, {**envs[side][kind], "MEMCLAW_BENCH_LLM_FILE": str(llm_file)})
        emb_requests_before = len(emb.requests)
        load_start = os.getloadavg()
        rows: dict[tuple[str, str], list[tuple[float, float, float | None]]] = {}
        bare_env = child_env(ROOT, base / "home-new", {})
        litellm_env = child_env(ROOT, base / "home-new", {})
        for _ in range(args.runs):
            rows.setdefault(("bare parts", "-"), []).append((*timed([py, "-c", BARE, str(export)], bare_env), None))
            rows.setdefault(("import litellm", "-"), []).append(
                (*timed([py, "-c", "import litellm"], litellm_env), None)
            )
            for name, side, argv, kind in sorted(cases, key=lambda c: (c[0], c[1] != "new")):
                llm_file.unlink(missing_ok=True)
                # every turn the first of its session (a growing session would add consolidation calls)
                shutil.rmtree(Path(envs[side][kind]["MEMCLAW_WORKSPACE"]) / "sessions", ignore_errors=True)
                wall, cpu = timed(argv, {**envs[side][kind], "MEMCLAW_BENCH_LLM_FILE": str(llm_file)})
                in_call = float(llm_file.read_text()) if llm_file.exists() else None
                rows.setdefault((name, side), []).append((wall, cpu, in_call))
        load_end = os.getloadavg()
        for side, checkout in sides.items():  # each side really ran its own code
            probe = [py, "-c", "import memclaw, sys; sys.stdout.write(memclaw.__file__)"]
            p = subprocess.run(probe, env=envs[side]["local"], cwd=envs[side]["local"]["MEMCLAW_HOME"],
                               capture_output=True, text=True)  # fmt: skip
            assert Path(p.stdout).resolve().is_relative_to(checkout), (side, p.stdout)
        emb_requests = len(emb.requests) - emb_requests_before
    llm.stop()

    def med(values: list[float]) -> float:
        return statistics.median(values)

    bare = med([r[0] for r in rows[("bare parts", "-")]])
    bare_cpu = med([r[1] for r in rows[("bare parts", "-")]])
    lines = [
        "# Cold start: memclaw's commands against the bare parts, new code against old, one run",
        "",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"Machine: {platform.system()} {platform.release()}, {platform.machine()}, {os.cpu_count()} CPUs "
        f"({_cpu_name()}), Python {platform.python_version()}",
        f"Command: `python benchmarks/bench_startup.py --baseline <checkout of {commits['old']}> --runs {args.runs}`",
        f"new: {commits['new']} (this checkout){' + uncommitted changes' if _dirty(ROOT) else ''}; "
        f"old: {commits['old']}",
        f"Niceness of the runs: {os.nice(0)}, of their scheduling group: {_autogroup_nice()} (negative values: run "
        "ahead of the machine's other jobs, to measure memclaw rather than the queue for a CPU)",
        f"Machine load (1-min load average) at the start / end of the timed runs: {load_start[0]:.2f} / "
        f"{load_end[0]:.2f} on {os.cpu_count()} CPUs (a shared machine: wall times include waiting for a CPU; the CPU "
        "column does not)",
        "",
        f"Each figure: the median of {args.runs} fresh processes, interleaved. Workspace: the demo's memories "
        f"({units} units), embedded Chroma, all-MiniLM-L6-v2 through ONNX Runtime. The provider "
        "model is the scripted embedding server on loopback; the LLM is the scripted chat server, answering at once.",
        "",
        "| command | side | wall s (median) | CPU s (median) | x bare parts (wall) | inside the model call s | "
        "outside it s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (name, side), rs in rows.items():
        wall, cpu = med([r[0] for r in rs]), med([r[1] for r in rs])
        calls = [r[2] for r in rs if r[2] is not None]
        inside = f"{med(calls):.2f}" if calls else ""
        outside = f"{med([r[0] - r[2] for r in rs if r[2] is not None]):.2f}" if calls else ""
        lines.append(f"| {name} | {side} | {wall:.2f} | {cpu:.2f} | {wall / bare:.2f} | {inside} | {outside} |")
    lines += ["", f"Provider recall, query asked before: {emb_requests} request(s) to the embedding server during "
              f"the {2 * args.runs} timed runs (both sides).", ""]  # fmt: skip
    new = {name: rs for (name, side), rs in rows.items() if side == "new"}
    recall = med([r[0] for r in new["recall"]])
    recall_cpu = med([r[1] for r in new["recall"]])
    context = med([r[0] for r in new["context"]])
    outside = med([r[0] - r[2] for r in new["agent turn"] if r[2] is not None])
    lines += [
        "Targets (new code):",
        "",
        f"- cold `memclaw recall` <= 1.3x the bare parts: {recall / bare:.2f}x wall ({recall:.2f} s against "
        f"{bare:.2f} s), {recall_cpu / bare_cpu:.2f}x CPU: **{'PASS' if recall / bare <= 1.3 else 'FAIL'}**",
        f"- cold `memclaw context` <= 1.5 s: {context:.2f} s: **{'PASS' if context <= 1.5 else 'FAIL'}**",
        f"- an agent turn outside the model call <= 2 s: {outside:.2f} s: **{'PASS' if outside <= 2 else 'FAIL'}**",
        "",
        "Raw (wall s, CPU s, inside the model call s) per run:",
        "",
        "```json",
        json.dumps({f"{n} | {s}": rs for (n, s), rs in rows.items()}, indent=None),
        "```",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _autogroup_nice() -> str:
    """The niceness of this process's scheduling group (/proc/self/autogroup), which weighs it against the other
    sessions' processes; "-" where the kernel has none."""
    try:
        return Path("/proc/self/autogroup").read_text().split("nice")[1].strip()
    except (OSError, IndexError):
        return "-"


def _dirty(repo: Path) -> bool:
    p = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True)
    return bool(p.stdout.strip())


def _count_units(root: Path) -> int:
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    ws = Workspace(root)
    svc = MemoryService(ws, Config(workspace=root))
    return sum(len(svc.list_units(s)) for s in ws.scopes())


if __name__ == "__main__":
    main()
