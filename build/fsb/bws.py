"""Best-worst scaling (BWS): tuple designs, counting scores and split-half reliability.

Small pure functions on integer-coded numpy arrays, in the style of `scipy.stats`: items are codes
0..n_items-1 (see `encode_labels`), a design is an (n_tuples, k) array, and annotations are three
aligned arrays: `tuple_index` (which design row was shown), `best` and `worst` (item codes).
Validation of labels and files lives in `fsb.raw`; these functions trust their (cheaply checked) input.

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

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BWSCounts",
    "SplitHalfResult",
    "bws_design",
    "count_best_worst",
    "counting_score",
    "design_report",
    "design_size_problem",
    "encode_labels",
    "split_half_reliability",
    "try_swap",
]

_DENSE_ITEMS = 2000  # designs over at most this many items are repaired by exact local search
_SMALL_GROUP = 8  # up to this many annotations per tuple, within-tuple ranks use shifted comparisons
MAX_SEARCH_STEPS = 1_000_000  # a design search gives up after this many swaps (about a minute), never runs unbounded
MAX_TUPLES = 10_000_000  # the largest design fsb makes (a million 4-tuples is already far past any annotation budget)


@dataclass(frozen=True)
class BWSCounts:
    """Per-item tallies: times chosen best, times chosen worst, and appearances (tuples shown x annotations)."""

    best: NDArray[np.int64]
    worst: NDArray[np.int64]
    appearances: NDArray[np.int64]

    @property
    def score_raw(self) -> NDArray[np.float64]:
        """The counting score in [-1, 1]; NaN for items that never appeared."""
        return counting_score(self.best, self.worst, self.appearances)

    @property
    def score(self) -> NDArray[np.float64]:
        """The counting score rescaled to [0, 1]: (score_raw + 1) / 2."""
        return (self.score_raw + 1.0) / 2.0


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


def encode_labels(*columns: ArrayLike) -> tuple[list[NDArray[np.int64]], NDArray[Any]]:
    """Map opaque item labels (ints or strings) to codes 0..n-1, consistently across all columns.

    Returns the coded columns (same shapes as given) and the sorted unique labels, so that
    `labels[code]` recovers a label. Sorting makes the coding independent of row order.
    """
    arrays = [np.asarray(c) for c in columns]
    flat = np.concatenate([a.ravel() for a in arrays])
    labels, inverse = np.unique(flat, return_inverse=True)
    out, start = [], 0
    for a in arrays:
        out.append(inverse[start : start + a.size].reshape(a.shape).astype(np.int64))
        start += a.size
    return out, labels


def counting_score(best: ArrayLike, worst: ArrayLike, appearances: ArrayLike) -> NDArray[np.float64]:
    """Counting score s_i = (B_i - W_i) / n_i in [-1, 1] (Orme 2009): B, W = times chosen best, worst;
    n = appearances. Items with n = 0 get NaN rather than a made-up 0."""
    b = np.asarray(best, dtype=np.float64)
    w = np.asarray(worst, dtype=np.float64)
    n = np.asarray(appearances, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (b - w) / n, np.nan)


def _appearances(tuples: NDArray[np.integer], per_tuple: NDArray[np.integer], n_items: int) -> NDArray[np.int64]:
    """Appearances of each item when design row t was annotated per_tuple[t] times."""
    k = tuples.shape[1]
    if per_tuple.max(initial=0) <= 1:  # every row annotated at most once: a plain count
        return np.bincount(tuples[per_tuple.astype(bool)].ravel(), minlength=n_items)
    weights = np.repeat(per_tuple.astype(np.float64), k)
    return np.bincount(tuples.ravel(), weights=weights, minlength=n_items).astype(np.int64)


def count_best_worst(
    tuples: ArrayLike,
    best: ArrayLike,
    worst: ArrayLike,
    n_items: int | None = None,
    tuple_index: ArrayLike | None = None,
) -> BWSCounts:
    """Tally best, worst and appearances per item.

    `tuples` is an (n_tuples, k) design of item codes and `tuple_index[j]` the row annotation j saw;
    without `tuple_index`, row j of `tuples` is what annotation j saw. One `np.bincount` per tally:
    appearances come from a weighted count over the design (weight = annotations of the row), so the
    cost is O(n_tuples * k + n_annotations) and no per-annotation copy of the tuples is made.
    """
    t = np.asarray(tuples)
    if t.ndim != 2:
        raise ValueError(f"tuples must be 2-D (n_tuples, k), got shape {t.shape}")
    b = np.asarray(best)
    w = np.asarray(worst)
    if b.shape != w.shape or b.ndim != 1:
        raise ValueError(f"best and worst must be 1-D arrays of one length, got {b.shape} and {w.shape}")
    if n_items is None:
        n_items = int(t.max(initial=-1)) + 1
    if tuple_index is None:
        if t.shape[0] != b.size:
            raise ValueError("without tuple_index, tuples needs one row per annotation")
        per_tuple = np.ones(t.shape[0], dtype=np.int64)
    else:
        ti = np.asarray(tuple_index)
        if ti.shape != b.shape:
            raise ValueError("tuple_index must align with best and worst")
        per_tuple = np.bincount(ti, minlength=t.shape[0])
        if per_tuple.size > t.shape[0]:
            raise ValueError("tuple_index refers to a row beyond the design")
    best_n = np.bincount(b, minlength=n_items)
    worst_n = np.bincount(w, minlength=n_items)
    if best_n.size > n_items or worst_n.size > n_items:
        raise ValueError(f"an item code is >= n_items ({n_items})")
    return BWSCounts(best_n, worst_n, _appearances(t, per_tuple, n_items))


def _ranks_within_groups(
    group: NDArray[np.integer], keys: NDArray[np.float64], max_size: int, same: list[NDArray[np.bool_]] | None = None
) -> NDArray[np.int64]:
    """Rank (0-based) of each key among the keys of its group; rows of a group are contiguous.

    For small groups this is sum_{j in group, j != i} [key_j < key_i], computed with shifted
    comparisons (O(n * max_size), no sort); `same[d - 1]` = group[d:] == group[:-d] may be passed in
    precomputed (it does not change between trials). Larger groups fall back to one lexsort.
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


