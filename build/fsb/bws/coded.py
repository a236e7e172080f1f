"""Judgments coded for scoring (`Coded`, made by `encode`): item labels as codes 0..n-1 and tuples identified
by item set. The one data shape that scoring, the bootstrap and the Newton refits share, so it sits below
all three. Only numpy is imported here (pyarrow only when a caller has loaded it already)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from fsb.tables.judgments import Annotations

__all__ = ["Coded", "encode", "first_appearance_codes", "tuple_ids"]


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


def first_appearance_codes(key: np.ndarray) -> np.ndarray:
    """Code equal values 0, 1, ... in order of first appearance. A hash pass (pyarrow's dictionary_encode)
    when pyarrow is already loaded (large files), else a stable sort (`np.unique`); same codes either way."""
    if "pyarrow" in sys.modules and key.size > 100_000:
        import pyarrow.compute as pc

        from fsb.tables.labelcodes import arrow_to_numpy, numpy_to_arrow

        return arrow_to_numpy(pc.dictionary_encode(numpy_to_arrow(key)).indices).astype(np.int64)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


def tuple_ids(items: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Identify each row's tuple by its item set: (tuple_index numbered by first appearance, the row
    where each tuple first appears, in tuple order). The sorted row is folded into one int64 key,
    re-coding the key whenever the next fold could overflow; no (M, k) structured sort is needed."""
    s = np.sort(items, axis=1).astype(np.int64)
    key = s[:, 0].copy()
    base = max(int(n_items), 1)
    for j in range(1, s.shape[1]):
        if key.size and int(key.max()) >= (2**62) // base:
            key = first_appearance_codes(key)
        key = key * base + s[:, j]
    del s
    codes = first_appearance_codes(key)
    # Codes are numbered by first appearance, so a tuple first appears where its code exceeds all before it.
    seen = np.maximum.accumulate(np.concatenate([[-1], codes[:-1]]))
    return codes, np.flatnonzero(codes > seen)


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
