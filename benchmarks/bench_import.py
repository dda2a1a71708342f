"""A year of ChatGPT history imported: a synthetic export the size of a heavy user's (~2,000 conversations), timed
through `memclaw import chatgpt` in a fresh workspace, then once more (the idempotent re-run).

    PYTHONPATH=. nice -n 10 .venv/bin/python benchmarks/bench_import.py --workdir WORKDIR

The export is seeded and written in the shape of a real `conversations.json` (a `mapping` tree per conversation,
epoch `create_time`s, a regenerated answer now and then, hidden system messages). Conversations are spread over
the 365 days before 2026-01-01, 2 to 40 messages each, user turns of 8-60 words and answers of 40-260. The import
runs as a user would run it (the module's CLI, the bundled model, embedded Chroma), with `--json` for its own
figures: the write phase (records through memclaw's writer) and the one index sync (seconds, vectors), timed apart.
The load average of this shared machine is read before and after. Then a smaller export is imported in a fresh
workspace with a real Ctrl-C (SIGINT) in the write phase or halfway through the index sync, and run again.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

WORD_TEXT = (
    "the a to and of in for on with my is it that this was we can how what should about when from your our "
    "recipe trip budget python error meeting sister garden marathon invoice lease visa flight hotel doctor bike "
    "train concert deadline project report manager kitchen paint laptop camera backup router server question "
    "weekend tomorrow monday friday morning evening week month plan idea draft list price option better faster "
    "cheaper simple explain compare suggest fix write summarize translate schedule remind book call email"
)
WORDS = tuple(WORD_TEXT.split())
TOPICS = (
    "sourdough",
    "Lisbon trip",
    "tax return",
    "Rust borrow checker",
    "knee pain",
    "wedding speech",
    "cover letter",
    "garden beds",
    "home network",
    "marathon training",
    "Spanish verbs",
    "car insurance",
)


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def text(rng: random.Random, lo: int, hi: int) -> str:
    n = rng.randint(lo, hi)
    parts, done = [], 0
    while done < n:
        k = min(n - done, rng.randint(6, 18))
        parts.append(sentence(rng, k))
        done += k
    return " ".join(parts)


def node(nid: str, msg: dict | None, parent: str | None) -> dict:
    return {"id": nid, "message": msg, "parent": parent, "children": []}


def message(nid: str, role: str, body: str, t: float | None, hidden: bool = False) -> dict:
    return {"id": nid, "author": {"role": role, "name": None, "metadata": {}}, "create_time": t, "update_time": None,
            "content": {"content_type": "text", "parts": [body]}, "status": "finished_successfully", "end_turn": True,
            "weight": 1.0, "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {},
            "recipient": "all"}  # fmt: skip


def conversation(rng: random.Random, i: int, start: datetime) -> dict:
    t = start.timestamp()
    mapping = {"root": node("root", None, None)}
    prev = "root"

    def add(nid: str, msg: dict) -> None:
        nonlocal prev
        mapping[nid] = node(nid, msg, prev)
        mapping[prev]["children"].append(nid)
        prev = nid

    add(f"{i}-sys", message(f"{i}-sys", "system", "", None, hidden=True))
    turns = rng.randint(1, 20)
    topic = rng.choice(TOPICS)
    for k in range(turns):
        t += rng.randint(20, 600)
        add(f"{i}-u{k}", message(f"{i}-u{k}", "user", f"About {topic}: " + text(rng, 8, 60), t))
        t += rng.randint(5, 40)
        if rng.random() < 0.05:  # a regenerated answer: a sibling the branch shown does not take
            alt = f"{i}-x{k}"
            mapping[alt] = node(alt, message(alt, "assistant", text(rng, 40, 260), t), prev)
            mapping[prev]["children"].append(alt)
        add(f"{i}-a{k}", message(f"{i}-a{k}", "assistant", text(rng, 40, 260), t))
    cid = f"00000000-0000-4000-8000-{i:012d}"
    return {"title": f"{topic} {i}", "create_time": start.timestamp(), "update_time": t, "mapping": mapping,
            "current_node": prev, "conversation_id": cid, "id": cid, "default_model_slug": "gpt-4o"}  # fmt: skip


def write_export(path: Path, n: int, seed: int) -> dict:
    rng = random.Random(seed)
    first = datetime(2025, 1, 1, tzinfo=UTC)
    starts = sorted(first + timedelta(seconds=rng.randint(0, 365 * 86400 - 1)) for _ in range(n))
    convs = [conversation(rng, i, s) for i, s in enumerate(starts)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(convs), "utf-8")
    turns = sum(1 for c in convs for m in c["mapping"].values()
                if m["message"] and m["message"]["author"]["role"] in ("user", "assistant")
                and m["message"]["content"]["parts"][0] and not m["id"].split("-")[-1].startswith("x"))  # fmt: skip
    return {"conversations": n, "turns": turns, "bytes": path.stat().st_size}


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def env_for(home: Path) -> dict[str, str]:
    return dict(os.environ, MEMCLAW_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                LITELLM_LOCAL_MODEL_COST_MAP="True")  # fmt: skip


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_import(export: Path, home: Path) -> tuple[float, float, dict]:
    """One `memclaw import chatgpt --json`: its wall seconds, its CPU seconds and its summary."""
    cpu0, t0 = children_cpu(), time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "memclaw.cli.main", "import", "chatgpt", str(export), "--json"],
                       env=env_for(home), capture_output=True, text=True)  # fmt: skip
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if r.returncode != 0:
        raise SystemExit(f"import failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return wall, cpu, json.loads(r.stdout)


def interrupted_import(export: Path, home: Path, phases: tuple[str, ...]) -> str:
    """The import with a real Ctrl-C (SIGINT) once its progress line says it is in one of `phases` (the first word
    of the line: "importing" writes, "embedding" indexes), the index sync once half its vectors are embedded.
    Returns the phase it was interrupted in."""
    p = subprocess.Popen([sys.executable, "-m", "memclaw.cli.main", "import", "chatgpt", str(export)],
                         env=env_for(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert p.stderr is not None
    hit = ""
    for line in p.stderr:
        phase = line.split(" ", 1)[0].rstrip(":")
        # an in-progress line ("N/M turns, R/s, about T left"), not a summary
        if phase in phases and " left" in line and (phase != "embedding" or half_done(line)):
            hit = phase
            p.send_signal(signal.SIGINT)
            break
    rest = p.stderr.read()
    code = p.wait()
    if not hit or code != 130:
        raise SystemExit(f"no Ctrl-C in {phases} (exit {code}): {rest.strip()[-500:]}")
    return hit


def half_done(line: str) -> bool:
    """Whether a progress line "embedding N memories: done/total vectors, ..." says half is done."""
    done, _, total = line.split(": ", 1)[1].split(" ", 1)[0].partition("/")
    return 2 * int(done.replace(",", "")) >= int(total.replace(",", ""))


def resume_check(workdir: Path, conversations: int, seed: int) -> dict:
    """Ctrl-C in the write phase, then in the index phase, then the import run to its end in a fresh workspace:
    what each run added, and whether the end equals one import (every turn archived once, nothing pending)."""
    export = workdir / "resume-export" / "conversations.json"
    shape = write_export(export, conversations, seed)
    home = workdir / "resume-home"
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "memclaw.cli.main", "onboard"], env=env_for(home), capture_output=True,
                   check=True)  # fmt: skip
    stops = [interrupted_import(export, home, ("importing", "embedding"))]
    if stops[0] == "importing":
        stops.append(interrupted_import(export, home, ("importing", "embedding")))
    _, _, last = run_import(export, home)
    _, _, again = run_import(export, home)
    r = subprocess.run([sys.executable, "-m", "memclaw.cli.main", "memory", "stats", "--json"], env=env_for(home),
                       capture_output=True, text=True, check=True)  # fmt: skip
    scopes = json.loads(r.stdout)["scopes"]
    archived = sum(s["archive"] for s in scopes.values())
    pending = sum(s["vectors_pending"] for s in scopes.values())
    fresh = all(s["fresh"] for s in scopes.values())
    return {"export": shape, "stopped_in": stops, "last": last, "again": again, "archived_turns": archived,
            "vectors_pending": pending, "fresh": fresh}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--conversations", type=int, default=2000)
    ap.add_argument("--resume-conversations", type=int, default=40, help="the export the Ctrl-C check imports")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "import-year.md")
    args = ap.parse_args()
    from memclaw.bench.machine import machine_info, revision

    # Started with `&` by a shell without job control, this process ignores SIGINT and its children would too:
    # the Ctrl-C check needs them to take it as a person's Ctrl-C
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    export = args.workdir / "export" / "conversations.json"
    shape = write_export(export, args.conversations, args.seed)
    home = args.workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "memclaw.cli.main", "onboard"], env=env_for(home), capture_output=True,
                   check=True)  # fmt: skip
    load_before = loadavg()
    wall, cpu, first = run_import(export, home)
    load_after = loadavg()
    wall2, _, second = run_import(export, home)
    archive = home / "workspace" / "memory" / "archive"
    md_bytes = sum(p.stat().st_size for p in archive.glob("*.md"))
    days = len(list(archive.glob("*.md")))
    result = {"date": date.today().isoformat(), "revision": revision(), "machine": machine_info(), "export": shape,
              "first": {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), **first},
              "again": {"wall_s": round(wall2, 1), **second}, "load_before": load_before,
              "load_after": load_after, "archive_md_bytes": md_bytes, "archive_days": days}  # fmt: skip
    # kept before the Ctrl-C check, which may fail
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    result["resume"] = resume_check(args.workdir, args.resume_conversations, args.seed + 1)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(report(result))


def report(r: dict) -> str:
    """The figures of a run as a Markdown table; the prose of the results file is written around it by hand."""
    m, e, f, a, res = r["machine"], r["export"], r["first"], r["again"], r["resume"]
    write_s, index_s = f["seconds"], f["index"]["seconds"]
    added, vectors = f["added"]["turns"], f["index"]["vectors"]
    rest_s = f["wall_s"] - write_s - index_s
    vps = vectors / index_s
    return f"""`benchmarks/bench_import.py`, {r["date"]}, revision {r["revision"]}. Machine: {m["nproc"]} cores
