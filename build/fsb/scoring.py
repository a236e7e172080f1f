"""Label-level best-worst scoring: validated `Annotations` (opaque item labels) -> coded arrays ->
counting scores and split-half reliability, via the array functions in `fsb.bws`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import bws
from .raw import Annotations

__all__ = ["Coded", "encode", "reliability", "score_table"]


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


def encode(ann: Annotations, labels: np.ndarray | None = None) -> Coded:
    """Code the judgments' labels (against `labels` when given, e.g. the sorted uids of a dataset)."""
    if labels is None:
        (items, best, worst), labels = bws.encode_labels(ann.items, ann.best, ann.worst)
    else:
        items, best, worst = (np.searchsorted(labels, a) for a in (ann.items, ann.best, ann.worst))
    _, first, inverse = np.unique(np.sort(items, axis=1), axis=0, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    tuple_index = rank[inverse.ravel()]
    design = items[np.sort(first)]  # tuple r's first judgment, items in the order shown there
    return Coded(np.asarray(labels), items, design, tuple_index, best, worst)


def _natural_order(labels: np.ndarray) -> np.ndarray:
    """Label order for ties: numeric when every label is an integer, else lexicographic."""
    try:
        return np.argsort(labels.astype(np.int64), kind="stable")
    except (ValueError, TypeError):
        return np.argsort(labels.astype(str), kind="stable")


def score_table(ann: Annotations) -> pd.DataFrame:
    """item, score_raw in [-1, 1], score in [0, 1], n (appearances), best, worst; most biased first."""
    coded = encode(ann)
    counts = bws.count_best_worst(coded.design, coded.best, coded.worst, coded.n_items, coded.tuple_index)
    table = pd.DataFrame(
        {
            "item": coded.labels,
            "score_raw": counts.score_raw,
            "score": counts.score,
            "n": counts.appearances,
            "best": counts.best,
            "worst": counts.worst,
        }
    ).iloc[_natural_order(coded.labels)]
    return table.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)


def reliability(ann: Annotations, trials: int = 100, seed: int = 0) -> bws.SplitHalfResult:
    """Split-half reliability of the counting scores, judgments grouped by tuple (item set)."""
    coded = encode(ann)
    return bws.split_half_reliability(coded.design, coded.best, coded.worst, coded.tuple_index, coded.n_items, trials, seed)
