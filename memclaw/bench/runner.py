"""Run systems over converted corpora through memclaw's real path and write JSON, Markdown and a PNG plot.

Per corpus (one LoCoMo conversation, or one LongMemEval question): the converter writes a real workspace in a
temp dir, a MemoryService (real model, real Chroma under the temp dir, real BM25) syncs it ONCE, and every
memclaw system recalls from that same index with its own recall overrides. Latency is measured per query
around the system's call (for memclaw systems: `recall_detailed`, query embedding included).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memclaw.bench import metrics as M
from memclaw.bench.baselines import GrepIndex
from memclaw.bench.corpus import BenchCorpus, load_corpus
from memclaw.bench.systems import Ranked, SystemFn, SystemSpec, make_system, system_config

if TYPE_CHECKING:
    from memclaw.bench.locomo import LocomoData
    from memclaw.config import Config
    from memclaw.context.memory_section import Candidate
    from memclaw.embedding.base import Embedder
    from memclaw.service.facade import MemoryService

K_MAX = max(M.RECALL_KS)


# ----- environment --------------------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """nproc, CPU model, RAM, OS and Python of this machine."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram_gib = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": ram_gib,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def bench_config() -> Config:
    """memclaw's default configuration (environment overrides of recall/embeddings apply, so a variant can be
    tried without code), with the index forced to an embedded Chroma under each temp workspace."""
    from memclaw.config import Config

    cfg = Config()
    memory = cfg.memory.model_copy(update={"chroma_url": None, "index_dir": None, "auto_sync": True})
    return cfg.model_copy(update={"memory": memory, "workspace": None})


class Progress:
    """A rich progress bar on stderr (or nothing, for tests and non-interactive use)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._prog = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._prog = Progress(
                TextColumn("{task.description}", style="bold", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(stderr=True, markup=False, emoji=False, highlight=False),
            )
            self._prog.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._prog is not None:
            self._prog.__exit__(*exc)

    def task(self, description: str, total: int) -> Callable[..., None]:
        """Add a task; returns advance(n=1, description=None)."""
        if self._prog is None:
            return lambda n=1, description=None: None
        prog = self._prog
        tid = prog.add_task(description, total=total)

        def advance(n: int = 1, description: str | None = None) -> None:
            prog.update(tid, advance=n, **({"description": description} if description else {}))

        return advance

    def log(self, msg: str) -> None:
        if self._prog is not None:
            self._prog.console.print(msg)


# ----- one corpus ---------------------------------------------------------------------------------------------


@dataclass
class PreparedCorpus:
    """A synced corpus with every requested system bound to it, and each unit as the memory section shows it."""

    corpus: BenchCorpus
    systems: dict[str, SystemFn]
    index_seconds: float
    services: list[MemoryService] = field(default_factory=list)
    items: dict[str, Candidate] = field(default_factory=dict)

    def close(self) -> None:
        for s in self.services:
            s.close()

    def run(self, system: str, query: str, k: int) -> tuple[list[str], M.Budgeted, float]:
        """One query: the ranked ids, the memory-section view of them, and the latency in ms."""
        ranked, ms = timed(self.systems[system], query, k)
        return [i for i, _c in ranked], budgeted_view(ranked, self.items), ms


def fill_k(base: Config) -> int:
    """How many units each system ranks per query: enough for recall@20, and what auto-recall offers the memory
    section (context.recall_k)."""
    return max(K_MAX, base.context.recall_k)


def budgeted_view(ranked: Ranked, items: dict[str, Candidate]) -> M.Budgeted:
    """`ranked` through memclaw.context.memory_section.fill at each of M.BUDGETS, exactly as the prompt is filled."""
    from dataclasses import replace

    from memclaw.context.memory_section import fill

    cands = [replace(items[i], covered_by=cov) for i, cov in ranked]
    tokens: dict[str, float] = {f"@{k}": float(sum(c.tokens for c in cands[:k])) for k in M.TOKEN_KS}
    kept: dict[int, list[str]] = {}
    for b in M.BUDGETS:
        f = fill(cands, b)
        kept[b] = [cands[i].id for i in f.kept]
        tokens[f"@{b}t"] = float(f.used)
    return M.Budgeted(kept, tokens)


def prepare_corpus(
    root: Path,
    side_file: Path,
    specs: Sequence[SystemSpec],
    base: Config,
    embedder: Embedder | None,
    *,
    now: datetime | None = None,
) -> PreparedCorpus:
    """Parse the workspace at `root`, index it once with memclaw (if any memclaw system is asked for), and bind
    every system to it."""
    from memclaw.context.memory_section import candidates
    from memclaw.llm.tokens import counter_for
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    corpus = load_corpus(root, side_file)
    items = {c.id: c for c in candidates(corpus.units, counter_for(base.agent.model))}
    systems: dict[str, SystemFn] = {}
    services: list[MemoryService] = []
    t_index = 0.0
    grep_index = GrepIndex.build(root, corpus.units) if any(s.kind == "grep" for s in specs) else None
    mem_specs = [s for s in specs if s.kind == "memclaw"]
    if mem_specs:
        ws = Workspace(Path(root))
        main = MemoryService(ws, base, embedder=embedder)
        t0 = time.perf_counter()
        main.sync()
        t_index = time.perf_counter() - t0
        services.append(main)
        for spec in mem_specs:
            svc = MemoryService(ws, system_config(base, spec), embedder=main.embedder, store=main.store)
            services.append(svc)
            systems[spec.name] = make_system(spec, service=svc, now=now)
    for spec in specs:
        if spec.kind == "grep":
            systems[spec.name] = make_system(spec, grep_index=grep_index)
    return PreparedCorpus(corpus, {s.name: systems[s.name] for s in specs}, t_index, services, items)


def timed(fn: SystemFn, query: str, k: int) -> tuple[Ranked, float]:
    t0 = time.perf_counter()
    ranked = fn(query, k)
    return ranked, (time.perf_counter() - t0) * 1000.0


@contextlib.contextmanager
def temp_workspace(prefix: str) -> Iterator[Path]:
    """A temp dir holding one workspace (`<dir>/ws`) and its side file; removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d / "ws"
    finally:
        from memclaw.store.clients import release_embedded_below

        release_embedded_below(d)
        shutil.rmtree(d, ignore_errors=True)


