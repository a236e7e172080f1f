"""The paper's analyses of the dataset (Hada et al. 2023): the score histogram, how seed types and prompt
types fall into the three analysis bins, and which words and bigrams mark each bin.

Small pure functions compute each number (`score_histogram`, `analysis_bins`, `score_summary`, `crosstab`,
`chi_square_independence`; the words come from `terms`); `analyse` puts them together into one JSON-ready
dict, `analysis_markdown` (in `markdown`) turns that into markdown, `figures.write_figures` draws it, and
`write_analysis` writes the whole folder atomically. The dataset is read by `sentences.read_sentences`. Every output is
deterministic: same dataset, same bytes (no timestamps, fixed figure sizes, ties broken by the term).
Bins are fifty_shades_of_bias's (`bin_codes` at 1e-9 precision, so 0.3 stored as 0.2999... opens [0.3, 0.4)).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import fifty_shades_of_bias as spec
from fsb import __version__
from fsb.analyse.figures import FIGURES, write_figures
from fsb.analyse.markdown import Z_MARK, analysis_markdown, format_below, marking_line
from fsb.analyse.sentences import Sentences, read_sentences
from fsb.analyse.terms import TOKENIZER, distinctive_terms, load_stopwords, term_counts
from fsb.core.folders import atomic_dir, check_replaceable_dir
from fsb.core.seals import seal_difference

__all__ = [
    "FIGURES",
    "Z_MARK",
    "Sentences",
    "analyse",
    "analysis_bins",
    "analysis_markdown",
    "chi_square_independence",
    "crosstab",
    "format_below",
    "is_analysis_folder",
    "marking_line",
    "read_sentences",
    "score_histogram",
    "score_summary",
    "write_analysis",
]

# --- scores and bins -----------------------------------------------------------------------------


def _scores(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or not np.all(np.isfinite(s)) or (s.size and (s.min() < 0 or s.max() > 1)):
        raise ValueError("scores must be a 1-d array of finite numbers in [0, 1]")
    return s


def score_histogram(scores: Sequence[float] | np.ndarray) -> list[int]:
    """Counts of scores in the ten bins of width 0.1 (fifty_shades_of_bias.HISTOGRAM_BIN_EDGES): [0, .1), ...,
    [.9, 1]. A score on an edge (0.3) opens the bin above it whatever its float rounding; 1.0 is in the last."""
    codes = spec.bin_codes(_scores(scores), spec.HISTOGRAM_BIN_EDGES)
    return [int(c) for c in np.bincount(codes, minlength=len(spec.HISTOGRAM_BIN_EDGES) + 1)]


def analysis_bins(scores: Sequence[float] | np.ndarray, edges: Sequence[float] = spec.ANALYSIS_BIN_EDGES) -> np.ndarray:
    """The paper's analysis bin of each score as a code 0..len(edges): with the paper's edges
    0 = low [0, .316), 1 = medium [.316, .579), 2 = high [.579, 1] (Hada et al. 2023)."""
    return spec.bin_codes(_scores(scores), edges)


def score_summary(scores: Sequence[float] | np.ndarray) -> dict[str, float | int]:
    """n, mean, sample sd (ddof 1), min, quartiles (numpy's linear interpolation) and max of scores."""
    s = np.asarray(scores, dtype=float)
    if s.size == 0:
        return {"n": 0}
    q1, median, q3 = (float(v) for v in np.quantile(s, [0.25, 0.5, 0.75]))
    return {
        "n": int(s.size),
        "mean": float(s.mean()),
        "sd": float(s.std(ddof=1)) if s.size > 1 else 0.0,
        "min": float(s.min()),
        "q1": q1,
        "median": median,
        "q3": q3,
        "max": float(s.max()),
    }


def crosstab(rows: Sequence[str], cols: Sequence[str], row_levels: Sequence[str], col_levels: Sequence[str]) -> np.ndarray:
    """Contingency table: entry [r, c] counts the items whose row label is row_levels[r] and whose column
    label is col_levels[c]. Every label must be one of the levels (so the table sums to len(rows))."""
    if len(rows) != len(cols):
        raise ValueError("rows and cols must have the same length")
    r_index = {v: i for i, v in enumerate(row_levels)}
    c_index = {v: i for i, v in enumerate(col_levels)}
    table = np.zeros((len(row_levels), len(col_levels)), dtype=np.int64)
    for r, c in zip(rows, cols):
        if r not in r_index or c not in c_index:
            raise ValueError(f"label {r if r not in r_index else c!r} is not among the levels")
        table[r_index[r], c_index[c]] += 1
    return table


def chi_square_independence(table: np.ndarray) -> dict[str, float | int]:
    """Pearson's chi-square test of independence of a contingency table, with Cramér's V.

    chi2 = sum (O - E)^2 / E with E[r, c] = row_r * col_c / n, over the rows and columns that are not all
    zero; dof = (R - 1)(C - 1); p from the chi-square distribution; V = sqrt(chi2 / (n (min(R, C) - 1)))
    (Cramér 1946). No continuity correction.
    """
    from scipy.stats import chi2 as chi2_dist

    t = np.asarray(table, dtype=float)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
    n = t.sum()
    r, c = t.shape
    if r < 2 or c < 2:
        return {"chi2": 0.0, "dof": 0, "p": 1.0, "cramers_v": 0.0, "n": int(n)}
    expected = np.outer(t.sum(axis=1), t.sum(axis=0)) / n
    chi2 = float(((t - expected) ** 2 / expected).sum())
    dof = (r - 1) * (c - 1)
    return {
        "chi2": chi2,
        "dof": dof,
        "p": float(chi2_dist.sf(chi2, dof)),
        "cramers_v": math.sqrt(chi2 / (n * (min(r, c) - 1))),
        "n": int(n),
    }


# --- the whole analysis --------------------------------------------------------------------------


def _levels(values: pd.Series, known: Sequence[str]) -> list[str]:
    """The labels present, in the schema's order, then any unknown ones sorted."""
    present = set(values)
    return [v for v in known if v in present] + sorted(present - set(known))


def _table(frame: pd.DataFrame, column: str, known: Sequence[str], bins: np.ndarray) -> dict[str, Any]:
    levels = _levels(frame[column], known)
    names = list(spec.BIN_NAMES)
    t = crosstab(frame[column].tolist(), [names[b] for b in bins], levels, names)
    return {
        "levels": levels,
        "bins": names,
        "counts": {lv: {b: int(t[i, j]) for j, b in enumerate(names)} for i, lv in enumerate(levels)},
        "row_totals": {lv: int(t[i].sum()) for i, lv in enumerate(levels)},
        "bin_totals": {b: int(t[:, j].sum()) for j, b in enumerate(names)},
        "absent_levels": [v for v in known if v not in levels],
        "test": chi_square_independence(t),
    }


def analyse(
    sentences: Sentences | pd.DataFrame,
    *,
    top: int = 15,
    min_count: int = 5,
    stopwords: frozenset[str] | None = None,
    prior_scale: float | None = None,
) -> dict[str, Any]:
    """Every number of the analysis, as a JSON-ready dict (see the module docstring). `stopwords`: None
    for the project's list, frozenset() to keep every word."""
    if isinstance(sentences, pd.DataFrame):
        sentences = Sentences(sentences, "<table>", None)
    frame = sentences.frame
    stop = load_stopwords() if stopwords is None else stopwords
    scores = frame["score"].to_numpy(dtype=float)
    bins = analysis_bins(scores)
    names = list(spec.BIN_NAMES)
    counts = {b: int((bins == i).sum()) for i, b in enumerate(names)}
    bin_rows: list[dict[str, Any]] = [{"counts": counts, "what": "this dataset (its exact scores)"}]
    # The release's score file rounds score_raw to 3 decimals: that row exists only for the release itself
    # (its stats.json says so: the inputs' sha256 are the pinned release's, one round).
    is_release = bool(((sentences.stats or {}).get("release") or {}).get("is_release"))
    if "score_raw" in frame and is_release:
        rounded = spec.rounded_bin_codes(frame["score_raw"].to_numpy(dtype=float), spec.ANALYSIS_BIN_EDGES)
        bin_rows.append(
            {
                "counts": {b: int((rounded == i).sum()) for i, b in enumerate(names)},
                "what": "the release's scores (score_raw rounded to 3 decimals)",
            }
        )
    bin_rows.append({"counts": dict(spec.PAPER["bin_counts"]), "what": "the paper (Hada et al. 2023), from its 5285 judgments"})
    texts = frame["text"].astype(str).tolist()
    by_bin = {b: [t for t, k in zip(texts, bins) if k == i] for i, b in enumerate(names)}
    terms = {
        label: distinctive_terms({b: term_counts(by_bin[b], n, stop) for b in names}, min_count=min_count, top=top, prior_scale=prior_scale)
        for label, n in (("unigrams", 1), ("bigrams", 2))
    }
    checks: dict[str, Any] = {}
    if "bin" in frame:
        checks["bin_column_agrees"] = bool((frame["bin"].astype(str).to_numpy() == np.asarray(names)[bins]).all())
    st = sentences.stats or {}
    if isinstance(st.get("bins"), dict) and "counts" in st["bins"]:
        checks["stats_json_bins_agree"] = {b: st["bins"]["counts"].get(b) for b in names} == counts
    return {
        "source": sentences.source,
        "fingerprint": (sentences.stats or {}).get("fingerprint"),
        "n_sentences": len(frame),
        "made_with": {"fsb": __version__},
        "histogram": {"edges": [0.0, *spec.HISTOGRAM_BIN_EDGES, 1.0], "counts": score_histogram(scores)},
        "bins": {"edges": list(spec.ANALYSIS_BIN_EDGES), "names": names, "counts": counts, "compared": bin_rows},
        "score_by_bin": {b: score_summary(scores[bins == i]) for i, b in enumerate(names)},
        "seed_type_by_bin": _table(frame, "seed_type", spec.SEED_TYPES, bins),
        "prompt_type_by_bin": _table(frame, "prompt_type", spec.PROMPT_TYPES, bins),
        "score_by_seed_type": {
            lv: score_summary(scores[(frame["seed_type"] == lv).to_numpy()]) for lv in _levels(frame["seed_type"], spec.SEED_TYPES)
        },
        "distinctive": {
            "method": (
                "weighted log-odds ratio, informative Dirichlet prior (Monroe, Colaresi and Quinn 2008); each bin against the other two"
            ),
            "prior": "alpha_w = pooled count of w" if prior_scale is None else f"alpha_w = {prior_scale} * pooled share of w",
            "tokenizer": TOKENIZER,
            "stopwords": "none" if not stop else ("project list" if stopwords is None else "custom list") + f" ({len(stop)} words)",
            "min_count": min_count,
            "top": top,
            **terms,
        },
        "checks": checks,
    }


# --- markdown ------------------------------------------------------------------------------------


ANALYSIS_KIND = "an earlier `fsb analyse` output (figures, report.md, analysis.json)"


ANALYSIS_SEAL = "fsb analyse"


def analysis_folder_difference(folder: str | os.PathLike[str]) -> str | None:
    """None when `folder` is an earlier analysis exactly as `fsb analyse` wrote it (its seal matches: no file
    edited, added or removed); else the first difference. An analysis without a seal is not recognised."""
    return seal_difference(folder, ANALYSIS_SEAL)


def is_analysis_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether `folder` holds an earlier analysis, unchanged, and nothing else."""
    return analysis_folder_difference(folder) is None


def write_analysis(
    sentences: Sentences,
    out: str | os.PathLike[str],
    *,
    top: int = 15,
    min_count: int = 5,
    stopwords: frozenset[str] | None = None,
    prior_scale: float | None = None,
) -> dict[str, Any]:
    """Analyse and write OUT in one rename: the figures (FIGURES), report.md and analysis.json.

    OUT is replaced only if it does not exist, is empty, or holds an earlier analysis and nothing else
    (`analysis_folder_difference`, unchanged): never a folder of other files, the current folder or the dataset's folder.
    """
    inputs = [sentences.source] if Path(str(sentences.source)).exists() else []
    target = check_replaceable_dir(out, changed=analysis_folder_difference, kind=ANALYSIS_KIND, inputs=inputs)
    result = analyse(sentences, top=top, min_count=min_count, stopwords=stopwords, prior_scale=prior_scale)
    with atomic_dir(target, changed=analysis_folder_difference, kind=ANALYSIS_KIND, inputs=inputs, seal=ANALYSIS_SEAL) as stage:
        write_figures(sentences, result, stage)
        (stage / "report.md").write_text(analysis_markdown(result), encoding="utf-8")
        (stage / "analysis.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return result
