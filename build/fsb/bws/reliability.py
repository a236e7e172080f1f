"""Split-half reliability of best-worst counting scores, as the reference Perl tool computes it.

Annotations are grouped by tuple; each trial shuffles a tuple's n annotations, gives floor(n/2) to one
half (one more with probability 0.5 when n is odd), scores both halves by counting and correlates them
over the items (Pearson and Spearman). No Spearman-Brown correction: see `fsb.data.reference`.

References
----------
Louviere, Flynn and Marley (2015), *Best-Worst Scaling: Theory, Methods and Applications*.
Orme (2009), "MaxDiff analysis: simple counting, individual-level logit, and HB", Sawtooth Software.
Kiritchenko and Mohammad (2016, 2017), "Capturing reliable fine-grained sentiment associations by
crowdsourcing and best-worst scaling" (NAACL 2016) and "Best-worst scaling more reliable than rating
scales" (ACL 2017); their Perl scripts are the reference implementation of the design and of the
split-half reliability procedure reproduced here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fsb.bws.counting import appearance_counts, counting_score

__all__ = ["SplitHalfResult", "first_half", "rank_average", "ranks_within_groups", "split_half_reliability"]

_SMALL_GROUP = 8  # up to this many annotations per tuple, within-tuple ranks use shifted comparisons


@dataclass(frozen=True)
class SplitHalfResult:
    """Per-trial correlations between the scores of two random halves of the annotations."""

    pearson: NDArray[np.float64]
    spearman: NDArray[np.float64]
    seed: int

    @property
    def trials(self) -> int:
        return int(self.pearson.size)

    def summary(self) -> dict[str, Any]:
        """Mean and (population) standard deviation over trials, as the reference tool reports them."""
        return {
            "pearson": {"mean": float(np.mean(self.pearson)), "sd": float(np.std(self.pearson))},
            "spearman": {"mean": float(np.mean(self.spearman)), "sd": float(np.std(self.spearman))},
            "trials": self.trials,
            "seed": self.seed,
        }


def ranks_within_groups(
    group: NDArray[np.integer], keys: NDArray[np.float64], max_size: int, same: list[NDArray[np.bool_]] | None = None
) -> NDArray[np.int64]:
    """Rank (0-based) of each key among the keys of its group; rows of a group are contiguous.

    For small groups this is sum_{j in group, j != i} [key_j < key_i], computed with shifted
    comparisons (O(n * max_size), no sort); `same[d - 1]` = group[d:] == group[:-d] may be passed in
    precomputed (it does not change between trials). Larger groups fall back to one lexsort.

    Parameters
    ----------
    group
        Group (tuple) index of each row; a group's rows are contiguous.
    keys
        One random key per row; ties within a group are not expected (uniform floats).
    max_size
        The largest group's size (chooses the comparison or the sort path).
    same
        Optional precomputed masks, `same[d - 1] = group[d:] == group[:-d]` for d in 1..max_size-1.

    Returns
    -------
    NDArray[np.int64]
        Each row's 0-based rank among its group's rows: a permutation of 0..n-1 within each group.
    """
    n = keys.size
    if max_size <= _SMALL_GROUP:
        rank = np.zeros(n, dtype=np.int64)
        for d in range(1, max_size):
            same_d = same[d - 1] if same is not None else group[d:] == group[:-d]
            rank[:-d] += same_d & (keys[:-d] > keys[d:])
            rank[d:] += same_d & (keys[d:] > keys[:-d])
        return rank
    order = np.lexsort((keys, group))
    starts = np.r_[0, np.flatnonzero(np.diff(group[order])) + 1]
    sizes = np.diff(np.r_[starts, n])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - np.repeat(starts, sizes)
    return rank


def first_half(
    group: NDArray[np.integer],
    size: NDArray[np.integer],
    max_size: int,
    rng: np.random.Generator,
    same: list[NDArray[np.bool_]] | None = None,
) -> NDArray[np.bool_]:
    """One split-half draw: which judgments go to half 1. Rows of a group (tuple) are contiguous; each
    group's n judgments are shuffled and the first floor(n/2) go to half 1, plus one more with
    probability 1/2 when n is odd (the reference tool's rule).

    Parameters
    ----------
    group
        Group (tuple) index of each judgment, contiguous.
    size
        Number of judgments of each group, indexed by group.
    max_size
        `size.max()`.
    rng
        The trial's random generator (the only source of randomness).
    same
        Optional precomputed masks for `ranks_within_groups`.

    Returns
    -------
    NDArray[np.bool_]
        True for the judgments of half 1, False for half 2.
    """
    rank = ranks_within_groups(group, rng.random(group.size), max_size, same)
    take = size // 2 + ((size % 2).astype(bool) & (rng.random(size.size) < 0.5))
    return rank < take[group]


def rank_average(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ranks with ties averaged (as `scipy.stats.rankdata(method="average")`), for Spearman's rho.

    Parameters
    ----------
    x
        The values to rank (no NaN).

    Returns
    -------
    NDArray[np.float64]
        1-based ranks; a run of tied values all get the run's average rank.
    """
    order = np.argsort(x, kind="stable")
    xs = x[order]
    new = np.r_[True, xs[1:] != xs[:-1]]
    idx = np.flatnonzero(new)
    ends = np.r_[idx[1:], x.size]
    avg = (idx + ends - 1) / 2.0 + 1.0  # average 1-based rank of each run of ties
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(avg, ends - idx)
    return ranks


def _pearson(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    if x.size < 2:  # undefined (no item scored in both halves): NaN, without numpy's empty-mean warnings
        return float("nan")
    xc = x - x.mean()
    yc = y - y.mean()
    # Elementwise sums, not np.dot: BLAS threads spin on a busy machine (0.14 s for a dot of 1e5 here).
    denom = np.sqrt(np.add.reduce(xc * xc) * np.add.reduce(yc * yc))
    return float(np.add.reduce(xc * yc) / denom) if denom > 0 else float("nan")


def split_half_reliability(
    tuples: ArrayLike,
    best: ArrayLike,
    worst: ArrayLike,
    tuple_index: ArrayLike,
    n_items: int | None = None,
    trials: int = 100,
    seed: int = 0,
    subset: ArrayLike | None = None,
) -> SplitHalfResult:
    """Split-half reliability (SHR) of counting scores, as Kiritchenko and Mohammad's reference tool does it.

    In each trial, the n annotations of every tuple are shuffled; floor(n/2) go to half 1, plus one
    more with probability 1/2 when n is odd, and the rest to half 2. Both halves are scored by
    counting and correlated over the items that appear in both (Pearson's r and Spearman's rho).
    No Spearman-Brown correction is applied. Deterministic for a given `seed`. `subset` (item codes)
    restricts the correlation to those items (e.g. the sentences a model scored); all judgments still
    count towards their scores.
    """
    if trials < 1:
        raise ValueError("trials must be >= 1")
    t = np.asarray(tuples)
    ti = np.asarray(tuple_index)
    b = np.asarray(best)
    w = np.asarray(worst)
    if n_items is None:
        n_items = int(t.max(initial=-1)) + 1
    n_tuples = t.shape[0]
    order = np.argsort(ti, kind="stable")  # group annotations by tuple once
    g, bs, ws = ti[order], b[order], w[order]
    size = np.bincount(g, minlength=n_tuples)
    max_size = int(size.max(initial=0))
    keep = np.ones(n_items, dtype=bool)
    if subset is not None:
        keep = np.zeros(n_items, dtype=bool)
        keep[np.asarray(subset, dtype=np.int64)] = True
    rng = np.random.default_rng(seed)
    pearson = np.empty(trials)
    spearman = np.empty(trials)
    # Fixed across trials: which neighbouring judgments share a tuple, and the totals (half 2 = total - half 1).
    same = [g[d:] == g[:-d] for d in range(1, max_size)] if max_size <= _SMALL_GROUP else None
    best_all, worst_all = np.bincount(bs, minlength=n_items), np.bincount(ws, minlength=n_items)
    appear_all = appearance_counts(t, size, n_items)
    # Appearances in half 1 as a sum over each item's tuples (a gather and a segmented sum, cheaper than
    # a weighted scatter): the design's slots sorted by item, and where each item's run starts.
    flat = t.ravel()
    by_item = np.argsort(flat, kind="stable")
    tuple_of_slot = (by_item // t.shape[1]).astype(np.int64)
    present = np.flatnonzero(np.bincount(flat, minlength=n_items))
    starts = np.searchsorted(flat[by_item], present)
    for trial in range(trials):
        first = first_half(g, size, max_size, rng, same)
        half1 = np.bincount(g[first], minlength=n_tuples)
        b1 = np.bincount(bs[first], minlength=n_items)
        w1 = np.bincount(ws[first], minlength=n_items)
        a1 = np.zeros(n_items, dtype=np.int64)
        if present.size:
            a1[present] = np.add.reduceat(half1[tuple_of_slot], starts)
        s1 = counting_score(b1, w1, a1)
        s2 = counting_score(best_all - b1, worst_all - w1, appear_all - a1)
        ok = ~(np.isnan(s1) | np.isnan(s2)) & keep
        x, y = s1[ok], s2[ok]
        pearson[trial] = _pearson(x, y)
        spearman[trial] = _pearson(rank_average(x), rank_average(y))
    return SplitHalfResult(pearson, spearman, seed)
