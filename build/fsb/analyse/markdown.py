"""report.md of `fsb analyse`: the analysis dict (`fsb.analyse.analysis.analyse`) as markdown tables, one
small function per section (histogram, bins against the paper, seed and prompt types, distinctive terms),
and the console line of a bin's marking words (`marking_line`), consistent with the report.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["Z_MARK", "analysis_markdown", "format_below", "marking_line"]


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _md_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _crosstab_md(table: dict[str, Any], what: str) -> list[str]:
    bins = table["bins"]
    n = sum(table["row_totals"].values())
    rows = [
        [
            lv,
            *(f"{table['counts'][lv][b]} ({_pct(table['counts'][lv][b], table['row_totals'][lv])})" for b in bins),
            table["row_totals"][lv],
        ]
        for lv in table["levels"]
    ]
    rows.append(["**all**", *(f"{table['bin_totals'][b]} ({_pct(table['bin_totals'][b], n)})" for b in bins), n])
    t = table["test"]
    lines = _md_table([what, *bins, "total"], rows)
    lines.append("")
    lines.append(
        f"Counts (share of the row). Chi-square test of independence: chi2 = {t['chi2']:.2f}, dof = {t['dof']}, "
        f"p = {t['p']:.3g}, Cramér's V = {t['cramers_v']:.3f}."
    )
    if table["absent_levels"]:
        lines.append(f"Not in the data: {', '.join(table['absent_levels'])} (0 sentences).")
    return lines


Z_MARK = 1.96  # the two-sided 5% mark report.md names for the log-odds z (not corrected for the number of terms)


def marking_line(bin_name: str, terms: list[dict[str, Any]], top: int = 5) -> str:
    """One console line for a bin's distinctive words, consistent with report.md: of the `top` terms by z,
    those with z > 1.96, each with its z; the ones below are counted, not shown (report.md lists them)."""
    head = terms[:top]
    rule = f"of the top {top} by z, those with z > {Z_MARK}, the uncorrected two-sided 5% mark of report.md"
    shown = [t for t in head if t["z"] > Z_MARK]
    words = ", ".join(f"{t['term']} (z {t['z']:.2f})" for t in shown)
    if not head:
        words = "(no term ranked)"
    elif not shown:
        words = f"none of the {len(head)} has z > {Z_MARK}"
    elif len(shown) < len(head):
        words += f"; {len(head) - len(shown)} more below {Z_MARK} not shown"
    return f"words marking the {bin_name} bin ({rule}): {words}"


def format_below(x: float, edge: float | None, decimals: int = 3) -> str:
    """x with `decimals` places, or as many more as it takes for the printed value to stay below `edge`
    (a bin's open upper edge): 0.3158 in [0, 0.316) prints 0.3158, not 0.316. No edge: `decimals` places."""
    if edge is not None and x < edge:
        while decimals < 17 and float(f"{x:.{decimals}f}") >= edge:
            decimals += 1
    return f"{x:.{decimals}f}"


def _histogram_md(result: dict[str, Any]) -> list[str]:
    """The title, the dataset line, the bins' edges and the score histogram's table."""
    edges = result["bins"]["edges"]
    n = result["n_sentences"]
    out = [
        "# Fifty Shades of Bias: analyses",
        "",
        f"Dataset: `{result['source']}`"
        + (f" (fingerprint `{result['fingerprint'][:16]}`)" if result.get("fingerprint") else "")
        + f", {n} sentences.",
        f"Analysis bins (Hada et al. 2023): low [0, {edges[0]}), medium [{edges[0]}, {edges[1]}), high [{edges[1]}, 1].",
        "",
        "## Score histogram",
        "",
        "![score histogram](score_histogram.png)",
        "",
    ]
    e = result["histogram"]["edges"]
    counts = result["histogram"]["counts"]
    out += _md_table(
        ["score", "sentences", "share"],
        [[f"[{e[k]:.1f}, {e[k + 1]:.1f}{']' if k == len(counts) - 1 else ')'}", c, _pct(c, n)] for k, c in enumerate(counts)],
    )
    return out


def _bins_md(result: dict[str, Any]) -> list[str]:
    """The analysis bins beside the paper's counts, what the comparison means, and the scores per bin."""
    names = result["bins"]["names"]
    edges = result["bins"]["edges"]
    out = ["", "## Analysis bins: this dataset and the paper", ""]
    out += _md_table(
        ["counts", *names, "total"],
        [[r["what"], *(r["counts"][b] for b in names), sum(r["counts"].values())] for r in result["bins"]["compared"]],
    )
    if any(r["what"].startswith("the release's scores") for r in result["bins"]["compared"]):
        history = (
            "The release's judgments were extended after the paper, so its bins differ from the paper's; "
            "the edges are the paper's, not tuned."
        )
    else:
        history = (
            "This dataset is not (or is not known to be) the release the paper describes (see its card's provenance): "
            "the paper's counts describe other judgments; the edges are the paper's, not tuned."
        )
    out += ["", history, ""]
    uppers = [*edges, None]  # each bin's open upper edge; the last bin is closed at 1
    out += _md_table(
        ["bin", "n", "mean score", "sd", "min", "max"],
        [
            [b, s["n"], *(f"{s[k]:.3f}" for k in ("mean", "sd", "min")), format_below(s["max"], upper)]
            if s["n"]
            else [b, 0, "-", "-", "-", "-"]
            for (b, s), upper in zip(result["score_by_bin"].items(), uppers)
        ],
    )
    return out


def _types_md(result: dict[str, Any]) -> list[str]:
    """Seed type and prompt type by bin (cross tables with their tests), and the scores by seed type."""
    out = ["", "## Seed type by bin", "", "![seed type by bin](seed_type_by_bin.png)", ""]
    out += _crosstab_md(result["seed_type_by_bin"], "seed type")
    out += ["", "## Prompt type by bin", "", "![prompt type by bin](prompt_type_by_bin.png)", ""]
    out += _crosstab_md(result["prompt_type_by_bin"], "prompt type")
    out += ["", "## Scores by seed type", "", "![scores by seed type](score_by_seed_type.png)", ""]
    out += _md_table(
        ["seed type", "n", "mean", "sd", "min", "q1", "median", "q3", "max"],
        [
            [lv, s["n"], *(f"{s[k]:.3f}" for k in ("mean", "sd", "min", "q1", "median", "q3", "max"))]
            for lv, s in result["score_by_seed_type"].items()
        ],
    )
    return out


def _terms_md(result: dict[str, Any]) -> list[str]:
    """The method of the distinctive terms, then one ranked table per bin for unigrams and for bigrams."""
    names = result["bins"]["names"]
    d = result["distinctive"]
    out = [
        "",
        "## Distinctive words and bigrams per bin",
        "",
        f"Method: {d['method']}. Prior: {d['prior']}. z > {Z_MARK} is the usual two-sided 5% mark (not corrected for the "
        f"number of terms). Tokenizer: {d['tokenizer']}. Stopwords: {d['stopwords']}; an n-gram is dropped only when "
        f"all its words are stopwords. Terms with a pooled count below {d['min_count']} are not ranked. "
        "Counts: occurrences in the bin / in the other two bins.",
    ]
    for label in ("unigrams", "bigrams"):
        for b in names:
            out += ["", f"### {label.capitalize()} marking the {b} bin", ""]
            rows = [
                [k + 1, f"`{t['term']}`", f"{t['z']:.2f}", f"{t['delta']:.2f}", t["count"], t["count_rest"]]
                for k, t in enumerate(d[label][b])
            ]
            out += _md_table(["rank", "term", "z", "log-odds ratio", f"count in {b}", "count elsewhere"], rows) if rows else ["(none)"]
    return out


def analysis_markdown(result: dict[str, Any]) -> str:
    """The analysis as markdown (report.md): every figure's numbers as tables, the distinctive terms, the bins
    vs the paper.

    Parameters
    ----------
    result
        `fsb.analyse.analysis.analyse`'s dict.

    Returns
    -------
    str
        The report, one section after another (histogram, bins, types, terms), ending with a newline;
        deterministic: the same result gives the same bytes.
    """
    return "\n".join([*_histogram_md(result), *_bins_md(result), *_types_md(result), *_terms_md(result), ""])
