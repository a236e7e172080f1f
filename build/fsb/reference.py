"""The human reference figures a model's correlation is placed beside, computed from the individual
judgments on exactly the sentences that were scored.

- split-half r: the mean over trials of the correlation between the counting scores of two random
  halves of the judgments (Kiritchenko and Mohammad 2017's procedure, no correction); this is the
  figure of the paper's Table 2, and it compares two *half-size* panels.
- full-panel reliability: the Spearman-Brown prophecy for a panel twice that size,
  rel = 2r / (1 + r) (Spearman 1910; Brown 1910): the reliability of the released scores themselves.
- noise ceiling: sqrt(rel), the correlation that a perfect scorer (one reproducing the true scores)
  would be expected to reach with the noisy full-panel scores, since corr(observed, true) =
  sqrt(reliability) in classical test theory (Spearman 1904; Lord and Novick 1968, sec. 3.7). A model
  can exceed the split-half r, but not, beyond noise, the ceiling.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import fifty_shades_of_bias as spec

from . import bws

__all__ = ["human_reference", "noise_ceiling", "spearman_brown"]

REFERENCES = (
    "split-half r: Kiritchenko and Mohammad (2017), the paper's Table 2; "
    "full-panel reliability 2r/(1+r): Spearman (1910), Brown (1910); "
    "noise ceiling sqrt(reliability): Spearman (1904), Lord and Novick (1968)"
)


def spearman_brown(r: float, factor: float = 2.0) -> float:
    """Reliability of a panel `factor` times as large as the one whose reliability is r: k r / (1 + (k - 1) r)."""
    return factor * r / (1.0 + (factor - 1.0) * r)


def noise_ceiling(reliability: float) -> float:
    """The expected correlation of the true scores with scores of this reliability: sqrt(reliability)."""
    return math.sqrt(reliability) if reliability >= 0 else math.nan


def human_reference(where: str, ids: np.ndarray, trials: int = 100, seed: int = 0) -> dict[str, Any]:
    """Split-half r (Pearson and Spearman; mean and sd over `trials`), the full-panel reliability and the
    noise ceiling, over the sentences `ids` of the dataset at `where` (its annotations config)."""
    rows = spec.load(source=where)[spec.SPLIT]
    ann = spec.load("annotations", source=where)[spec.SPLIT]
    labels = np.sort(np.asarray(rows["id"], dtype=np.int64))
    items = np.searchsorted(labels, np.asarray(ann["items"], dtype=np.int64))
    best = np.searchsorted(labels, np.asarray(ann["best"], dtype=np.int64))
    worst = np.searchsorted(labels, np.asarray(ann["worst"], dtype=np.int64))
    _, first, tuple_index = np.unique(np.asarray(ann["tuple_id"], dtype=np.int64), return_index=True, return_inverse=True)
    design = items[first]  # row t: the items of the t-th tuple id (ids need not be 0..T-1)
    subset = np.searchsorted(labels, np.asarray(ids, dtype=np.int64))
    shr = bws.split_half_reliability(design, best, worst, tuple_index, n_items=labels.size, trials=trials, seed=seed, subset=subset)
    s = shr.summary()
    out: dict[str, Any] = {"sentences": int(np.unique(subset).size), "trials": trials, "seed": seed, "references": REFERENCES}
    for m in ("pearson", "spearman"):
        r = s[m]["mean"]
        rel = spearman_brown(r)
        out[m] = {"split_half": r, "split_half_sd": s[m]["sd"], "full_panel_reliability": rel, "noise_ceiling": noise_ceiling(rel)}
    return out