def _first_half(
    group: NDArray[np.integer],
    size: NDArray[np.integer],
    max_size: int,
    rng: np.random.Generator,
    same: list[NDArray[np.bool_]] | None = None,
) -> NDArray[np.bool_]:
    """One split-half draw: which judgments go to half 1. Rows of a group (tuple) are contiguous; each
    group's n judgments are shuffled and the first floor(n/2) go to half 1, plus one more with
    probability 1/2 when n is odd (the reference tool's rule)."""
    rank = _ranks_within_groups(group, rng.random(group.size), max_size, same)
    take = size // 2 + ((size % 2).astype(bool) & (rng.random(size.size) < 0.5))
    return rank < take[group]


def _rank_average(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ranks with ties averaged (as `scipy.stats.rankdata(method="average")`), for Spearman's rho."""
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
    appear_all = _appearances(t, size, n_items)
    # Appearances in half 1 as a sum over each item's tuples (a gather and a segmented sum, cheaper than
    # a weighted scatter): the design's slots sorted by item, and where each item's run starts.
    flat = t.ravel()
    by_item = np.argsort(flat, kind="stable")
    tuple_of_slot = (by_item // t.shape[1]).astype(np.int64)
    present = np.flatnonzero(np.bincount(flat, minlength=n_items))
    starts = np.searchsorted(flat[by_item], present)
    for trial in range(trials):
        first = _first_half(g, size, max_size, rng, same)
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
        spearman[trial] = _pearson(_rank_average(x), _rank_average(y))
    return SplitHalfResult(pearson, spearman, seed)


def _combination_codes(sorted_rows: NDArray[np.int64], r: int, base: int) -> NDArray[np.int64]:
    """Integer codes of every r-subset of each (sorted) row: sum_j row[c_j] * base^(r-1-j)."""
    from itertools import combinations

    k = sorted_rows.shape[1]
    cols = list(combinations(range(k), r))
    codes = np.zeros((sorted_rows.shape[0], len(cols)), dtype=np.int64)
    for ci, comb in enumerate(cols):
        for j in comb:
            codes[:, ci] = codes[:, ci] * base + sorted_rows[:, j]
    return codes


def _later_repeats(codes: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Per row: does it hold a code that an earlier row (or earlier column) already holds?"""
    flat = codes.ravel()
    order = np.argsort(flat, kind="stable")
    s = flat[order]
    rep = np.zeros(flat.size, dtype=bool)
    rep[order[1:][s[1:] == s[:-1]]] = True
    return rep.reshape(codes.shape).any(axis=1)


def _violations(tuples: NDArray[np.int64], n_items: int, check_pairs: bool) -> NDArray[np.bool_]:
    s = np.sort(tuples, axis=1)
    bad = (s[:, 1:] == s[:, :-1]).any(axis=1)
    if s.shape[1] >= 3:
        bad |= _later_repeats(_combination_codes(s, 3, n_items))
    if check_pairs:
        bad |= _later_repeats(_combination_codes(s, 2, n_items))
    return bad


def _repair_sparse(design: NDArray[np.int64], n_items: int, rng: np.random.Generator, unique_pairs: bool, max_rounds: int) -> bool:
    """Large designs: violations are rare, so swap every offending tuple at random and re-check, vectorised."""
    n_tuples, k = design.shape
    check_pairs = unique_pairs
    for round_ in range(max_rounds):
        bad = np.flatnonzero(_violations(design, n_items, check_pairs))
        if bad.size == 0:
            return True
        if check_pairs and round_ >= max_rounds // 2:
            check_pairs = False  # pairs cannot all be unique here: keep the hard guarantees only
            continue
        partners = rng.integers(0, n_tuples, size=bad.size)
        pos_a = rng.integers(0, k, size=bad.size)
        pos_b = rng.integers(0, k, size=bad.size)
        for t, u, i, j in zip(bad, partners, pos_a, pos_b):
            design[t, i], design[u, j] = design[u, j], design[t, i]
    return False


def _repair_dense(design: NDArray[np.int64], rng: np.random.Generator, unique_pairs: bool, max_steps: int) -> bool:
    """Small designs: local search with exact subset counts. A swap between a conflicting tuple and a
    random one is kept when it does not raise the cost (a repeated 3-subset costs 1000, a repeated
    pair 1 while `unique_pairs`); pairs are given up when they cannot all be unique."""
    from collections import Counter
    from itertools import combinations

    rows = [sorted(r) for r in design.tolist()]
    k = len(rows[0])
    triples: Counter[tuple[int, ...]] = Counter()
    pairs: Counter[tuple[int, ...]] = Counter()
    weight = {"pairs": 1 if unique_pairs else 0}

    def subsets(row: list[int]) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        return list(combinations(row, 3)), list(combinations(row, 2))

    def cost(row: list[int]) -> int:
        if len(set(row)) < k:
            return 10**6
        tri, pa = subsets(row)
        return 1000 * sum(triples[s] - 1 for s in tri) + weight["pairs"] * sum(pairs[s] - 1 for s in pa)

    def move(row: list[int], sign: int) -> None:
        tri, pa = subsets(row)
        for s in tri:
            triples[s] += sign
        for s in pa:
            pairs[s] += sign

    for row in rows:
        move(row, +1)
    hot = [t for t, row in enumerate(rows) if cost(row) > 0]
    for step in range(max_steps):
        if unique_pairs and weight["pairs"] and step == max_steps // 2:
            weight["pairs"] = 0
            hot = [t for t, row in enumerate(rows) if cost(row) > 0]
        if not hot:
            design[:] = np.array(rows)
            return True
        pick = int(rng.integers(len(hot)))
        t = hot[pick]
        if cost(rows[t]) == 0:
            hot[pick] = hot[-1]
            hot.pop()
            continue
        u = int(rng.integers(len(rows)))
        if u == t:
            continue
        i, j = int(rng.integers(k)), int(rng.integers(k))
        old_t, old_u = rows[t], rows[u]
        new_t = sorted([*old_t[:i], old_u[j], *old_t[i + 1 :]])
        new_u = sorted([*old_u[:j], old_t[i], *old_u[j + 1 :]])
        if try_swap(rows, t, u, new_t, new_u, cost, move):
            hot.append(u)
    return False


def bws_design(
    n_items: int,
    tuple_size: int = 4,
    appearances: int = 8,
    seed: int = 0,
    unique_pairs: bool = True,
    max_rounds: int = 2000,
) -> NDArray[np.int64]:
    """A BWS design: n_items * appearances / tuple_size tuples (2N for 4-tuples seen 8 times).

    Guarantees: every item appears in exactly `appearances` tuples, never twice in one tuple, and no
    two tuples share more than 2 items (no 3-subset repeats). With `unique_pairs`, it also tries to
    make every pair of items co-occur at most once, falling back to the guarantees alone when that
    is infeasible (few items). Construction: `appearances` random permutations laid end to end and
    cut into tuples, then swaps out of offending tuples until none is left (vectorised random swaps
    for large designs, where conflicts are rare; an exact local search for small, dense ones).
    """
    if tuple_size < 2 or appearances < 1:
        raise ValueError("tuple_size must be >= 2 and appearances >= 1")
    if (n_items * appearances) % tuple_size:
        raise ValueError(f"n_items * appearances ({n_items * appearances}) must be a multiple of tuple_size ({tuple_size})")
    if n_items < tuple_size + 1:
        raise ValueError(f"need more than {tuple_size} items for a design of {tuple_size}-tuples")
    if n_items >= 2**21 and tuple_size >= 3:
        raise ValueError("n_items must be below 2**21 (3-subsets are coded in 63 bits)")
    problem = design_size_problem(n_items, n_items * appearances // tuple_size, tuple_size, appearances)
    if problem:
        raise ValueError(problem)
    # Unique pairs need appearances * (k - 1) distinct partners per item; skip the attempt when impossible.
    unique_pairs = unique_pairs and appearances * (tuple_size - 1) <= n_items - 1
    rng = np.random.default_rng(seed)
    seq = np.concatenate([rng.permutation(n_items) for _ in range(appearances)])
    design = seq.reshape(-1, tuple_size).astype(np.int64)
    steps = min(max_rounds * design.shape[0], MAX_SEARCH_STEPS)
    if n_items <= _DENSE_ITEMS:
        ok = _repair_dense(design, rng, unique_pairs, max_steps=steps)
    else:
        ok = _repair_sparse(design, n_items, rng, unique_pairs, max_rounds)
    if ok:
        return design
    searched = f"{steps} swaps" if n_items <= _DENSE_ITEMS else f"{max_rounds} rounds of swaps"
    raise RuntimeError(
        f"no design of {tuple_size}-tuples in which no two share more than 2 items was found for {n_items} items "
        f"seen {appearances} times each within {searched}; use more items or a smaller --k"
    )


def design_size_problem(n_items: int, n_tuples: int, tuple_size: int, appearances: int | None = None) -> str | None:
    """Why `n_tuples` tuples of `tuple_size` over `n_items` items cannot meet the guarantee that no two tuples
    share more than 2 items, or None. Each tuple holds C(size, 3) 3-item subsets and each 3-subset may be in
    one tuple only, so n_tuples * C(size, 3) <= C(n_items, 3) is necessary (a counting bound, not sufficient:
    the search near the bound may still fail). Also refuses designs over MAX_TUPLES."""
    if n_tuples > MAX_TUPLES:
        return f"{n_tuples} tuples is more than the {MAX_TUPLES} fsb designs; use a smaller --k"
    if tuple_size < 3:
        return None
    need, have = n_tuples * math.comb(tuple_size, 3), math.comb(n_items, 3)
    if need <= have:
        return None
    # per item: appearances * C(size-1, 2) <= C(n-1, 2), the same bound per item
    most = f" (at most {math.comb(n_items - 1, 2) // math.comb(tuple_size - 1, 2)} here)" if appearances is not None else ""
    return (
        f"{n_tuples} tuples of {tuple_size} items hold {need} 3-item subsets, but {n_items} items have only {have}: "
        f"some two tuples would share 3 items (the design lets no two share more than 2); use more items or a smaller --k{most}"
    )


def design_report(tuples: ArrayLike, n_items: int | None = None) -> dict[str, Any]:
    """Check a design independently of how it was made: sizes, appearances per item, the largest
    number of items any two tuples share, and how many distinct item pairs meet in more than one tuple."""
    t = np.asarray(tuples, dtype=np.int64)
    if n_items is None:
        n_items = int(t.max(initial=-1)) + 1
    s = np.sort(t, axis=1)
    k = s.shape[1]
    appear = np.bincount(t.ravel(), minlength=n_items)
    dup_in_tuple = int((s[:, 1:] == s[:, :-1]).any(axis=1).sum())

    def repeats(r: int) -> int:
        """How many distinct r-subsets of items occur in more than one tuple."""
        if r > k:
            return 0
        _, counts = np.unique(_combination_codes(s, r, n_items).ravel(), return_counts=True)
        return int(np.count_nonzero(counts > 1))

    max_shared = 1
    for r in range(2, k + 1):
        if repeats(r):
            max_shared = r
    return {
        "n_items": int(n_items),
        "n_tuples": int(t.shape[0]),
        "tuple_size": int(k),
        "appearances_min": int(appear.min()) if appear.size else 0,
        "appearances_max": int(appear.max()) if appear.size else 0,
        "tuples_repeating_an_item": dup_in_tuple,
        "max_shared_items": max_shared,
        "repeated_pairs": repeats(2),
    }


def try_swap(
    rows: list[list[int]],
    t: int,
    u: int,
    new_t: list[int],
    new_u: list[int],
    cost: Callable[[list[int]], int],
    move: Callable[[list[int], int], None],
) -> bool:
    """One move of a design's local search: rows t and u become new_t and new_u if that does not raise
    cost(row t) + cost(row u) once `move` has updated the shared tallies; otherwise the tallies are put back."""
    old_t, old_u = rows[t], rows[u]
    before = cost(old_t) + cost(old_u)
    for row, step in ((old_t, -1), (old_u, -1), (new_t, +1), (new_u, +1)):
        move(row, step)
    if cost(new_t) + cost(new_u) <= before:
        rows[t], rows[u] = new_t, new_u
        return True
    for row, step in ((new_t, -1), (new_u, -1), (old_t, +1), (old_u, +1)):
        move(row, step)
    return False
