"""The PNG plots of a benchmark run (matplotlib, Agg): recall@k curves and recall within a token budget, one line
per system; recall latency against the number of memories (`bench perf`)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memclaw.bench import metrics as M


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
    try:
        import matplotlib
    except ImportError:
        _no_matplotlib()
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    xs: list[int] = []
    # Distinct colours for up to 20 systems
    colors = plt.get_cmap("tab20").colors
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


def perf_plot(res: dict[str, Any], path: Path) -> None:
    """Warm recall p50 and p95 (ms) against the number of memories, one point per size measured."""
    try:
        import matplotlib
    except ImportError:
        _no_matplotlib()
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = res["sizes"]
    xs = [r["memories"] for r in sizes]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for key, label, style in (("recall_p50_ms", "p50", "-"), ("recall_p95_ms", "p95", "--")):
        ax.plot(
            xs,
            [r[key] for r in sizes],
            style,
            marker="o" if label == "p50" else "s",
            color="black",
            label=f"warm recall {label}",
        )
    if len(xs) > 1:
        ax.set_xscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:,}" for x in xs])
    ax.set_xlabel("memories in the index")
    ax.set_ylabel("ms")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(f"memclaw recall latency, {res['date']}")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


@functools.cache
def _no_matplotlib() -> None:
    """Say once per process that plots are skipped: matplotlib is the optional extra `plots`."""
    print("plots skipped: matplotlib is not installed (pip install 'memclaw[plots]')", file=sys.stderr)
