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
from pathlib import Path
from typing import Any

import numpy as np

import fifty_shades_of_bias as spec
from fsb import bws

__all__ = ["Judgments", "human_reference", "is_release_judgments", "noise_ceiling", "placed_split_half", "spearman_brown"]

REFERENCES = (
    "split-half r: Kiritchenko and Mohammad (2017), the paper's Table 2; "
    "full-panel reliability 2r/(1+r): Spearman (1910), Brown (1910); "
    "noise ceiling sqrt(reliability): Spearman (1904), Lord and Novick (1968)"
)


def spearman_brown(r: float, factor: float = 2.0) -> float:
    """Reliability of a panel `factor` times as large as the one whose reliability is r: k r / (1 + (k - 1) r).
    NaN where that is undefined (r = -1/(k - 1), e.g. a split-half r of -1 on a tiny study, or r NaN)."""
    denominator = 1.0 + (factor - 1.0) * r
    return factor * r / denominator if denominator != 0 and not math.isnan(r) else math.nan


def noise_ceiling(reliability: float) -> float:
    """The expected correlation of the true scores with scores of this reliability: sqrt(reliability)."""
    return math.sqrt(reliability) if reliability >= 0 else math.nan


class Judgments:
    """A dataset's individual judgments, read once, to compute the reference figures on many sentence sets
    (a report's rows and each breakdown group)."""

    def __init__(self, where: str) -> None:
        rows = spec.load(source=where)[spec.SPLIT]
        ann = spec.load("annotations", source=where)[spec.SPLIT]
        self.labels = np.sort(np.asarray(rows["id"], dtype=np.int64))
        items = np.searchsorted(self.labels, np.asarray(ann["items"], dtype=np.int64))
        self.best = np.searchsorted(self.labels, np.asarray(ann["best"], dtype=np.int64))
        self.worst = np.searchsorted(self.labels, np.asarray(ann["worst"], dtype=np.int64))
        _, first, self.tuple_index = np.unique(np.asarray(ann["tuple_id"], dtype=np.int64), return_index=True, return_inverse=True)
        self.design = items[first]  # row t: the items of the t-th tuple id (ids need not be 0..T-1)
        self._cache: dict[tuple[bytes, int, int], dict[str, Any]] = {}

    def reference(self, ids: np.ndarray, trials: int = 100, seed: int = 0) -> dict[str, Any]:
        """Split-half r, full-panel reliability and noise ceiling (Pearson and Spearman) over `ids`."""
        subset = np.unique(np.searchsorted(self.labels, np.asarray(ids, dtype=np.int64)))
        key = (subset.tobytes(), trials, seed)
        if key not in self._cache:
            shr = bws.split_half_reliability(
                self.design, self.best, self.worst, self.tuple_index, n_items=self.labels.size, trials=trials, seed=seed, subset=subset
            )
            s = shr.summary()
            out: dict[str, Any] = {"sentences": int(subset.size), "trials": trials, "seed": seed, "references": REFERENCES}
            for m in ("pearson", "spearman"):
                r = s[m]["mean"]
                rel = spearman_brown(r)
                out[m] = {"split_half": r, "split_half_sd": s[m]["sd"], "full_panel_reliability": rel, "noise_ceiling": noise_ceiling(rel)}
            self._cache[key] = out
        return self._cache[key]


def human_reference(where: str, ids: np.ndarray, trials: int = 100, seed: int = 0) -> dict[str, Any]:
    """Split-half r (Pearson and Spearman; mean and sd over `trials`), the full-panel reliability and the
    noise ceiling, over the sentences `ids` of the dataset at `where` (its annotations config)."""
    return Judgments(where).reference(ids, trials=trials, seed=seed)


def placed_split_half(shr: dict[str, Any], sentences: int | None = None, *, release: bool) -> list[str]:
    """The split-half figures of `fsb build`, `fsb reliability` and the main job, each with its place: the
    paper's Table 2 beside the split-half r only when `release` (the judgments are the pinned release's
    file, unchanged: Table 2 describes those, not any other judgments), then the full-panel reliability and
    the noise ceiling with their formulas. `shr` is a split-half summary ({pearson: {mean, sd}, spearman:
    {...}, trials, seed})."""
    paper = spec.PAPER["shr"]
    on = f" over {sentences} sentences" if sentences else ""
    p, s = shr["pearson"], shr["spearman"]
    rel = {m: spearman_brown(shr[m]["mean"]) for m in ("pearson", "spearman")}
    lines = [
        f"split-half r (two half-size panels, uncorrected; {shr['trials']} trials, seed {shr['seed']}{on}): "
        f"Pearson {p['mean']:.4f} ± {p['sd']:.4f}, Spearman {s['mean']:.4f} ± {s['sd']:.4f}"
    ]
    if release:
        lines.append(
            f"  compare: the paper's Table 2 (on its {spec.PAPER['n_annotations']} judgments, all 1000 sentences): "
            f"Pearson {paper['pearson']['mean']:.4f} ± {paper['pearson']['sd']:.4f}, "
            f"Spearman {paper['spearman']['mean']:.4f} ± {paper['spearman']['sd']:.4f}"
        )
    return [
        *lines,
        f"  full-panel reliability, Spearman-Brown 2r/(1+r) of the mean r: Pearson {_fixed(rel['pearson'])}, "
        f"Spearman {_fixed(rel['spearman'])}",
        f"  noise ceiling, sqrt(2r/(1+r)) (the correlation a perfect scorer can expect with these scores): "
        f"Pearson {_ceiling(rel['pearson'])}, Spearman {_ceiling(rel['spearman'])}",
    ]


def _fixed(value: float) -> str:
    return "undefined" if math.isnan(value) else f"{value:.4f}"


def _ceiling(reliability: float) -> str:
    c = noise_ceiling(reliability)
    return "undefined (a reliability below 0 has no square root)" if math.isnan(c) else f"{c:.4f}"


def is_release_judgments(path: str | Path) -> bool:
    """True when the file at `path` is the pinned release's judgments file, byte for byte (its sha256)."""
    from fsb.core.files import sha256_file
    from fsb.data.release import ANNOTATIONS

    return Path(path).is_file() and sha256_file(Path(path)) == spec.RELEASE["files"][ANNOTATIONS]
