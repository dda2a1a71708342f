"""Replay issue 38's reproductions against a checkout and count what is still wrong.

Usage: python benchmarks/lab/replay_issue38.py [--repo CHECKOUT] [--data DIR] [--json OUT]

CHECKOUT is a memclaw checkout with its own `.venv` (default: this one). Every reproduction runs the console
module `python -m memclaw.cli.main` in a fresh MEMCLAW_HOME, against a scripted LLM server on 127.0.0.1 where a
model is needed. Each check prints one row: the item, its kind (silent wrong result, or misleading message), the
verdict, and the evidence. The counts at the end are the issue's "before and after".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from calendar import month_name
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2]))

from tests.llm_server import ScriptedLLMServer  # noqa: E402


@dataclass
class Row:
    item: str
    kind: str
    wrong: bool
    evidence: str


class Runner:
    """Runs memclaw commands of one checkout in one fresh home."""

    def __init__(self, repo: Path, home: Path, api_base: str | None = None) -> None:
        self.repo = repo
        self.home = home
        self.python = repo / ".venv" / "bin" / "python"
        self.env = dict(
            os.environ,
            MEMCLAW_HOME=str(home),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENAI_API_KEY="sk-replay-not-a-real-key",
            COLUMNS="200",
        )
        if api_base:
            self.env["MEMCLAW_AGENT__API_BASE"] = api_base

    def run(self, *args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.python), "-m", "memclaw.cli.main", *args]
        return subprocess.run(
            cmd, cwd=self.repo, env=self.env, input=stdin, capture_output=True, text=True, timeout=timeout
        )

    def shell(self, line: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        memclaw = f"{self.python} -m memclaw.cli.main"
        return subprocess.run(
            line.replace("MEMCLAW", memclaw),
            shell=True,
            executable="/bin/bash",
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"


def fresh(repo: Path, api_base: str | None = None) -> Runner:
    runner = Runner(repo, Path(tempfile.mkdtemp(prefix="replay38-")), api_base)
    out = runner.run("onboard")
    if out.returncode != 0:
        raise SystemExit(f"onboard failed: {out.stderr.strip()}")
    return runner


def recall_json(runner: Runner, query: str, *extra: str) -> list[dict]:
    out = runner.run("recall", query, "--json", *extra)
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        return []


def check_forget(repo: Path) -> Row:
    r = fresh(repo)
    added = r.run("memory", "add", "My passport expires on 3 March 2031", "--json")
    fact_id = json.loads(added.stdout)["id"] if added.stdout.strip().startswith("{") else None
    if fact_id is None:
        fact_id = re.search(r"\b([0-9a-f]{12})\b", added.stdout + added.stderr).group(1)
    history = r.workspace / "memory" / "HISTORY.md"
    history.write_text(
        history.read_text()
        + "\n[2026-11-20 10:00] Talked about travel plans. The owner's passport expires on 3 March 2031.\n"
    )
    r.run("memory", "sync")
    forgot = r.run("memory", "forget", fact_id)
    hits = recall_json(r, "when does my passport expire")
    context = r.run("context", "when does my passport expire").stdout
    in_hits = [h for h in hits if "2031" in h.get("text", "")]
    wrong = bool(in_hits) or "3 March 2031" in context
    said = "also mentioned" in (forgot.stdout + forgot.stderr)
    return Row(
        "1 forget hides restatements",
        "silent",
        wrong,
        f"hits restating: {len(in_hits)}; in context: {'3 March 2031' in context}; forget names the entry: {said}",
    )


def check_yearless(repo: Path) -> Row:
    r = fresh(repo)
    r.run("memory", "add", "My dentist appointment is tomorrow")
    r.run("memory", "add", "I like green tea")
    tomorrow = date.today() + timedelta(days=1)
    query = f"what's on {tomorrow.day} {month_name[tomorrow.month]}?"
    text = r.run("recall", query).stdout
    hits = recall_json(r, query)
    stamped = re.search(r"stamped (\d{4})-", text)
    read_year = int(stamped.group(1)) if stamped else None
    top = hits[0]["text"] if hits else ""
    lifted = bool(hits and hits[0].get("boosts", {}).get("date"))
    wrong = read_year != tomorrow.year or "dentist" not in top or not lifted
    rel = r.run("recall", "what's on tomorrow?", "--json")
    rel_hits = json.loads(rel.stdout) if rel.stdout.strip().startswith("[") else []
    rel_lifted = bool(rel_hits and "dentist" in rel_hits[0]["text"] and rel_hits[0].get("boosts", {}).get("date"))
    wrong = wrong or not rel_lifted
    return Row(
        "2 yearless and relative dates",
        "silent",
        wrong,
        f"{query!r} read as year {read_year}; top lifted: {lifted}; 'tomorrow' lifts the dentist: {rel_lifted}",
    )


def check_tonight(repo: Path) -> Row:
    r = fresh(repo)
    for fact in ["I play the cello", "My sister Lena lives in Porto", "I work at a bakery", "My cat is called Miso"]:
        r.run("memory", "add", fact)
    hits = recall_json(r, "what should I cook tonight")
    lifted = [h["text"] for h in hits if h.get("boosts", {}).get("date")]
    return Row("3 'tonight' lifts what was learned today", "silent", bool(lifted), f"date-lifted hits: {len(lifted)}")


def check_plain_date(repo: Path) -> Row:
    r = fresh(repo)
    day = date.today() + timedelta(days=4)
    r.run("memory", "add", f"Meeting with Ana on {day.isoformat()}")
    for fact in ["I play the cello", "My sister Lena lives in Porto", "I work at a bakery"]:
        r.run("memory", "add", fact)
    hits = recall_json(r, f"what do I have on {day.isoformat()}")
    top = hits[0] if hits else {}
    lifted = bool(top.get("boosts", {}).get("date")) and "Ana" in top.get("text", "")
    return Row(
        "4 a date in a memory's words", "silent", not lifted, f"top: {top.get('text', '')[:50]!r}, lifted: {lifted}"
    )


def check_secrets(repo: Path) -> Row:
    secret_text = "my password is hunter2 and my key is sk-proj-abcdefghijklmnopqrstuvwx1234"
    server = ScriptedLLMServer().start()
    try:
        r = fresh(repo, api_base=server.url)
        r.run("memory", "add", f"Note: {secret_text}")
        server.reply("Noted.")
        r.run("agent", "-m", secret_text)
        consolidation = {
            "history_entry": f"[2026-11-29 10:00] The owner said {secret_text}.",
            "facts": [
                {"op": "add", "text": "The owner's password is hunter2; key sk-proj-abcdefghijklmnopqrstuvwx1234"}
            ],
        }
        server.default = None
        server.reply(json.dumps(consolidation), times=3)
        r.run("agent", "-m", "/new")
    finally:
        server.stop()
    memory = (r.workspace / "memory" / "MEMORY.md").read_text()
    history = (r.workspace / "memory" / "HISTORY.md").read_text()
    leaks = [
        name
        for name, text in (("MEMORY.md", memory), ("HISTORY.md", history))
        if "hunter2" in text or "sk-proj-abc" in text
    ]
    return Row(
        "5 secrets masked in MEMORY.md and HISTORY.md", "silent", bool(leaks), f"files holding a secret: {leaks}"
    )


FACTS = 6000
"""Facts the interrupted sync has to embed: more than 8 s of work on 2 cores."""


def check_interrupt(repo: Path) -> Row:
    r = fresh(repo)
    facts = "\n".join(
        f"- Fact number {i}: the {i}th item of the inventory is a box of {i} screws" for i in range(FACTS)
    )
    memory = r.workspace / "memory" / "MEMORY.md"
    memory.write_text(memory.read_text() + "\n## Inventory\n" + facts + "\n")
    proc = subprocess.Popen(
        [str(r.python), "-m", "memclaw.cli.main", "memory", "sync"],
        cwd=r.repo,
        env=r.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(8)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    said = err.strip().splitlines()[-1] if err.strip() else ""
    second = r.run("memory", "sync", "--json")
    try:
        rows = json.loads(second.stdout)
    except json.JSONDecodeError:
        rows = []
    again = _embedded_again(rows)
    return Row(
        "6 Ctrl-C in a sync keeps what was embedded",
        "misleading",
        again >= FACTS,
        f"said {said!r}; the next sync embedded {again} of {FACTS}",
    )


def _embedded_again(rows: list[dict]) -> int:
    """Vectors the next sync embedded: its `embedded` count where it reports one, else the units it added."""
    total = 0
    for row in rows:
        value = row.get("embedded", row.get("added"))
        if isinstance(value, int):
            total += value
    return total


def check_connection(repo: Path) -> Row:
    r = fresh(repo, api_base="http://127.0.0.1:9/v1")
    out = r.run("agent", "-m", "hello", timeout=180)
    text = out.stderr.strip()
    wrong = "500" in text or "InternalServerError" in text
    return Row("7 a refused connection is not a 500", "misleading", wrong, f"exit {out.returncode}: {text[:140]!r}")


def check_list_pipe(repo: Path) -> Row:
    r = fresh(repo)
    memory = r.workspace / "memory" / "MEMORY.md"
    facts = "\n".join(f"- Item {i} is stored in box {i}" for i in range(400))
    memory.write_text(memory.read_text() + "\n## Boxes\n" + facts + "\n")
    r.run("memory", "sync")
    out = r.shell("MEMCLAW memory list | head -c 100 >/dev/null; echo ${PIPESTATUS[0]}")
    code = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "?"
    return Row("8 memory list | head exits 141", "misleading", code != "141", f"exit {code}")


def check_demo_hint(repo: Path) -> Row:
    r = fresh(repo)
    demo = Path.home() / ".memclaw" / "demo"
    out = r.run("recall", "what am I allergic to", "-w", str(demo))
    text = out.stderr.strip()
    wrong = "memclaw demo" not in text
    return Row("9 the demo path names `memclaw demo`", "misleading", wrong, f"{text[:160]!r}")


def check_bench_perf(repo: Path) -> Row:
    r = fresh(repo)
    out_dir = Path(tempfile.mkdtemp(prefix="replay38-perf-"))
    out = r.run("bench", "perf", "--sizes", "300", "--out", str(out_dir), timeout=900)
    pngs = list(out_dir.glob("*.png"))
    has_table = len(out.stdout.strip().splitlines()) > 2
    return Row(
        "10a bench perf prints a table and writes its PNG",
        "misleading",
        not (has_table and pngs),
        f"stdout lines: {len(out.stdout.strip().splitlines())}; PNGs: {len(pngs)}",
    )


def check_bench_lme(repo: Path, data: Path) -> Row:
    r = fresh(repo)
    out_dir = Path(tempfile.mkdtemp(prefix="replay38-lme-"))
    out = r.run(
        "bench",
        "longmemeval",
        "--data",
        str(data / "longmemeval" / "lme-s-dev.json.gz"),
        "--limit",
        "5",
        "--systems",
        "hybrid",
        "--out",
        str(out_dir),
        timeout=1800,
    )
    text = out.stdout + out.stderr
    titled = re.search(r"(\d+) questions", text)
    skipped_said = "skipped" in text
    wrong = not skipped_said or (titled is not None and titled.group(1) != "5" and "asked" not in text)
    return Row(
        "10b bench longmemeval says what it skipped",
        "misleading",
        wrong,
        f"title: {titled.group(0) if titled else None!r}; skipped said on the terminal: {skipped_said}",
    )


def check_turn_time(repo: Path) -> Row:
    server = ScriptedLLMServer().start()
    try:
        r = fresh(repo, api_base=server.url)
        times = []
        for _ in range(3):
            server.reply("Hi.")
            t0 = time.perf_counter()
            r.run("agent", "-m", "hello")
            times.append(time.perf_counter() - t0)
    finally:
        server.stop()
    times.sort()
    return Row(
        "11 agent -m against an instant server (median of 3)",
        "misleading",
        times[1] > 3.0,
        f"{times[1]:.2f} s (runs: {', '.join(f'{t:.2f}' for t in times)})",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE.parents[2])
    parser.add_argument("--data", type=Path, default=HERE.parents[3] / "shared" / "data")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", help="comma-separated check names")
    args = parser.parse_args()
    checks = {
        "forget": lambda: check_forget(args.repo),
        "yearless": lambda: check_yearless(args.repo),
        "tonight": lambda: check_tonight(args.repo),
        "plain_date": lambda: check_plain_date(args.repo),
        "secrets": lambda: check_secrets(args.repo),
        "interrupt": lambda: check_interrupt(args.repo),
        "connection": lambda: check_connection(args.repo),
        "list_pipe": lambda: check_list_pipe(args.repo),
        "demo_hint": lambda: check_demo_hint(args.repo),
        "bench_perf": lambda: check_bench_perf(args.repo),
        "bench_lme": lambda: check_bench_lme(args.repo, args.data),
        "turn_time": lambda: check_turn_time(args.repo),
    }
    names = args.only.split(",") if args.only else list(checks)
    rows: list[Row] = []
    for name in names:
        try:
            row = checks[name]()
        except Exception as e:  # a check that cannot run is reported, not hidden
            row = Row(name, "error", True, f"{type(e).__name__}: {e}")
        rows.append(row)
        print(f"{'WRONG' if row.wrong else 'ok   '}  {row.kind:10}  {row.item:50}  {row.evidence}", flush=True)
    silent = sum(r.wrong for r in rows if r.kind == "silent")
    misleading = sum(r.wrong for r in rows if r.kind == "misleading")
    print(f"silent wrong results: {silent}; misleading messages: {misleading}")
    if args.json:
        args.json.write_text(
            json.dumps({"rows": [asdict(r) for r in rows], "silent": silent, "misleading": misleading}, indent=2)
        )


if __name__ == "__main__":
    main()
