"""Label-level best-worst scoring: validated `Annotations` (coded item labels) -> tuples -> counting or
MaxDiff scores (optionally with 95% bootstrap intervals) and split-half reliability, via the array
functions in `fsb.bws` and `fsb.maxdiff`. Only numpy is imported here: pandas only in `score_table`."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from . import bws
from .raw import Annotations

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["METHODS", "Coded", "encode", "format_csv", "reliability", "score_columns", "score_table", "tuple_ids"]

METHODS = ("counting", "maxdiff")
Method = Literal["counting", "maxdiff"]


@dataclass(frozen=True)
class Coded:
    """Annotations as codes: `labels[code]` is an item's label; tuples are identified by item set and
    numbered by first appearance; `design[tuple_index[j]]` holds judgment j's items (as shown first)."""

    labels: np.ndarray
    items: np.ndarray
    design: np.ndarray
    tuple_index: np.ndarray
    best: np.ndarray
    worst: np.ndarray

    @property
    def n_items(self) -> int:
        return int(self.labels.size)


def tuple_ids(items: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Identify each row's tuple by its item set: (tuple_index numbered by first appearance, the row
    where each tuple first appears). The sorted row is folded into one int64 key, compacting the key
    with `np.unique` whenever the next fold could overflow, so no (M, k) structured sort is needed."""
    s = np.sort(items, axis=1).astype(np.int64)
    key = s[:, 0].copy()
    base = max(int(n_items), 1)
    for j in range(1, s.shape[1]):
        if key.size and int(key.max()) >= (2**62) // base:
            key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
        key = key * base + s[:, j]
    del s
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.reshape(-1)], np.sort(first)


def encode(ann: Annotations, labels: np.ndarray | None = None) -> Coded:
    """Code the judgments' labels (against `labels` when given, e.g. the sorted uids of a dataset)."""
    if labels is None:
        labels = ann.labels
        items, best, worst = ann.item_codes, ann.best_codes, ann.worst_codes
    else:
        labels = np.asarray(labels)
        position = np.searchsorted(labels, ann.labels)
        items, best, worst = position[ann.item_codes], position[ann.best_codes], position[ann.worst_codes]
    tuple_index, first = tuple_ids(items, labels.size)
    return Coded(np.asarray(labels), items, items[first], tuple_index, best, worst)


def score_columns(
    ann: Annotations, *, method: Method = "counting", ci: bool = False, n_boot: int = 200, seed: int = 0
) -> dict[str, np.ndarray]:
    """The score table as ordered numpy columns, most biased first (ties in label order).

    counting: item, score_raw = (B - W) / n in [-1, 1], score = (score_raw + 1) / 2, n (appearances),
    best, worst. maxdiff: item, score (the MaxDiff utility, logit scale, centred to mean 0), se (its
    standard error), n, best, worst. With `ci`: ci_low, ci_high, 95% percentile intervals of `score`
    from `n_boot` bootstrap resamples of the tuples (seeded)."""
    coded = encode(ann)
    counts = bws.count_best_worst(coded.design, coded.best, coded.worst, coded.n_items, coded.tuple_index)
    cols: dict[str, np.ndarray] = {"item": coded.labels}
    if method == "counting":
        cols |= {"score_raw": counts.score_raw, "score": counts.score}
    elif method == "maxdiff":
        from . import maxdiff

        fit = maxdiff.fit_maxdiff(coded.design, coded.best, coded.worst, coded.tuple_index, coded.n_items)
        cols |= {"score": fit.utility, "se": fit.se}
    else:
        raise ValueError(f"method must be one of {METHODS}")
    cols |= {"n": counts.appearances, "best": counts.best, "worst": counts.worst}
    if ci:
        from . import maxdiff

        low, high = maxdiff.bootstrap_intervals(coded, method=method, n_boot=n_boot, seed=seed)
        cols |= {"ci_low": low, "ci_high": high}
    order = np.argsort(-cols["score"], kind="stable")  # labels are sorted, so ties stay in label order
    return {name: values[order] for name, values in cols.items()}


def score_table(ann: Annotations, *, method: Method = "counting", ci: bool = False, n_boot: int = 200, seed: int = 0) -> pd.DataFrame:
    """`score_columns` as a DataFrame (for the dataset build and notebooks)."""
    import pandas as pd

    return pd.DataFrame(score_columns(ann, method=method, ci=ci, n_boot=n_boot, seed=seed))


def format_csv(cols: dict[str, np.ndarray], decimals: int = 6) -> str:
    """The columns as CSV text: floats with `decimals` places (NaN as an empty field), labels quoted as needed."""
    out = []
    for values in cols.values():
        if values.dtype.kind == "f":
            fmt = f"{{:.{decimals}f}}".format
            out.append(["" if v != v else fmt(v) for v in values.tolist()])
        else:
            out.append(values.tolist())
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(cols))
    writer.writerows(zip(*out))
    return buf.getvalue()


def reliability(ann: Annotations, trials: int = 100, seed: int = 0) -> bws.SplitHalfResult:
    """Split-half reliability of the counting scores, judgments grouped by tuple (item set)."""
    coded = encode(ann)
    return bws.split_half_reliability(coded.design, coded.best, coded.worst, coded.tuple_index, coded.n_items, trials, seed)
