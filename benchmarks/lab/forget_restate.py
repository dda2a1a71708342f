"""The restatement rule of memclaw.service.forgotten on LoCoMo dev (5 conversations written by the benchmark
converter, corpus `full`, synced into a real index): each observation forgotten in turn, the archived turns it hides
with its words alone (`words`) and with its distinctive names too (`names`), and a sample of the turns the names add.

    python benchmarks/lab/forget_restate.py [SAMPLE]   (benchmarks/README.md, "Forgetting")
"""

from __future__ import annotations

import collections
import random
import sys
import tempfile
from pathlib import Path

from memclaw.bench.locomo import Conversation, load_locomo, write_conversation
from memclaw.config import Config
from memclaw.index.tokenizer import Tokenizer
from memclaw.markdown.units import OWNER_SCOPE
from memclaw.service.facade import MemoryService
from memclaw.service.forgotten import ForgottenKey, key_of, restates
from memclaw.workspace import Workspace

DATA = Path("/work/shared/data/locomo/locomo-dev.json")
tok = Tokenizer().tokenize


def measure(conv: Conversation, stats: dict[str, collections.Counter], added: list[tuple]) -> None:
    root = Path(tempfile.mkdtemp()) / "ws"
    write_conversation(conv, root, "full")
    ws = Workspace(root)
    svc = MemoryService(ws, Config().model_copy(update={"workspace": ws.root}))
    svc.sync()
    units = svc.parse_scope(OWNER_SCOPE)
    turns = [u for u in units if u.kind == "archive"]
    dia = [t.dia_id for n in sorted(conv.sessions) for t in conv.sessions[n].turns if t.text.strip() or t.image_caption]
    words = [set(tok(u.text.split(": ", 1)[-1])) for u in turns]
    count = svc.scopes.doc_freq(OWNER_SCOPE)
    for o in conv.observations:
        full = key_of(o.text, tok)
        gone = int(any(u.kind == "fact" and u.text.startswith(o.text) for u in units))  # the forgotten fact
        keys = {"words": ForgottenKey(full.words, frozenset()),
                "names": full.distinctive(lambda t, gone=gone: count(t) - gone)}  # fmt: skip
        hidden = {name: {i for i, w in enumerate(words) if restates(w, key)} for name, key in keys.items()}
        for name, hid in hidden.items():
            c = stats[name]
            c["facts"] += 1
            c["hidden"] += len(hid)
            c["hidden_evidence"] += sum(dia[i] in o.evidence for i in hid)
            c["max_by_one_fact"] = max(c["max_by_one_fact"], len(hid))
        more = sorted(hidden["names"] - hidden["words"])
        stats["names"]["added"] += len(more)
        stats["names"]["added_evidence"] += sum(dia[i] in o.evidence for i in more)
        added += [(o.text, sorted(keys["names"].names & words[i]), dia[i] in o.evidence, turns[i].text) for i in more]
    stats["all"]["turns"] += len(turns)
    svc.close()


def main(sample: int) -> None:
    stats: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    added: list[tuple] = []
    for conv in load_locomo(DATA).conversations:
        measure(conv, stats, added)
    for name, c in stats.items():
        print(name, dict(c))
    random.Random(7).shuffle(added)
    for fact, names, evidence, turn in added[:sample]:
        print(f"F: {fact} | names {names} | evidence={evidence}\n   T: {turn[:170]}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
