"""The process that tests/index/test_crash_consistency.py kills: a small fork server plus the memory workload.

Importing litellm alone takes ~7 s here, so starting a fresh interpreter for each of the 50+ kills would blow the
test's time budget. Instead this script starts once (imports, loads the real bundled model via
memclaw.embedding.load.load_embedder), prints READY, then serves commands on stdin:

    RUN <workspace> <seed> <run> [resume]   fork a worker that runs `workload` (`resume`: only finishes what
                                   killed workers left); prints "PID <pid>", then, once the worker is gone (killed
                                   by the test with SIGKILL, or finished), "DONE <pid> <status>"
    QUIT                           exit

The worker (`workload`) writes memory exactly like the agent does: a real Consolidator with a real LLMClient
(litellm over real HTTP) against a tests/llm_server.ScriptedLLMServer it starts itself, whose reply is the
consolidation JSON (history entry + add/update/delete fact ops) queued right before each consolidation; and, now and
then, a direct MemoryService.add_fact (what the `remember` tool and `memclaw memory add` call). Each consolidation
reads a session of its own (`cli/crash-<tag>`: "remember this (<tag>)" and the reply "Noted (<tag>)."), whose turns
it archives. Every write also syncs the index (Chroma + BM25), so a kill lands anywhere in: LLM call, answers kept
in the session, archive append, Markdown write, embedding, Chroma upsert or delete, BM25/state save, session pointer
and trim.

A worker first finishes what an earlier, killed one left (as the agent does at a session's next consolidation):
every session still holding unconsolidated turns is consolidated again, with the reply its plan had (a JSON file
written, atomically, before the session: `<workspace>/../plans/<tag>.json`), which the consolidator only asks for
when the killed attempt had not kept the model's answers yet. `RUN ... resume` does only that, then exits.

Protocol on stdout, one JSON object per line, flushed:
    BEGIN {"scope", "tag", "add": [text], "update": [[old, new]], "delete": [text], "history": text|null}  before
    ACK   {the same}                                                           after the memclaw call has returned
("tag" is null for a direct add_fact, which is never resumed.)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

OWNER = "owner"
OUTSIDER_ID = "discord:4242"
MAX_STEPS = 400

NAMES = ["Maya", "Lena", "Henrik", "Ingrid", "Tomas", "Aiko", "Ravi", "Noor"]
THINGS = ["kayak", "violin", "teapot", "bicycle", "telescope", "notebook", "lantern", "chess set"]
PLACES = ["Porto", "Lyon", "Bergen", "Kyoto", "Tallinn", "Oaxaca", "Ghent", "Hobart"]
COLOURS = ["blue", "green", "amber", "crimson", "silver", "violet", "ochre", "teal"]
SECTIONS = [None, "Family", "Hobbies", "Work > Projects"]
# What a worker's first litellm call and first Chroma client would otherwise import (~5 s on a busy 2-core box).
WARM_IMPORTS = [
    "litellm",
    "litellm.llms.openai.openai",
    "openai.resources",
    "openai.resources.chat",
    "jiter",
    "chromadb",
    "chromadb.api.client",
    "chromadb.api.rust",
    "chromadb.telemetry.product.posthog",
    "chromadb.telemetry.opentelemetry",
    "chromadb_rust_bindings",
    "memclaw.agent.consolidate",
    "memclaw.llm.client",
    "memclaw.service.facade",
    "memclaw.service.learned",
    "memclaw.agent.conversation",
    "memclaw.agent.sessions",
    "memclaw.store.chroma",
    "memclaw.store.clients",
    "memclaw.index._bm25",
    "tests.llm_server",
]


def bare_fact(text: str) -> str:
    """A fact's text without the learned-mark memclaw ends it with (the worker's own texts end in none)."""
    from memclaw.service.learned import bare_fact as bare

    return bare(text)


def fact_text(rng: random.Random, tag: str) -> str:
    """A unique, plain one-line fact (nothing Markdown or the fact normaliser would change)."""
    return (
        f"{rng.choice(NAMES)} keeps the {rng.choice(COLOURS)} {rng.choice(THINGS)} in {rng.choice(PLACES)} (note {tag})"
    )


def history_text(rng: random.Random, tag: str) -> str:
    return f"Talked with {rng.choice(NAMES)} about a trip to {rng.choice(PLACES)} and the {rng.choice(THINGS)} ({tag})."


def user_text(tag: str) -> str:
    return f"remember this ({tag})"


def reply_text(tag: str) -> str:
    return f"Noted ({tag})."


def plans_dir(root: Path) -> Path:
    return root.parent / "plans"


def say(line: str) -> None:
    # One write call per line: under PYTHONUNBUFFERED, print() writes the text and its newline apart, and a forked
    # worker's line could land between them ("PID 26971BEGIN ...").
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def emit(kind: str, payload: dict[str, Any]) -> None:
    say(f"{kind} {json.dumps(payload, ensure_ascii=False)}")


async def _workload(root: Path, seed: int, run: int, resume_only: bool = False) -> None:
    from pydantic import SecretStr

    from memclaw.agent.consolidate import Consolidator
    from memclaw.agent.sessions import SessionStore
    from memclaw.config import Config
    from memclaw.llm.client import LLMClient
    from memclaw.markdown.units import sender_scope
    from memclaw.service.facade import MemoryService
    from memclaw.util.files import replace_atomically
    from memclaw.workspace import Workspace
    from tests.llm_server import ScriptedLLMServer

    server = ScriptedLLMServer().start()
    cfg = Config(workspace=root)
    cfg.agent.model = "openai/gpt-4o-mini"
    cfg.agent.api_base = server.url
    cfg.agent.api_key = SecretStr("sk-test-not-a-real-key")
    cfg.agent.max_retries = 0
    ws = Workspace(root)
    from memclaw.embedding.load import load_embedder

    memory = MemoryService(ws, cfg, embedder=load_embedder(cfg.embeddings))
    sessions = SessionStore(ws.sessions_dir)
    consolidator = Consolidator(cfg, LLMClient(cfg, backoff_base_s=0.01, max_backoff_s=0.02), memory, sessions)

    # What a killed worker left: each session with turns not yet in memory, consolidated again (its plan's reply is
    # asked for only if the killed attempt had not kept the model's answers).
    for channel, chat_id in sessions.list():
        session = sessions.load(channel, chat_id)
        plan_file = plans_dir(root) / f"{chat_id.removeprefix('crash-')}.json"
        if not session.unconsolidated or not plan_file.exists():
            continue
        plan = json.loads(plan_file.read_text("utf-8"))
        server.clear()
        server.reply(plan["reply"])
        emit("BEGIN", plan["payload"])
        report = await consolidator.consolidate(session, everything=True)
        if not report.ok:
            emit("FAIL", {"error": report.error})
            return
        emit("ACK", plan["payload"])
    server.clear()
    if resume_only:
        emit("END", {})
        return

    rng = random.Random(seed)
    outsider = sender_scope(OUTSIDER_ID)
    for step in range(MAX_STEPS):
        tag = f"r{run}s{step}"
        scope = OWNER if rng.random() < 0.75 else outsider
        if rng.random() < 0.2:  # a direct save, as the memory tool does
            text = fact_text(rng, tag)
            payload = {"scope": scope, "tag": None, "add": [text], "update": [], "delete": [], "history": None}
            emit("BEGIN", payload)
            await asyncio.to_thread(memory.add_fact, text, scope=scope, section=rng.choice(SECTIONS))
            emit("ACK", payload)
            continue
        facts = await asyncio.to_thread(memory.facts, scope)
        ops: list[dict[str, Any]] = []
        payload = {"scope": scope, "tag": tag, "add": [], "update": [], "delete": [], "history": history_text(rng, tag)}
        for k in range(rng.choice([0, 1, 1, 2])):
            text = fact_text(rng, f"{tag}a{k}")
            ops.append({"op": "add", "text": text, "section": rng.choice(SECTIONS)})
            payload["add"].append(text)
        targets = rng.sample(facts, k=min(len(facts), rng.choice([0, 1, 2])))
        for k, f in enumerate(targets):
            if rng.random() < 0.5:
                new = fact_text(rng, f"{tag}u{k}")
                ops.append({"op": "update", "id": f.id, "text": new})
                payload["update"].append([bare_fact(f.text), new])
            else:
                ops.append({"op": "delete", "id": f.id})
                payload["delete"].append(bare_fact(f.text))
        reply = json.dumps({"history_entry": payload["history"], "facts": ops})
        plan = json.dumps({"reply": reply, "payload": payload}, ensure_ascii=False).encode("utf-8")
        replace_atomically(plans_dir(root) / f"{tag}.json", plan)  # before the session: a resumed one has its plan
        server.reply(reply)
        session = sessions.load("cli", f"crash-{tag}")
        sender = None if scope == OWNER else OUTSIDER_ID
        await asyncio.to_thread(
            sessions.append,
            session,
            {"role": "user", "content": user_text(tag), "scope": scope, "sender_name": sender},
            {"role": "assistant", "content": reply_text(tag)},
        )
        emit("BEGIN", payload)
        report = await consolidator.consolidate(session, everything=True)
        if not report.ok:
            emit("FAIL", {"error": report.error})
            return
        emit("ACK", payload)
    emit("END", {})


def workload(root: Path, seed: int, run: int, resume_only: bool = False) -> None:
    asyncio.run(_workload(root, seed, run, resume_only))


def serve() -> None:
    # Everything heavy is loaded once, before any fork: the workers share it copy-on-write. Only imports: no
    # Chroma client and no litellm call here (their threads and event-loop state would not survive a fork).
    import contextlib
    import importlib

    for name in WARM_IMPORTS:
        with contextlib.suppress(ImportError):  # another version of a dependency: the worker imports it itself
            importlib.import_module(name)
    from memclaw.config import EmbeddingsConfig
    from memclaw.embedding.load import load_embedder

    load_embedder(EmbeddingsConfig()).encode(["warm up"])
    say("READY")
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "QUIT":
            return
        if cmd[0] != "RUN":
            say(f"ERROR unknown command {cmd[0]!r}")
            continue
        root, seed, run = Path(cmd[1]), int(cmd[2]), int(cmd[3])
        resume_only = cmd[4:] == ["resume"]
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                workload(root, seed, run, resume_only)
            except BaseException as e:  # report, never fall back into the server loop
                emit("FAIL", {"error": f"{type(e).__name__}: {e}"})
                code = 1
            finally:
                sys.stdout.flush()
                os._exit(code)
        say(f"PID {pid}")
        _, status = os.waitpid(pid, 0)
        say(f"DONE {pid} {status}")


if __name__ == "__main__":
    serve()
