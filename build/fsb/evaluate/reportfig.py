"""The report's figures: the forest plot (every scorer's Pearson r with its interval, the paper's quoted
rows, each row's human ceiling and split-half r; samples drawn dashed) and one scatter plot per row
(model score against human score, one colour per few-shot set, named in the legend)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fsb.evaluate.agreement import set_label
from fsb.evaluate.results import Scored

__all__ = ["LEGEND", "forest_items", "forest_legend", "forest_plot", "is_sample", "num", "scatter_plot", "scatter_title"]


def num(x: float | None) -> float:
    """A figure from the report or its JSON (where NaN is null), as a float.

    Parameters
    ----------
    x : the figure, or None (JSON's null).

    Returns
    -------
    The float, NaN for None.
    """
    return math.nan if x is None else float(x)


def is_sample(row: dict[str, Any]) -> bool:
    """True when a report row is a sample (flagged `sample`, `--limit`): not comparable with full-protocol figures.

    Parameters
    ----------
    row : a report row.

    Returns
    -------
    Whether the row is a sample.
    """
    return any(f.startswith(("sample", "--limit")) for f in row["flags"])


def forest_items(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The forest plot's rows, best first: label, point, interval, kind and the row's own human figures
    (none for the paper's quoted rows). An undefined group is placed at the mean over its defined sets
    and says so; rows whose correlation is not meaningful (the mean baseline) are left out."""
    items = []
    for r in report["rows"]:
        if not r["correlation_meaningful"]:
            continue
        label, value, ci = r["label"], num(r["values"]["pearson"]), r["ci95"]["pearson"]
        if is_sample(r):
            label += f" (sample of {r['sentences']}: not comparable)"
        if math.isnan(value):
            d = r["defined_sets"]["pearson"]
            value, ci = num(d["mean"]), d.get("ci95")
            label += f"\n[undefined: {r.get('undefined')}; mean of {d['sets']}/{d['of']} defined sets]"
        human = r.get("human_reference")
        items.append(
            {
                "label": label,
                "r": value,
                "ci": ci,
                "kind": r["kind"],
                "sample": is_sample(r),
                "human": human if human and "note" not in human else None,
            }
        )
    items += [
        {"label": f"{q['label']} (paper, quoted)", "r": q["pearson"], "ci": None, "kind": "quoted", "sample": False, "human": None}
        for q in report["paper_table6"]
    ]
    items.sort(key=lambda t: -t["r"] if not math.isnan(t["r"]) else math.inf)
    return items


LEGEND = {
    "lm-eval": "lm-eval run",
    "predictions": "prediction file",
    "baseline": "baseline",
    "quoted": "paper Table 6 (quoted; no interval)",
    "sample": "sample (dashed, square): not comparable with the rest",
    "ceiling": "noise ceiling on the row's sentences",
    "split_half": "human split-half r (two half panels)",
}


def forest_legend(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The forest plot's legend entries (key, text): only the kinds of row drawn, and the human ticks only
    when some row carries them."""
    kinds = {t["kind"] for t in items}
    keys = [k for k in ("lm-eval", "predictions", "baseline", "quoted") if k in kinds]
    if any(t.get("sample") for t in items):
        keys.append("sample")
    if any(t["human"] for t in items):
        keys += ["ceiling", "split_half"]
    return [(k, LEGEND[k]) for k in keys]


def forest_plot(report: dict[str, Any], path: Path) -> None:
    """Pearson r with its 95% interval per row, the paper's quoted rows (hollow, no interval), and on each
    measured row its own noise ceiling and split-half r (computed on that row's sentences)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = forest_items(report)
    colors = {"lm-eval": "tab:blue", "predictions": "tab:purple", "baseline": "tab:green", "quoted": "0.45"}
    lines = sum(1 + t["label"].count("\n") for t in items)
    height = 0.3 * lines + 2.0
    fig, ax = plt.subplots(figsize=(9.5, height))
    lows = [t["ci"]["low"] for t in items if t["ci"] is not None and not math.isnan(num(t["ci"]["low"]))]
    lows += [t["r"] for t in items if not math.isnan(t["r"])]
    left = max(-1.05, min([-0.1, *lows]) - 0.05)  # every interval fits: nothing is clipped
    for y, t in enumerate(items):
        c = colors[t["kind"]]
        sample = t.get("sample", False)
        if t["ci"] is not None and not math.isnan(num(t["ci"]["low"])):
            ax.plot([t["ci"]["low"], t["ci"]["high"]], [y, y], color=c, lw=2, ls="--" if sample else "-", solid_capstyle="butt")
        if not math.isnan(t["r"]):
            ax.plot([t["r"]], [y], "s" if sample else "o", mfc="white" if t["kind"] == "quoted" or sample else c, mec=c, ms=7)
        if t["human"]:
            ax.plot([t["human"]["noise_ceiling"]], [y], marker="|", color="black", ms=14, mew=2)
            ax.plot([t["human"]["split_half"]], [y], marker="|", color="0.55", ms=11, mew=1.5)
    ax.set_yticks(range(len(items)), [t["label"] for t in items], fontsize=8)
    ax.set_ylim(len(items) - 0.5, -0.5)
    ax.axvline(0, color="0.8", lw=0.8, zorder=0)
    ax.set_xlim(left, 1.02)
    ax.grid(axis="x", color="0.92", lw=0.6)
    ax.set_xlabel("Pearson r with the human scores (point and 95% interval)")
    handles, labels = [], []
    for key, label in forest_legend(items):
        if key in colors:
            c = colors[key]
            handles.append(plt.Line2D([], [], color=c, marker="o", lw=2, mfc="white" if key == "quoted" else c))
        elif key == "sample":
            handles.append(plt.Line2D([], [], color="0.3", marker="s", ls="--", lw=2, mfc="white"))
        else:
            color, ms, mew = ("black", 12, 2) if key == "ceiling" else ("0.55", 10, 1.5)
            handles.append(plt.Line2D([], [], color=color, marker="|", ls="", ms=ms, mew=mew))
        labels.append(label)
    fig.legend(handles, labels, fontsize=7.5, loc="lower center", ncol=3, frameon=False)
    ax.set_title("Fifty Shades of Bias: agreement with the human scores", fontsize=10)
    fig.tight_layout(rect=(0, 0.55 / height, 1, 1))  # the legend's two lines below the axis
    fig.savefig(path, dpi=120)
    plt.close(fig)


def scatter_title(row: dict[str, Any]) -> str:
    """A scatter plot's title: the row's label, then Pearson r with its interval and n (or why there is none)."""
    n = f"n = {row['sentences']}" + (f" x {row['variants']} sets" if row["variants"] > 1 else "")
    r = num(row["values"]["pearson"])
    if not row["correlation_meaningful"]:
        stat = "r not meaningful (constant by design)"
    elif math.isnan(r):
        d = row["defined_sets"]["pearson"]
        mean = "" if math.isnan(num(d["mean"])) else f"; mean of {d['sets']}/{d['of']} defined sets {d['mean']:.3f}"
        stat = f"r undefined ({row.get('undefined')}){mean}"
    else:
        ci = row["ci95"]["pearson"]
        interval = "" if math.isnan(num(ci["low"])) else f" [{ci['low']:.3f}, {ci['high']:.3f}]"
        stat = f"r = {r:.3f}{interval}" + (" (mean over sets)" if row["variants"] > 1 else "")
    import textwrap

    flag = " (sample: not comparable)" if is_sample(row) else ""
    return "\n".join(textwrap.wrap(f"{row['label']}{flag}", 60) + textwrap.wrap(f"{stat}, {n}", 60))


def scatter_plot(entry: Scored, path: Path, row: dict[str, Any] | None = None) -> None:
    """Model score against human score (every set's points), with the identity line; titled with the
    row's r, interval and n when `row` (its report row) is given; the legend names each set's colour.

    Parameters
    ----------
    entry : the scored row (its sets' answers and human scores).
    path : the PNG to write.
    row : its report row, for the title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    for s in entry.sets:  # one colour per few-shot set, named in the legend
        label = f"few-shot {set_label(s.name)}" if len(entry.sets) > 1 else "sentences"
        ax.scatter(s.preds[s.parsed], s.golds[s.parsed], s=6, alpha=0.4 if len(entry.sets) > 1 else 0.6, label=label)
    ax.plot([0, 1], [0, 1], color="black", lw=1, label="identity (calibrated)")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("model score")
    ax.set_ylabel("human score")
    ax.set_title(scatter_title(row) if row is not None else entry.label, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
