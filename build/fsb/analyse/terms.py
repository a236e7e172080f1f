"""Which words and bigrams mark a group of sentences: a tokenizer (phrases split at punctuation, n-grams
within a phrase), term counts with stopwords, and the weighted log-odds ratio with an informative
Dirichlet prior ("Fightin' Words", Monroe, Colaresi and Quinn 2008) that ranks the terms of each group.
numpy only; used by `fsb analyse` (`analysis.analyse`) to find the words that mark each score bin.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fsb.core.errors import FsbError
from fsb.core.readers import read_word_list

__all__ = ["STOPWORDS", "distinctive_terms", "load_stopwords", "log_odds_dirichlet", "ngrams", "phrases", "term_counts", "tokenize"]

STOPWORDS = Path(__file__).resolve().parents[1] / "wordlists" / "stopwords.txt"
TOKENIZER = "lower-case; words [a-z0-9]+(['-][a-z0-9]+)*; possessive 's removed; n-grams within punctuation"

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


def _finite_positive(value: object) -> bool:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(x) and x > 0


def distinctive_terms(
    groups: Mapping[str, Mapping[str, int]], *, min_count: int = 5, top: int = 15, prior_scale: float | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The terms that most mark each group against all the others together, by `log_odds_dirichlet`.

    Group g is compared with the pooled counts of the other groups. The prior is informative, from the
    pooled counts of all groups (the background corpus): alpha_w = a_0 * y_w / N, where y_w is w's pooled
    count and N the pooled total; a_0 = `prior_scale`, default N, so alpha_w = y_w (the convention of
    Jurafsky et al. 2014). Only terms with a pooled count >= `min_count` are ranked. Each group gets its
    `top` terms with z > 0, by z descending (ties by the term), with z, delta and the counts.

    Parameters
    ----------
    groups
        term counts by group name.
    min_count
        the pooled count a term needs to be ranked.
    top
        terms listed per group.
    prior_scale
        a_0, the prior's strength in pseudo-counts: a finite number > 0 (an infinite prior would rank by
        the prior alone, 0 or less is no Dirichlet prior), or None for the pooled token count.

    Returns
    -------
    dict
        per group, its terms as {term, z, delta, count, count_rest}.

    Raises
    ------
    FsbError
        `prior_scale` is not a finite number > 0 (one line, exit code 2 from the CLI).
    """
    if prior_scale is not None and not _finite_positive(prior_scale):
        raise FsbError(f"--prior-scale must be greater than 0 and finite (pseudo-counts), got {prior_scale!r}")
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