KEPT_MARK = ".bench-written"


@contextlib.contextmanager
def bench_workspace(prefix: str, workdir: Path | None, key: str) -> Iterator[tuple[Path, bool]]:
    """(the workspace root, whether it was written and indexed by an earlier run). Without `workdir`: a temp
    workspace, removed afterwards. With it: `<workdir>/<key>/ws`, kept, so that a later run (of other code) reuses
    the same Markdown and the same index (Chroma's HNSW build is not reproducible: two builds of one corpus can
    differ in their approximate neighbours, so an exact comparison of two versions must query one build)."""
    if workdir is None:
        with temp_workspace(prefix) as root:
            yield root, False
        return
    d = Path(workdir) / key
    reused = (d / KEPT_MARK).exists()
    if not reused and d.exists():
        shutil.rmtree(d)  # an interrupted write: start again
    d.mkdir(parents=True, exist_ok=True)
    try:
        yield d / "ws", reused
        (d / KEPT_MARK).touch()
    finally:
        from memclaw.store.clients import release_embedded_below

        release_embedded_below(d)


def load_embedder_once(base: Config, specs: Sequence[SystemSpec]) -> Embedder | None:
    if not any(s.kind == "memclaw" for s in specs):
        return None
    from memclaw.embedding.load import load_embedder

    return load_embedder(base.embeddings)


def config_summary(base: Config) -> dict[str, Any]:
    return {"recall": json.loads(base.recall.model_dump_json()), "embeddings_model": base.embeddings.model}


# ----- LoCoMo -------------------------------------------------------------------------------------------------


