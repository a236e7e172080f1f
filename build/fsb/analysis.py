"""The paper's analyses of the dataset (Hada et al. 2023): the score histogram, how seed types
and prompt types fall into the three analysis bins, and which words and bigrams mark each bin.

Small pure functions compute each number (`score_histogram`, `analysis_bins`, `crosstab`,
`chi_square_independence`, `log_odds_dirichlet`, `distinctive_terms`, ...); `analyse` puts them
together into one JSON-ready dict, `render_report` turns that into markdown, `plot_*` draw it with
matplotlib's Agg backend, and `write_analysis` writes the whole folder atomically. Every output is
deterministic: same dataset, same bytes (no timestamps, fixed figure sizes, ties broken by the term).

matplotlib is imported inside the plotting functions only: the statistics need numpy and pandas alone.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import fifty_shades_of_bias as spec

from . import __version__
from ._io import InputError, atomic_dir, check_replaceable_dir, read_utf8, read_word_list, seal_difference

__all__ = [
    "FIGURES",
    "STOPWORDS",
    "Sentences",
    "analyse",
    "analysis_bins",
    "chi_square_independence",
    "crosstab",
    "distinctive_terms",
    "load_stopwords",
    "log_odds_dirichlet",
    "ngrams",
    "phrases",
    "read_sentences",
    "render_report",
    "score_histogram",
    "score_summary",
    "term_counts",
    "tokenize",
    "write_analysis",
]

STOPWORDS = Path(__file__).resolve().parent / "wordlists" / "stopwords.txt"
HISTOGRAM_BINS = 10
# Figures written by `write_analysis`: file name -> (width, height) in pixels (dpi 100).
FIGURES: dict[str, tuple[int, int]] = {
    "score_histogram.png": (800, 480),
    "seed_type_by_bin.png": (800, 480),
    "prompt_type_by_bin.png": (800, 480),
    "score_by_seed_type.png": (800, 480),
}
_DPI = 100
_BIN_COLOURS = {"low": "#4c9f70", "medium": "#f0a33a", "high": "#c8453b"}
# Scores are ratios of small integers ((n + best - worst) / 2n); a score that lies on a bin edge can be
# stored a hair below it (0.3 as 0.29999999999999993). Rounding at 1e-9, far below the smallest gap
# between two possible scores, puts it in the bin that [a, b) says.
_EDGE_DECIMALS = 9

# --- tokenizer -----------------------------------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
# Punctuation that ends a phrase: anything but letters, digits, whitespace, apostrophes and hyphens.
_BREAK = re.compile(r"[^\w\s'-]+|_+")


def phrases(text: str) -> list[list[str]]:
    """Tokens of `text`, one list per phrase: lower-cased, curly apostrophes made straight, split at
    punctuation (, . ; : ! ? quotes ...), words matched by [a-z0-9]+(['-][a-z0-9]+)* (so "self-absorbed"
    and "doesn't" stay whole) and a possessive or contracted 's removed ("woman's" -> "woman")."""
    out = []
    for part in _BREAK.split(text.lower().replace("\u2019", "'").replace("\u2018", "'")):
        words = [w[:-2] if w.endswith("'s") else w for w in _TOKEN.findall(part)]
        if words:
            out.append(words)
    return out


def tokenize(text: str) -> list[str]:
    """The words of `text` in order (see `phrases` for the rules)."""
    return [w for phrase in phrases(text) for w in phrase]


def ngrams(words: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """The contiguous n-grams of a word sequence."""
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def load_stopwords(path: str | os.PathLike[str] | None = None) -> frozenset[str]:
    """A stopword list: one lower-case word a line, # starts a comment (default: the project's list)."""
    return read_word_list(Path(path) if path is not None else STOPWORDS, _TOKEN)


def term_counts(texts: Iterable[str], n: int = 1, stopwords: frozenset[str] = frozenset()) -> Counter[str]:
    """How often each n-gram occurs in `texts` (n-grams never span punctuation), joined by spaces.

    An n-gram made only of stopwords is dropped; one with at least one other word is kept, so with
    stopwords "better than" stays and "of the" goes. For n = 1 that is plain stopword removal.
    """
    counts: Counter[str] = Counter()
    for text in texts:
        for phrase in phrases(text):
            for gram in ngrams(phrase, n):
                if not all(w in stopwords for w in gram):
                    counts[" ".join(gram)] += 1
    return counts


# --- scores and bins -----------------------------------------------------------------------------


def _scores(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or not np.all(np.isfinite(s)) or (s.size and (s.min() < 0 or s.max() > 1)):
        raise ValueError("scores must be a 1-d array of finite numbers in [0, 1]")
    return np.round(s, _EDGE_DECIMALS)


def score_histogram(scores: Sequence[float] | np.ndarray, n_bins: int = HISTOGRAM_BINS) -> list[int]:
    """Counts of scores in `n_bins` equal bins of [0, 1]: [0, 1/n), [1/n, 2/n), ..., [(n-1)/n, 1].

    Bin k holds the scores with floor(n * score) = k; a score of exactly 1 goes to the last bin. A score
    on an edge (0.3) belongs to the bin it opens ([0.3, 0.4)), whatever its float rounding (see above).
    """
    s = _scores(scores)
    k = np.minimum(np.floor(np.round(s * n_bins, _EDGE_DECIMALS)).astype(int), n_bins - 1)
    return [int(c) for c in np.bincount(k, minlength=n_bins)]


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


# --- distinctive words ---------------------------------------------------------------------------


def log_odds_dirichlet(counts_i: np.ndarray, counts_j: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted log-odds ratio with an informative Dirichlet prior ("Fightin' Words": Monroe, Colaresi
    and Quinn 2008, Political Analysis 16(4), eqs. 16 and 18-20): (delta, variance, z) for every term.

    With y_w^i the count of term w in group i, n^i = sum_w y_w^i, alpha_w the prior and alpha_0 = sum_w alpha_w:
        delta_w = log((y_w^i + a_w) / (n^i + a_0 - y_w^i - a_w)) - log((y_w^j + a_w) / (n^j + a_0 - y_w^j - a_w))
        var_w  ~= 1 / (y_w^i + a_w) + 1 / (y_w^j + a_w),      z_w = delta_w / sqrt(var_w)
    z > 0: w marks group i; z < 0: group j. Every prior entry must be positive.
    """
    yi = np.asarray(counts_i, dtype=float)
    yj = np.asarray(counts_j, dtype=float)
    a = np.asarray(prior, dtype=float)
    if not (yi.shape == yj.shape == a.shape) or yi.ndim != 1:
        raise ValueError("counts_i, counts_j and prior must be 1-d arrays of one length")
    if a.size and a.min() <= 0:
        raise ValueError("every prior entry must be positive")
    a0 = a.sum()
    delta = np.log((yi + a) / (yi.sum() + a0 - yi - a)) - np.log((yj + a) / (yj.sum() + a0 - yj - a))
    var = 1.0 / (yi + a) + 1.0 / (yj + a)
    return delta, var, delta / np.sqrt(var)


def distinctive_terms(
    groups: Mapping[str, Mapping[str, int]], *, min_count: int = 5, top: int = 15, prior_scale: float | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The terms that most mark each group against all the others together, by `log_odds_dirichlet`.

    Group g is compared with the pooled counts of the other groups. The prior is informative, from the
    pooled counts of all groups (the background corpus): alpha_w = a_0 * y_w / N, where y_w is w's pooled
    count and N the pooled total; a_0 = `prior_scale`, default N, so alpha_w = y_w (the convention of
    Jurafsky et al. 2014). Only terms with a pooled count >= `min_count` are ranked. Each group gets its
    `top` terms with z > 0, by z descending (ties by the term), with z, delta and the counts.
    """
    names = list(groups)
    pooled: Counter[str] = Counter()
    for counts in groups.values():
        pooled.update(counts)
    vocab = sorted(pooled)
    if not vocab:
        return {g: [] for g in names}
    total = np.array([pooled[w] for w in vocab], dtype=float)
    prior = total * ((prior_scale if prior_scale is not None else total.sum()) / total.sum())
    matrix = np.array([[groups[g].get(w, 0) for w in vocab] for g in names], dtype=float)
    keep = total >= min_count
    out: dict[str, list[dict[str, Any]]] = {}
    for k, g in enumerate(names):
        yi = matrix[k]
        yj = total - yi
        delta, _, z = log_odds_dirichlet(yi, yj, prior)
        order = sorted((i for i in np.flatnonzero(keep & (z > 0))), key=lambda i: (-z[i], vocab[i]))[:top]
        out[g] = [
            {"term": vocab[i], "z": float(z[i]), "delta": float(delta[i]), "count": int(yi[i]), "count_rest": int(yj[i])} for i in order
        ]
    return out


# --- the dataset ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sentences:
    """The default config as a table with string labels, where it came from, and its stats.json if any."""

    frame: pd.DataFrame
    source: str
    stats: dict[str, Any] | None


_REQUIRED = ("text", "score", "seed_type", "prompt_type")


def _card_yaml(card: Path) -> dict[str, Any]:
    import yaml

    text = read_utf8(card)
    if not text.startswith("---"):
        raise InputError(card, "not a dataset card: no YAML block between '---' lines at the top")
    parts = text.split("\n---", 1)
    try:
        meta = yaml.safe_load(parts[0][3:]) if len(parts) == 2 else None
    except yaml.YAMLError as e:
        raise InputError(card, f"the card's YAML does not parse: {str(e).splitlines()[0]}") from None
    if not isinstance(meta, dict):
        raise InputError(card, "not a dataset card: no YAML block between '---' lines at the top")
    return meta


def _default_files(folder: Path) -> list[Path]:
    """The Parquet files of the default config's test split, as the card's YAML lists them."""
    card = folder / "README.md"
    meta = _card_yaml(card)
    configs = meta.get("configs") or []
    config = next((c for c in configs if isinstance(c, dict) and c.get("config_name") == "default"), None)
    if config is None:
        raise InputError(card, "not a Fifty Shades of Bias dataset card: its YAML has no 'default' config")
    entries = config.get("data_files")
    patterns: list[str] = []
    if isinstance(entries, str):
        patterns = [entries]
    elif isinstance(entries, list):
        for e in entries:
            if isinstance(e, str):
                patterns.append(e)
            elif isinstance(e, dict) and e.get("split", spec.SPLIT) == spec.SPLIT:
                p = e.get("path")
                patterns.extend([p] if isinstance(p, str) else list(p or []))
    files = sorted({f for p in patterns for f in folder.glob(p) if f.is_file()})
    if not files:
        raise InputError(card, f"the 'default' config lists no data file that exists in {folder} ({', '.join(patterns) or 'none'})")
    return files


def _labels(values: pd.Series, feature: Any) -> pd.Series:
    names = getattr(feature, "names", None)
    if names is not None and pd.api.types.is_integer_dtype(values):
        return values.map(lambda v: names[int(v)])
    return values.astype(str)


def read_sentences(source: str | os.PathLike[str] | None = None) -> Sentences:
    """Read the default config of a dataset folder (its Parquet files, straight) or a Hub repo (through
    `fifty_shades_of_bias.load`, ClassLabel codes mapped to their names). `source` as in `locate()`."""
    if source is not None:
        given = Path(source).expanduser()
        # "results/ds" that is not there, beside a real "results/": a mistyped folder, not a Hub repo id.
        if not given.exists() and given.parent != Path() and given.parent.is_dir():
            raise InputError(given, "no such dataset folder")
    where = spec.locate(source)
    folder = Path(where)
    stats = None
    if folder.is_dir():
        import pyarrow.parquet as pq

        files = _default_files(folder)
        frames = []
        for f in files:
            try:
                frames.append(pq.read_table(f).to_pandas())
            except Exception as e:  # pyarrow raises several types for a file that is not Parquet
                raise InputError(f, f"cannot read as Parquet: {str(e).splitlines()[0]}") from None
        frame = pd.concat(frames, ignore_index=True)
        bad_at = files[0]
        if (folder / "stats.json").is_file():
            try:
                stats = json.loads(read_utf8(folder / "stats.json"))
            except ValueError as e:
                raise InputError(folder / "stats.json", f"not valid JSON: {e}") from None
    else:
        try:
            ds = spec.load("default", source=where)
        except Exception as e:  # offline, no such repo, no access: one line that says which
            raise spec.DatasetNotFound(
                f"{where!r} is not a folder here and could not be loaded from the Hub: {str(e).splitlines()[0]}"
            ) from None
        split = ds[spec.SPLIT] if spec.SPLIT in ds else ds[next(iter(ds))]
        frame = split.to_pandas()
        for col in ("seed_type", "prompt_type", "bin"):
            if col in frame:
                frame[col] = _labels(frame[col], split.features.get(col))
        bad_at = where
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(bad_at, f"not a Fifty Shades of Bias default config: no column {', '.join(repr(c) for c in missing)}")
    for col in ("seed_type", "prompt_type"):
        frame[col] = frame[col].astype(str)
    score = pd.to_numeric(frame["score"], errors="coerce")
    if score.isna().any() or score.min() < 0 or score.max() > 1:
        raise InputError(bad_at, "column 'score' must hold numbers in [0, 1] for every row", field="score")
    frame["score"] = score.astype(float)
    return Sentences(frame, where, stats)


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
    if "score_raw" in frame:
        rounded = analysis_bins(np.clip((np.round(frame["score_raw"].to_numpy(dtype=float), 3) + 1) / 2, 0, 1))
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
    hist = score_histogram(scores)
    if sentences.stats:
        st = sentences.stats
        if isinstance(st.get("bins"), dict) and "counts" in st["bins"]:
            checks["stats_json_bins_agree"] = {b: st["bins"]["counts"].get(b) for b in names} == counts
        if isinstance(st.get("histogram"), dict) and "counts" in st["histogram"]:
            checks["stats_json_histogram"] = st["histogram"]["counts"]
            checks["stats_json_histogram_agrees"] = st["histogram"]["counts"] == hist
    return {
        "source": sentences.source,
        "fingerprint": (sentences.stats or {}).get("fingerprint"),
        "n_sentences": len(frame),
        "made_with": {"fsb": __version__},
        "histogram": {"edges": [round(k / HISTOGRAM_BINS, 1) for k in range(HISTOGRAM_BINS + 1)], "counts": hist},
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
            "tokenizer": "lower-case; words [a-z0-9]+(['-][a-z0-9]+)*; possessive 's removed; n-grams within punctuation",
            "stopwords": "none" if not stop else ("project list" if stopwords is None else "custom list") + f" ({len(stop)} words)",
            "min_count": min_count,
            "top": top,
            **terms,
        },
        "checks": checks,
    }


# --- report --------------------------------------------------------------------------------------


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


def render_report(result: dict[str, Any]) -> str:
    """The analysis as markdown: every figure's numbers as tables, the distinctive terms, the bins vs the paper."""
    names = result["bins"]["names"]
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
    checks = result.get("checks", {})
    if checks.get("stats_json_histogram_agrees") is False:
        out += [
            "",
            f"The dataset's stats.json gives other counts ({checks['stats_json_histogram']}); the counts above bin each score exactly.",
        ]
    out += ["", "## Analysis bins: this dataset and the paper", ""]
    out += _md_table(
        ["counts", *names, "total"],
        [[r["what"], *(r["counts"][b] for b in names), sum(r["counts"].values())] for r in result["bins"]["compared"]],
    )
    out += [
        "",
        "The release's judgments were extended after the paper, so its bins differ from the paper's; the edges are the paper's, not tuned.",
        "",
    ]
    out += _md_table(
        ["bin", "n", "mean score", "sd", "min", "max"],
        [
            [b, s["n"], *(f"{s[k]:.3f}" for k in ("mean", "sd", "min", "max"))] if s["n"] else [b, 0, "-", "-", "-", "-"]
            for b, s in result["score_by_bin"].items()
        ],
    )
    out += ["", "## Seed type by bin", "", "![seed type by bin](seed_type_by_bin.png)", ""]
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
    d = result["distinctive"]
    out += [
        "",
        "## Distinctive words and bigrams per bin",
        "",
        f"Method: {d['method']}. Prior: {d['prior']}. z > 1.96 is the usual two-sided 5% mark (not corrected for the "
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
    out.append("")
    return "\n".join(out)


# --- figures -------------------------------------------------------------------------------------


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
        t = table["test"]
        ax.set_title(f"{what.capitalize()} by analysis bin (chi2 = {t['chi2']:.1f}, dof {t['dof']}, Cramér's V = {t['cramers_v']:.2f})")
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
        plot_histogram(result, stage / "score_histogram.png")
        plot_seed_type_by_bin(result, stage / "seed_type_by_bin.png")
        plot_prompt_type_by_bin(result, stage / "prompt_type_by_bin.png")
        plot_score_by_seed_type(sentences, result, stage / "score_by_seed_type.png")
        (stage / "report.md").write_text(render_report(result), encoding="utf-8")
        (stage / "analysis.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return result
