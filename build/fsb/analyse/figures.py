"""The figures of `fsb analyse`, drawn from the analysis result with matplotlib's Agg backend (imported
inside the functions: the statistics never need it). Fixed sizes, matplotlib's default style whatever the
user's matplotlibrc says, and no version or timestamp in the PNG: the same numbers give the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fsb.analyse.sentences import Sentences

__all__ = ["FIGURES", "plot_histogram", "plot_prompt_type_by_bin", "plot_score_by_seed_type", "plot_seed_type_by_bin", "write_figures"]

# The figures: file name -> (width, height) in pixels (dpi 100).
FIGURES: dict[str, tuple[int, int]] = {
    "score_histogram.png": (800, 480),
    "seed_type_by_bin.png": (800, 480),
    "prompt_type_by_bin.png": (800, 480),
    "score_by_seed_type.png": (800, 480),
}
_DPI = 100
_BIN_COLOURS = {"low": "#4c9f70", "medium": "#f0a33a", "high": "#c8453b"}


def _figure(name: str) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    w, h = FIGURES[name]
    fig = Figure(figsize=(w / _DPI, h / _DPI), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: Path) -> None:
    # No "Software" (matplotlib's version) or timestamp in the PNG: the same numbers give the same bytes.
    fig.savefig(path, format="png", dpi=_DPI, metadata={"Software": None})


def _rc() -> Any:
    """matplotlib's default style whatever the user's matplotlibrc says, plus a few settings of ours."""
    import matplotlib.style

    return matplotlib.style.context(["default", {"font.size": 10, "axes.spines.top": False, "axes.spines.right": False}])


def plot_histogram(result: dict[str, Any], path: Path) -> None:
    """Bars of the 10-bin score histogram, the analysis bin edges as dashed lines, counts on the bars."""
    with _rc():
        fig = _figure("score_histogram.png")
        ax = fig.add_subplot()
        e = result["histogram"]["edges"]
        bars = ax.bar(
            e[:-1], result["histogram"]["counts"], width=e[1] - e[0], align="edge", color="#7a8fb3", edgecolor="black", linewidth=0.6
        )
        ax.bar_label(bars, fontsize=9)
        lo, hi = result["bins"]["edges"]
        for x in (lo, hi):
            ax.axvline(x, color="black", linestyle="--", linewidth=1)
        top = max(result["histogram"]["counts"] or [1]) * 1.15
        for name, (a, b) in zip(result["bins"]["names"], ((0, lo), (lo, hi), (hi, 1))):
            ax.text(
                (a + b) / 2,
                top,
                f"{name}: {result['bins']['counts'][name]}",
                ha="center",
                va="bottom",
                color=_BIN_COLOURS[name],
                weight="bold",
            )
        ax.set_ylim(0, top * 1.1)
        ax.set_xlim(0, 1)
        ax.set_xticks(e)
        ax.set_xlabel("bias score (0 = least, 1 = most negatively biased)")
        ax.set_ylabel("sentences")
        ax.set_title(f"Scores of {result['n_sentences']} sentences (bins of 0.1; dashed: analysis bin edges {lo}, {hi})")
        _save(fig, path)


def format_p(p: float) -> str:
    """A p-value as printed beside a test: "p = 0.012", "p = 3.4e-08", or "p < 1e-300" when it underflows to 0."""
    return "p < 1e-300" if p == 0 else f"p = {p:.2g}" if p >= 1e-3 else f"p = {p:.1e}"


def by_bin_title(table: dict[str, Any], what: str) -> str:
    """The title of a by-bin bar chart: what is shown and its chi-square test (statistic, dof, p, Cramér's V)."""
    t = table["test"]
    return (
        f"{what.capitalize()} by analysis bin\n(chi-square test of independence: chi2 = {t['chi2']:.1f}, dof {t['dof']}, "
        f"{format_p(t['p'])}, Cramér's V = {t['cramers_v']:.2f})"
    )


def _plot_by_bin(table: dict[str, Any], what: str, name: str, path: Path) -> None:
    with _rc():
        fig = _figure(name)
        ax = fig.add_subplot()
        levels, bins = table["levels"], table["bins"]
        width = 0.8 / len(bins)
        x = np.arange(len(levels))
        for j, b in enumerate(bins):
            bars = ax.bar(
                x + (j - (len(bins) - 1) / 2) * width,
                [table["counts"][lv][b] for lv in levels],
                width=width,
                label=b,
                color=_BIN_COLOURS.get(b),
                edgecolor="black",
                linewidth=0.6,
            )
            ax.bar_label(bars, fontsize=9)
        ax.set_xticks(x, [f"{lv}\n(n = {table['row_totals'][lv]})" for lv in levels])
        ax.set_ylabel("sentences")
        ax.set_xlabel(what)
        ax.margins(y=0.12)
        ax.legend(title="analysis bin", frameon=False)
        ax.set_title(by_bin_title(table, what), fontsize=10)
        _save(fig, path)


def plot_seed_type_by_bin(result: dict[str, Any], path: Path) -> None:
    """Grouped bars: for each seed type, its sentences in the low, medium and high bins."""
    _plot_by_bin(result["seed_type_by_bin"], "seed type", "seed_type_by_bin.png", path)


def plot_prompt_type_by_bin(result: dict[str, Any], path: Path) -> None:
    """Grouped bars: for each prompt type, its sentences in the low, medium and high bins."""
    _plot_by_bin(result["prompt_type_by_bin"], "prompt type", "prompt_type_by_bin.png", path)


def plot_score_by_seed_type(sentences: Sentences, result: dict[str, Any], path: Path) -> None:
    """Box plots of the scores of each seed type (whiskers 1.5 IQR), the analysis bin edges dashed."""
    frame = sentences.frame
    levels = list(result["score_by_seed_type"])
    with _rc():
        fig = _figure("score_by_seed_type.png")
        ax = fig.add_subplot()
        data = [frame.loc[frame["seed_type"] == lv, "score"].to_numpy(dtype=float) for lv in levels]
        ax.boxplot(data, showmeans=True, widths=0.5)
        ax.set_xticks(range(1, len(levels) + 1), [f"{lv}\n(n = {len(d)})" for lv, d in zip(levels, data)])
        for y in result["bins"]["edges"]:
            ax.axhline(y, color="grey", linestyle="--", linewidth=1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("bias score")
        ax.set_xlabel("seed type")
        ax.set_title("Scores by seed type (box: quartiles, line: median, triangle: mean; dashed: bin edges)")
        _save(fig, path)


def write_figures(sentences: Sentences, result: dict[str, Any], folder: Path) -> None:
    """Every figure of FIGURES into `folder`."""
    plot_histogram(result, folder / "score_histogram.png")
    plot_seed_type_by_bin(result, folder / "seed_type_by_bin.png")
    plot_prompt_type_by_bin(result, folder / "prompt_type_by_bin.png")
    plot_score_by_seed_type(sentences, result, folder / "score_by_seed_type.png")
