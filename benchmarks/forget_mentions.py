"""Which facts and history entries restate a forgotten fact (memclaw.service.forgotten) on LoCoMo dev: the 5
conversations written by the benchmark converter (corpus `full`: observations as facts, session summaries as
history entries), each observation forgotten in turn. For each, the other facts recall then hides, and the history
entries it masks in part, hides whole, or leaves as they are; with a sample of the masked sentences.

Document frequencies are counted over the parsed units (no index, no embedding): what `doc_freq` gives after a sync.

    python benchmarks/forget_mentions.py [SAMPLE]   (benchmarks/README.md, "Forgetting: summaries and facts")
"""

from __future__ import annotations

import collections
import random
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from memclaw.bench.locomo import Conversation, load_locomo, write_conversation
from memclaw.config import Config
from memclaw.index.tokenizer import Tokenizer
from memclaw.markdown.units import OWNER_SCOPE
from memclaw.service.facade import MemoryService
from memclaw.service.forgotten import MASKED, ForgottenFilter, ForgottenMemory, key_of, sentences
from memclaw.workspace import Workspace

DATA = Path("/work/shared/data/locomo/locomo-dev.json")
tok = Tokenizer().tokenize


def measure(conv: Conversation, c: collections.Counter, masked: list[tuple[str, str, str]],
            facts: list[tuple[str, str]]) -> None:  # fmt: skip
    root = Path(tempfile.mkdtemp()) / "ws"
    write_conversation(conv, root, "full")
    ws = Workspace(root)
    svc = MemoryService(ws, Config().model_copy(update={"workspace": ws.root}))
    units = [u for u in svc.parse_scope(OWNER_SCOPE) if u.kind != "archive"]
    df = collections.Counter(t for u in svc.parse_scope(OWNER_SCOPE) for t in set(tok(u.text)))
    c["history"] += sum(u.kind == "history" for u in units)
    now = datetime.now().astimezone()
    for o in conv.observations:
        fact = next((u for u in units if u.kind == "fact" and u.text.startswith(o.text)), None)
        if fact is None:
            continue
        before = ForgottenFilter(root, tok, lambda scope: df.__getitem__)
        mentions = before.mentions(OWNER_SCOPE, [fact], units)[fact.id]
        gone = set(tok(fact.text))
        after = ForgottenFilter(root, tok, lambda scope, gone=gone: lambda t: df[t] - (t in gone))
        keys = [(ForgottenMemory(OWNER_SCOPE, fact.text, now, frozenset(mentions)),
                 key_of(fact.text, tok).distinctive(lambda t, gone=gone: df[t] - (t in gone)))]  # fmt: skip
        c["facts_forgotten"] += 1
        for u in (u for u in units if u.id in mentions):
            shown = after.shown(u, keys)
            what = "hidden" if shown is None else "masked" if shown is not u else "kept"
            c[f"{u.kind}_{what}"] += 1
            if u.kind == "fact":
                facts.append((o.text, u.text))
            if u.kind == "history" and shown is not None:
                c["history_sentences_masked"] += shown.text.count(MASKED)
                masked.append((o.text, u.text, shown.text))
        c["forgets_naming_a_history_entry"] += any(u.kind == "history" for u in units if u.id in mentions)
    svc.close()


def main(sample: int) -> None:
    c: collections.Counter = collections.Counter()
    masked: list[tuple[str, str, str]] = []
    facts: list[tuple[str, str]] = []
    for conv in load_locomo(DATA).conversations:
        measure(conv, c, masked, facts)
    print(dict(c))
    random.Random(7).shuffle(masked)
    for fact, entry, shown in masked[:sample]:
        gone = [x for x in sentences(entry) if x not in shown]
        print(f"F: {fact}\n   masks: {' | '.join(gone)}")
    random.Random(7).shuffle(facts)
    for fact, other in facts[:sample]:
        print(f"F: {fact}\n   hides fact: {other}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
