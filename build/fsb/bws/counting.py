"""Counting scores of best-worst scaling: per-item tallies of best, worst and appearances.

Small pure functions on integer-coded numpy arrays, in the style of `scipy.stats`: items are codes
0..n_items-1 (see `encode_labels`), a design is an (n_tuples, k) array, and annotations are three
aligned arrays: `tuple_index` (which design row was shown), `best` and `worst` (item codes).
Validation of labels and files lives in `fsb.core.tables`; these functions trust their (cheaply checked) input.

The score of item i is (best_i - worst_i) / appearances_i in [-1, 1] (Orme 2009; Kiritchenko and
Mohammad 2016); `BWSCounts.score` rescales it to [0, 1].

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

__all__ = ["BWSCounts", "appearance_counts", "bincount", "count_best_worst", "counting_score", "encode_labels"]

# Codes counted per np.bincount call by `bincount` (at least: n_items when larger).
BINCOUNT_CHUNK = 1 << 16


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


def bincount(codes: NDArray[np.integer], minlength: int = 0) -> NDArray[np.intp]:
    """`np.bincount(codes.ravel(), minlength=minlength)`, without np.bincount's copy of all the codes.

    Parameters
    ----------
    codes : non-negative integer codes, any shape and integer type.
    minlength : the least length of the result.

    Returns
    -------
    numpy.ndarray
        How often each code occurs (length max(minlength, codes.max() + 1)), as `np.bincount` gives it.

    Why: np.bincount first copies its input to 64-bit integers. The reader codes labels as int32, so
    counting the 2.4e6 item cells of 1e5 items' judgments copied 19 MB of fresh memory (page faults and
    zeroing, the costliest part of the count on a busy machine). Counted `BINCOUNT_CHUNK` codes (or
    `minlength`, if more) at a time, the copy is one small buffer, reused.
    """
    flat = codes.reshape(-1)
    step = max(BINCOUNT_CHUNK, int(minlength))
    if flat.dtype == np.intp or flat.size <= 2 * step:
        return np.bincount(flat, minlength=minlength)
    out = np.bincount(flat[:step], minlength=minlength)
    for start in range(step, flat.size, step):
        part = np.bincount(flat[start : start + step], minlength=out.size)
        if part.size > out.size:  # a code beyond the counts so far
            part[: out.size] += out
            out = part
        else:
            out += part
    return out


def appearance_counts(tuples: NDArray[np.integer], per_tuple: NDArray[np.integer], n_items: int) -> NDArray[np.int64]:
    """Appearances of each item when design row t was annotated per_tuple[t] times."""
    k = tuples.shape[1]
    if per_tuple.min(initial=1) == 1 and per_tuple.max(initial=0) == 1:  # every row once (one row per judgment): no copy
        return bincount(tuples, minlength=n_items)
    if per_tuple.max(initial=0) <= 1:  # every row annotated at most once: a plain count
        return bincount(tuples[per_tuple.astype(bool)], minlength=n_items)
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
    best_n = bincount(b, minlength=n_items)
    worst_n = bincount(w, minlength=n_items)
    if best_n.size > n_items or worst_n.size > n_items:
        raise ValueError(f"an item code is >= n_items ({n_items})")
    return BWSCounts(best_n, worst_n, appearance_counts(t, per_tuple, n_items))