({m["cpu"]}), {m["ram_gib"]} GiB, {m["os"]}, Python {m["python"]}. Load average (1, 5, 15 min) {r["load_before"]}
before the import and {r["load_after"]} after. The import used {f["cpu_s"]:,.0f} s of CPU in {f["wall_s"]:,.0f} s.

Export: {e["conversations"]:,} conversations, {e["turns"]:,} turns, {e["bytes"] / 2**20:,.1f} MiB.

| phase | wall s | turns | vectors | turns/s | vectors/s |
|---|---|---|---|---|---|
| start-up, read and plan | {rest_s:,.1f} | - | - | - | - |
| write (the archive) | {write_s:,.1f} | {added:,} | - | {added / write_s:,.0f} | - |
| index (embedding, BM25) | {index_s:,.1f} | {added:,} | {vectors:,} | {added / index_s:,.1f} | {vps:,.1f} |
| whole command | {f["wall_s"]:,.1f} | {added:,} | {vectors:,} | {added / f["wall_s"]:,.1f} | - |
| the same again | {a["wall_s"]:,.1f} | {a["added"]["turns"]:,} | {a["index"]["vectors"]:,} | - | - |

The archive: {r["archive_days"]} day files, {r["archive_md_bytes"] / 2**20:,.1f} MiB of Markdown.

Ctrl-C check: {res["export"]["conversations"]} conversations, {res["export"]["turns"]:,} turns; Ctrl-C in
{" then ".join(res["stopped_in"])}; the run after added {res["last"]["added"]["turns"]:,} turns and embedded
{res["last"]["index"]["vectors"]:,} vectors; one more run added {res["again"]["added"]["turns"]} turns and
{res["again"]["index"]["vectors"]} vectors. In the end {res["archived_turns"]:,} turns archived,
{res["vectors_pending"]} vectors pending, index fresh: {res["fresh"]}.
"""


if __name__ == "__main__":
    main()
