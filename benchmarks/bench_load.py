"""Discord load benchmark (issue 7): S outside senders x M messages through the Discord adapter's handler.

    python benchmarks/bench_load.py [--senders 50] [--messages 20]

The scenario of tests/channels/test_load.py at full size (tests/discord_load.py): real discord.py Messages built
from gateway payloads go through `DiscordGateway.on_message`; the real Agent (on its own loop thread, as in `memclaw
gateway`) and MemoryService (bundled model, embedded Chroma, Markdown, session JSONL with fsync) answer; litellm
talks HTTP to the scripted OpenAI-compatible server on 127.0.0.1, which answers at once, echoing who asked and the
secrets it sees. Half the senders use DMs, half share 5 guild channels (mentioning the bot). All messages arrive in
one burst, round-robin over senders. Every reply is checked (lost, misrouted, order, cross-sender leaks) before any
figure is written. Turn overhead outside the LLM = the agent's turn total - its LLM call, per turn. Writes
benchmarks/results/load.md and load.json."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from memclaw.runtime import set_offline_env  # noqa: E402

set_offline_env()

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_bm25 import machine  # noqa: E402
from benchmarks.bench_turn import pct  # noqa: E402


def row(name: str, xs: list[float]) -> str:
    return f"| {name} | {pct(xs, 50):.1f} | {pct(xs, 95):.1f} | {max(xs):.1f} | {statistics.mean(xs):.1f} |"


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50": pct(xs, 50), "p95": pct(xs, 95), "max": max(xs), "mean": statistics.mean(xs), "n": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--senders", type=int, default=50)
    ap.add_argument("--messages", type=int, default=20, help="per sender")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "load.md")
    args = ap.parse_args()

    env = machine()  # date (date -u), nproc, CPU, RAM and the load average, taken before the run
    tmp = Path(tempfile.mkdtemp(prefix="memclaw-bench-load-"))
    os.environ["MEMCLAW_HOME"] = str(tmp / "home")

    from tests.discord_load import ASK_RE, LoadRun
    from tests.llm_server import ScriptedLLMServer

    server = ScriptedLLMServer().start()
    os.environ["OPENAI_API_BASE"] = server.url
    os.environ["OPENAI_API_KEY"] = "sk-bench"
    try:
        run = LoadRun.create(tmp / "ws", server, senders=args.senders, messages=args.messages)
        asyncio.run(run.drive())
        load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    finally:
        server.stop()
    violations = run.check()
    if violations:
        print("\n".join(violations[:50]), file=sys.stderr)
        raise SystemExit(f"{len(violations)} violations: no figures written")

    tm = run.timings()
    # the first round (every sender's message 0) pays the cold start (imports, first litellm call) concurrently
    warm = [n for n, (msg, _) in enumerate(run.agent.pairs) if int(ASK_RE.search(msg.text).group(2)) > 0]
    overhead_warm = [tm["overhead"][i] for i in warm]
    total = len(run.delivered)
    rate = total / run.wall_s
    dms = sum(s.guild_id is None for s in run.senders)
    cmd = f"python benchmarks/bench_load.py --senders {args.senders} --messages {args.messages}"
    md = f"""# Discord load benchmark

Date: {env["date"]}
Machine: {env["nproc"]} CPUs ({env["cpu"]}), {env["ram"]} RAM, Python {env["python"]}; \
load average at start {env["load"]}, at the end {load_after} (a shared machine: other work inflates the figures)
Command: `{cmd}`

Workload: {args.senders} outside senders x {args.messages} messages = {total} turns through memclaw's Discord handler
(`DiscordGateway.on_message`, real discord.py Messages built from gateway payloads; outgoing calls recorded at
discord.py's HTTP seam). {dms} senders write in their own DMs, {args.senders - dms} share 5 guild channels (mentioning
the bot). Each sender has a secret and two other facts in their own memory scope, the owner has theirs
({3 * args.senders + 2} memories in {args.senders + 1} scopes, indexed before the run in {run.index_s:.1f} s). The
real Agent runs on its own loop thread with auto-recall (hybrid BM25 + vector, bundled model, embedded Chroma) and
fsynced session writes; litellm calls the scripted OpenAI-compatible server on 127.0.0.1, which answers at once.
All messages arrive in one burst, round-robin over senders; turns of one channel run in order, channels
concurrently.

Checked before writing this: **0** lost, duplicated or misrouted replies out of {total}; per-channel and
per-session order kept; **0** prompts or replies with another sender's or the owner's secret; every prompt held its
sender's own secret (recall worked for every turn).

| ms per turn | p50 | p95 | max | mean |
| --- | --- | --- | --- | --- |
{row("**turn overhead outside the LLM**, all turns", tm["overhead"])}
{row("**turn overhead outside the LLM**, after the first round", overhead_warm)}
{row("context build incl. auto-recall", tm["context"])}
{row("session writes (load + 2 fsynced appends)", tm["session"])}
{row("LLM call (litellm + loopback HTTP + server)", tm["llm"])}
{row("arrival -> reply sent (includes waiting behind the channel's earlier turns)", tm["latency"])}

Total wall time {run.wall_s:.1f} s for {total} messages: **{rate:.1f} messages/s**, i.e. {1000 / rate:.0f} ms of
wall time per message with up to {len({d.channel_id for d in run.delivered})} channels' turns in flight at once.

Overhead outside the LLM is measured under this concurrency, so it includes waiting for a worker thread and for
the CPU while other channels' turns run (the agent's blocking work goes through asyncio.to_thread): per-turn
figures are latencies under load, not CPU cost; the throughput line above is the cost. As `memclaw gateway` does,
the index is synced and litellm imported before the first message; the first round still pays the first litellm
call and per-scope first use {args.senders} times at once, hence "after the first round". Single-turn overhead
without concurrency: `python benchmarks/bench_turn.py`.
"""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md, "utf-8")
    data = {
        "date": env["date"],
        "machine": env,
        "load_after": load_after,
        "command": cmd,
        "senders": args.senders,
        "messages_per_sender": args.messages,
        "turns": total,
        "dm_senders": dms,
        "index_s": run.index_s,
        "wall_s": run.wall_s,
        "messages_per_s": rate,
        "violations": len(violations),
        "ms": {k: summary(v) for k, v in tm.items()} | {"overhead_after_first_round": summary(overhead_warm)},
    }
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    print(md)


if __name__ == "__main__":
    main()