def run_locomo(
    data: LocomoData,
    specs: Sequence[SystemSpec],
    *,
    corpus: str = "all",
    limit_conversations: int | None = None,
    limit_questions: int | None = None,
    progress: bool = True,
    embedder: Embedder | None = None,
    base: Config | None = None,
    details: bool = False,
    rankings: bool = False,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Run `specs` over the LoCoMo conversations (one workspace each) and return the results dict
    (the issue's JSON shape plus provenance keys). `limit_questions` caps the questions per run, in file order.
    `details` adds `questions`: per question and system, the ranked units (id, kind, text head) and scores.
    `rankings` adds `rankings`: per question and system, every ranked id and what each budget kept. `workdir`
    keeps each conversation's workspace and index there and reuses them on a later run (see bench_workspace)."""
    from memclaw.bench.locomo import coverage_path, write_conversation

    base = base or bench_config()
    convs = data.conversations[:limit_conversations] if limit_conversations else list(data.conversations)
    budget = limit_questions
    plan: list[tuple[Any, list[Any]]] = []
    for c in convs:
        qs = c.questions if budget is None else c.questions[: max(0, budget)]
        if budget is not None:
            budget -= len(qs)
        if qs:
            plan.append((c, qs))
    n_q = sum(len(qs) for _c, qs in plan)
    embedder = embedder or load_embedder_once(base, specs)
    scores: dict[str, list[M.QuestionScore]] = {s.name: [] for s in specs}
    per_question: list[dict[str, Any]] = []
    ranked_by_q: dict[str, dict[str, Any]] = {}
    unit_counts = {"fact": 0, "history": 0}
    unmatched = 0
    index_s = 0.0
    started = time.time()
    with Progress(progress) as prog:
        advance = prog.task(f"LoCoMo {corpus}", n_q * len(specs))
        for conv, qs in plan:
            advance(0, description=f"LoCoMo {corpus}: indexing {conv.sample_id}")
            with bench_workspace("memclaw-locomo-", workdir, f"locomo-{corpus}-{conv.sample_id}") as (root, reused):
                if not reused:
                    write_conversation(conv, root, corpus)  # type: ignore[arg-type]
                prep = prepare_corpus(
                    root, coverage_path(root), specs, base, embedder, now=conv.last_date.replace(hour=23, minute=59)
                )
                try:
                    index_s += prep.index_seconds
                    unmatched += len(prep.corpus.unmatched)
                    for u in prep.corpus.units:
                        unit_counts[u.kind] += 1
                    cover = prep.corpus.cover
                    advance(0, description=f"LoCoMo {corpus}: {conv.sample_id}")
                    by_id = prep.corpus.by_id
                    for q in qs:
                        relevant = M.relevant_units(cover, q.evidence)
                        row: dict[str, Any] = {"qid": q.qid, "category": q.category, "question": q.question,
                                               "evidence": list(q.evidence), "systems": {}}  # fmt: skip
                        for spec in specs:
                            ranked, view, ms = prep.run(spec.name, q.question, fill_k(base))
                            sc = M.score_question(
                                ranked,
                                cover,
                                q.evidence,
                                category=q.category,
                                latency_ms=ms,
                                relevant=relevant,
                                budgeted=view,
                            )
                            scores[spec.name].append(sc)
                            if rankings:
                                ranked_by_q.setdefault(f"{conv.sample_id}/{q.qid}", {})[spec.name] = ranking_record(
                                    ranked, view
                                )
                            if details:
                                row["systems"][spec.name] = {
                                    "recall@5": sc.recall[5],
                                    "recall@10": sc.recall[10],
                                    "rr": round(sc.rr, 4),
                                    "top": [
                                        _unit_brief(by_id.get(u), cover.get(u, frozenset()), q.evidence)
                                        for u in ranked[:10]
                                    ],  # fmt: skip
                                }
                            advance()
                        if details:
                            per_question.append(row)
                finally:
                    prep.close()
    return {
        "dataset": "locomo",
        "data_file": str(data.path),
        "data_sha256": sha256_file(data.path),
        "corpus": corpus,
        "n_questions": n_q,
        "n_conversations": len(plan),
        "n_qa_total": data.n_qa_total,
        "n_eligible": data.n_eligible,
        "questions_by_category": dict(sorted(_count(q.category for _c, qs in plan for q in qs).items())),
        "categories": {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"},
        "units": unit_counts,
        "units_without_coverage": unmatched,
        "evidence_anomalies": data.anomalies,
        "k_max": K_MAX,
        "k_ranked": fill_k(base),
        "budgets": list(M.BUDGETS),
        "token_model": base.agent.model,
        "index_seconds": round(index_s, 2),
        "run_seconds": round(time.time() - started, 1),
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": config_summary(base),
        "systems": {s.name: {**M.summarize(scores[s.name]), "description": s.description} for s in specs},
        **({"questions": per_question} if details else {}),
        **({"rankings": ranked_by_q} if rankings else {}),
    }


def ranking_record(ranked: list[str], view: M.Budgeted) -> dict[str, Any]:
    """What one system answered for one question, for an exact before/after comparison: the ranked ids and the
    ids each memory-section budget kept."""
    return {"ranked": list(ranked), "kept": {str(b): list(ids) for b, ids in view.kept.items()}}


def write_rankings(res: dict[str, Any], path: Path) -> Path:
    """The per-question rankings of a run (`rankings=True`) as gzipped JSON (benchmarks/bench_diff.py reads it)."""
    import gzip

    path.write_bytes(gzip.compress(json.dumps(res["rankings"], sort_keys=True).encode("utf-8"), mtime=0))
    return path


def _unit_brief(u: Any, cover: frozenset[str], evidence: Sequence[str]) -> dict[str, Any]:
    if u is None:
        return {"id": None}
    return {
        "id": u.id,
        "kind": u.kind,
        "relevant": bool(cover & set(evidence)),
        "text": u.text[:100],
    }


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


# ----- output -------------------------------------------------------------------------------------------------


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
    return out


def provenance_md(res: dict[str, Any]) -> list[str]:
    m = res["machine"]
    return [
        f"- date: {res['date']}",
        f"- machine: {m['nproc']} cores, {m['cpu']}, {m['ram_gib']} GiB RAM, {m['os']}, Python {m['python']}",
        f"- data: `{res['data_file']}` (sha256 `{res['data_sha256']}`)",
        f"- recall config (memclaw default): `{json.dumps(res['config']['recall'])}`",
        f"- embeddings: {res['config']['embeddings_model']}",
    ]


def locomo_markdown(res: dict[str, Any]) -> str:
    ks = M.RECALL_KS
    lines = [
        f"# LoCoMo recall benchmark — corpus `{res['corpus']}`",
        "",
        *provenance_md(res),
        f"- corpus `{res['corpus']}`: {res['units']['fact']} facts, {res['units']['history']} history entries "
        f"over {res['n_conversations']} conversations; {res['n_questions']} questions (categories 1-4 with evidence; "
        f"{res['n_qa_total']} QA in the file, {res['n_eligible']} eligible); top {res['k_max']} per query",
        f"- index time (embed + both indexes, all conversations): {res['index_seconds']} s; "
        f"evidence anomalies: {len(res['evidence_anomalies'])}",
        "",
        "## Overall",
        "",
    ]
    header = ["system", *[f"R@{k}" for k in ks], "hit@1", "hit@5", "MRR", "nDCG@10", "all@5", "p50 ms", "p95 ms"]
    rows = []
    for name, s in res["systems"].items():
        rows.append(
            [name, *[s[f"recall@{k}"] for k in ks], s["hit@1"], s["hit@5"], s["mrr"], s["ndcg@10"],
             s["recall_all@5"], s["p50_ms"], s["p95_ms"]]
        )  # fmt: skip
    lines += md_table(header, rows)
    lines += ["", *budget_md(res, ["recall"])]
    for cat, cname in res["categories"].items():
        if not any(cat in s["by_category"] for s in res["systems"].values()):
            continue
        n = next(iter(res["systems"].values()))["by_category"].get(cat, {}).get("n", 0)
        lines += ["", f"## Category {cat} ({cname}, {n} questions)", ""]
        bk = [f"recall@{b}t" for b in res.get("budgets", ())]
        header = [
            "system",
            *[f"R@{k}" for k in ks],
            "hit@5",
            "MRR",
            "nDCG@10",
            *[f"R@{b}t" for b in res.get("budgets", ())],
        ]
        rows = []
        for name, s in res["systems"].items():
            c = s["by_category"].get(cat)
            if c:
                rows.append(
                    [name, *[c[f"recall@{k}"] for k in ks], c["hit@5"], c["mrr"], c["ndcg@10"], *[c.get(k) for k in bk]]
                )
        lines += md_table(header, rows)
    lines += ["", "## Systems", ""]
    lines += [f"- `{n}`: {s.get('description', '')}" for n, s in res["systems"].items()]
    if res["evidence_anomalies"]:
        lines += ["", "## Evidence anomalies (upstream data, normalised)", ""]
        lines += [f"- {a}" for a in res["evidence_anomalies"]]
    return "\n".join(lines) + "\n"


def budget_md(res: dict[str, Any], metrics: Sequence[str]) -> list[str]:
    """The budgeted view: recall within a memory section of B tokens (filled by memclaw.context.memory_section, as the
    prompt is), beside the count view with what its top k costs in tokens."""
    budgets = res.get("budgets") or []
    if not budgets:
        return []
    lines = [
        "## Within a memory budget (the prompt's view)",
        "",
        f"Each system's top {res.get('k_ranked')} units go through the memory-section fill of the prompt at B tokens "
        f"(counted for `{res.get('token_model')}`); only the units kept count. `tok@k`: mean tokens the top k would "
        "take in the memory section; `used@Bt`: mean tokens the kept units take.",
        "",
    ]
    header = ["system"]
    for m in metrics:
        short = {"recall": "R", "recall_any": "any", "recall_all": "all"}[m]
        header += [f"{short}@{b}t" for b in budgets]
    header += [f"used@{b}t" for b in budgets] + ["tok@5", "tok@10"]
    rows = []
    for name, s in res["systems"].items():
        row = [name]
        for m in metrics:
            row += [s.get(f"{m}@{b}t") for b in budgets]
        row += [s.get(f"tokens@{b}t") for b in budgets] + [s.get("tokens@5"), s.get("tokens@10")]
        rows.append(row)
    return lines + md_table(header, rows)


def budget_plot(res: dict[str, Any], path: Path, *, key: str = "recall", title: str = "") -> None:
    """Recall against the memory budget (tokens), one line per system."""
    budgets = res["budgets"]
    _systems_plot(
        res,
        path,
        lambda s: (budgets, [s[f"{key}@{b}t"] for b in budgets]),
        xlabel="memory budget (tokens in the prompt's memory section)",
        ylabel=f"{key} within the budget",
        title=title or f"{res['dataset']} {res.get('corpus', '')} — recall within a token budget",
        log_base=2,
    )


def recall_plot(res: dict[str, Any], path: Path, *, keys: Sequence[str] | None = None, title: str = "") -> None:
    """recall@k curves per system."""

    def series(s: dict[str, Any]) -> tuple[list[int], list[float]]:
        ks_keys = [k for k in (keys or [f"recall@{k}" for k in M.RECALL_KS]) if k in s]
        return [int(k.split("@")[1]) for k in ks_keys], [s[k] for k in ks_keys]

    _systems_plot(
        res,
        path,
        series,
        xlabel="k (units returned)",
        ylabel=(keys[0].split("@")[0] if keys else "evidence recall") + "@k",
        title=title or f"{res['dataset']} — corpus {res.get('corpus', '')}, {res['n_questions']} questions",
    )


def _systems_plot(
    res: dict[str, Any],
    path: Path,
    series: Callable[[dict[str, Any]], tuple[list[int], list[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    log_base: int = 10,
) -> None:
    """One line per system, `series(system results) -> (xs, ys)`, the default in bold black (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    xs: list[int] = []
    colors = plt.get_cmap("tab20").colors  # distinct colours for up to 20 systems
    for i, (name, s) in enumerate(res["systems"].items()):
        xs, ys = series(s)
        main = name == "hybrid"
        ax.plot(
            xs,
            ys,
            marker="o",
            label=name,
            color="black" if main else colors[(2 * i) % 20 + (i // 10) % 2],
            linewidth=2.6 if main else 1.1,
            zorder=3 if main else 2,
        )
    ax.set_xscale("log", base=log_base)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.3)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_locomo_results(res: dict[str, Any], out_dir: Path) -> list[Path]:
    """DIR/locomo.json (without per-question details), locomo.md, locomo-recall.png, and
    locomo-details.json when the run kept details."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "locomo.json", out_dir / "locomo.md", out_dir / "locomo-recall.png"]
    summary = {k: v for k, v in res.items() if k not in ("questions", "rankings")}
    paths[0].write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    if "rankings" in res:
        paths.append(write_rankings(res, out_dir / "locomo-rankings.json.gz"))
    if "questions" in res:
        paths.append(out_dir / "locomo-details.json")
        paths[-1].write_text(json.dumps(res["questions"], indent=1) + "\n", "utf-8")
    paths[1].write_text(locomo_markdown(res), "utf-8")
    recall_plot(res, paths[2])
    if res.get("budgets"):
        paths.append(out_dir / "locomo-budget.png")
        budget_plot(res, paths[-1])
    return paths


def print_summary(res: dict[str, Any], keys: Sequence[str]) -> None:
    """A compact table of the main numbers on stdout."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{res['dataset']} {res.get('corpus', '')} — {res['n_questions']} questions")
    t.add_column("system", no_wrap=True)
    for k in keys:
        short = k.replace("recall_any", "any").replace("recall_all", "all").replace("recall", "R").replace("_ms", "")
        t.add_column(short, justify="right", no_wrap=True)
    for name, s in res["systems"].items():
        t.add_row(name, *[_fmt(s.get(k, "")) for k in keys])
    Console(file=sys.stdout, width=200, markup=False, emoji=False).print(t)
