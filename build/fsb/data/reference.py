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

__all__ = [
    "CEILING_DRAWS",
    "Judgments",
    "human_reference",
    "is_release_judgments",
    "loo_agreement",
    "noise_ceiling",
    "placed_split_half",
    "simulate_counting",
    "spearman_brown",
]

CEILING_DRAWS = 200  # parametric-bootstrap draws of a group ceiling: its Monte Carlo sd is below 0.005 here
CEILING_QUANTILE = 0.95  # the ceiling is the 95th percentile over draws: what a perfect scorer reaches at most, bar 1 study in 20
CEILING_METHOD = (
    "parametric bootstrap: {draws} studies simulated from the MaxDiff scale fitted to these judgments (same tuples, same "
    "judgments per tuple, seed {seed}), scored by counting; the 95th percentile over the draws of the correlation of the simulated truth "
    "with the simulated scores inside the group{recut}"
)

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
        self._simulated: tuple[int, int, np.ndarray, np.ndarray] | None = None

    def simulated(self, draws: int = CEILING_DRAWS, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The fitted MaxDiff utilities (the simulated truth, one per sentence) and `draws` simulated
        studies' counting scores in [0, 1] (draws, sentences), computed once per (draws, seed)."""
        if self._simulated is None or self._simulated[:2] != (draws, seed):
            from fsb.bws.maxdiff import fit_maxdiff

            utility = fit_maxdiff(self.design, self.best, self.worst, self.tuple_index, self.labels.size).utility
            scores = simulate_counting(self.design, self.tuple_index, utility, draws=draws, seed=seed)
            self._simulated = (draws, seed, utility, scores)
        return self._simulated[2], self._simulated[3]

    def group_ceiling(
        self,
        ids: np.ndarray,
        group: np.ndarray | None = None,
        cut: tuple[float, float] | None = None,
        draws: int = CEILING_DRAWS,
        seed: int = 0,
    ) -> dict[str, Any]:
        """What a perfect scorer reaches inside a group of the sentences `ids` (see the module docstring).

        Parameters
        ----------
        ids : the sentences a row scored (dataset ids).
        group : a boolean mask over `ids` for a group not cut on the human score (seed type, prompt type),
            or None with `cut`.
        cut : [low, high) on the counting score in [0, 1] (the top bound is closed at 1) for a group cut on
            the human score (an analysis bin): re-cut on each simulated study's scores.
        draws, seed : the parametric bootstrap's size and seed.

        Returns
        -------
        dict with `noise_ceiling` (the 95th percentile of the Pearson r over the draws where the group has
        >= 3 sentences: a perfect scorer reaches at most this in 19 studies of 20; NaN if under half of the
        draws count), `noise_ceiling_mean` and `noise_ceiling_sd` (over draws), `draws` and `method`.
        """
        utility, scores = self.simulated(draws, seed)
        pos = np.searchsorted(self.labels, np.asarray(ids, dtype=np.int64))
        truth, sim = utility[pos], scores[:, pos]
        if cut is None:
            mask = np.broadcast_to(np.ones(pos.size, dtype=bool) if group is None else np.asarray(group, dtype=bool), sim.shape)
        else:
            lo, hi = cut
            s = np.round(sim, 9)
            mask = (s >= lo) & ((s < hi) if hi < 1 else (s <= hi))
        r = _masked_pearson(np.broadcast_to(truth, sim.shape), sim, mask)
        ok = r[~np.isnan(r)]
        enough = ok.size >= r.size / 2
        recut = "; the group re-cut on each simulated study's scores (it is cut on the human score)" if cut is not None else ""
        return {
            "noise_ceiling": float(np.quantile(ok, CEILING_QUANTILE)) if enough else math.nan,
            "noise_ceiling_mean": float(ok.mean()) if enough else math.nan,
            "noise_ceiling_sd": float(ok.std()) if enough else math.nan,
            "draws": draws,
            "method": CEILING_METHOD.format(draws=draws, seed=seed, recut=recut),
        }

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

    def agreement(self, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
        """The annotators' own best-worst agreement on all these judgments (`loo_agreement`)."""
        return loo_agreement(self.design, self.best, self.worst, self.tuple_index, n_boot=n_boot, seed=seed)


def simulate_counting(
    design: np.ndarray, tuple_index: np.ndarray, utility: np.ndarray, draws: int = CEILING_DRAWS, seed: int = 0
) -> np.ndarray:
    """Counting scores in [0, 1] of `draws` studies simulated from the best-worst logit with `utility`.

    Judgment j shows the tuple `design[tuple_index[j]]`, as in the study; its best is drawn with
    P(best = i) = exp(u_i) / sum exp(u) and its worst from the rest with P(worst = i) proportional to
    exp(-u_i) (Gumbel-max draws, exact for the softmax).

    Parameters
    ----------
    design : (tuples, k) item codes.
    tuple_index : the tuple of each judgment.
    utility : one logit utility per item code.
    draws, seed : number of simulated studies and the seed.

    Returns
    -------
    (draws, items) array of (best - worst) / appearances mapped to [0, 1]; NaN for items never shown.
    """
    rng = np.random.default_rng(seed)
    shown = np.asarray(design)[np.asarray(tuple_index)]
    x = np.asarray(utility, dtype=float)[shown]
    n_items, rows = np.asarray(utility).size, np.arange(shown.shape[0])
    appearances = np.bincount(shown.ravel(), minlength=n_items).astype(float)
    out = np.empty((draws, n_items))
    for d in range(draws):
        b = np.argmax(x + rng.gumbel(size=x.shape), axis=1)
        y = -x + rng.gumbel(size=x.shape)
        y[rows, b] = -np.inf
        w = np.argmax(y, axis=1)
        diff = np.bincount(shown[rows, b], minlength=n_items) - np.bincount(shown[rows, w], minlength=n_items)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[d] = (diff / appearances + 1.0) / 2.0
    return out


def _masked_pearson(x: np.ndarray, y: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r over the `valid` entries of each row; NaN below 3 entries or with no spread."""
    m = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = np.where(valid, x - (np.where(valid, x, 0.0).sum(axis=1) / m)[:, None], 0.0)
        dy = np.where(valid, y - (np.where(valid, y, 0.0).sum(axis=1) / m)[:, None], 0.0)
        sxx, syy = (dx * dx).sum(axis=1), (dy * dy).sum(axis=1)
        r = (dx * dy).sum(axis=1) / np.sqrt(sxx * syy)
    return np.where((m >= 3) & (sxx > 0) & (syy > 0), r, np.nan)


def loo_agreement(
    design: np.ndarray, best: np.ndarray, worst: np.ndarray, tuple_index: np.ndarray, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """The annotators' own best-worst agreement: each judgment's best (worst) against the majority of the
    other judgments of its tuple (leave-one-out; every item tied for the most votes counts as the
    majority, as a model's agreement is counted), over the tuples judged at least twice.

    Parameters
    ----------
    design : (tuples, k) item codes; best, worst : each judgment's chosen item code; tuple_index : each
        judgment's tuple (row of `design`).
    n_boot, seed : the percentile bootstrap over tuples (95%).

    Returns
    -------
    dict: `best` and `worst` ({value, ci95: {low, high}}), `judgments` and `tuples` counted, `method`.
    """
    design, ti = np.asarray(design), np.asarray(tuple_index)
    n_t, k = design.shape
    per = np.bincount(ti, minlength=n_t)
    keep = per[ti] >= 2
    out: dict[str, Any] = {"judgments": int(keep.sum()), "tuples": int((per >= 2).sum())}
    hits = {}
    for side, chosen in (("best", np.asarray(best)), ("worst", np.asarray(worst))):
        position = np.argmax(design[ti] == chosen[:, None], axis=1)
        votes = np.zeros((n_t, k))
        np.add.at(votes, (ti, position), 1.0)
        others = votes[ti]
        others[np.arange(ti.size), position] -= 1.0
        hit = others[np.arange(ti.size), position] == others.max(axis=1)
        hits[side] = np.bincount(ti[keep], weights=hit[keep], minlength=n_t)
    counted = np.bincount(ti[keep], minlength=n_t).astype(float)
    weights = np.random.default_rng(seed).multinomial(n_t, np.full(n_t, 1 / n_t), size=n_boot) if n_t else np.zeros((0, 0))
    for side, h in hits.items():
        value = float(h.sum() / counted.sum()) if counted.sum() else math.nan
        with np.errstate(invalid="ignore", divide="ignore"):
            d = (weights @ h) / (weights @ counted) if n_t else np.array([math.nan])
        lo, hi = np.nanquantile(d, [0.025, 0.975]) if np.isfinite(d).any() else (math.nan, math.nan)
        out[side] = {"value": value, "ci95": {"low": float(lo), "high": float(hi)}}
    out["method"] = (
        f"each judgment against the majority of the other judgments of its tuple (leave-one-out, tied items all count), "
        f"over the {out['tuples']} tuples judged at least twice; 95% percentile bootstrap over tuples, {n_boot} draws, seed {seed}"
    )
    return out


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
        f"Pearson {p['mean']:.4f} ± {p['sd']:.4f}, Spearman {s['mean']:.4f} ± {s['sd']:.4f} (mean ± sd over the trials)"
    ]
    if release:
        lines.append(
            f"  compare: the paper's Table 2 (on its {spec.PAPER['n_annotations']} judgments, all 1000 sentences): "
            f"Pearson {paper['pearson']['mean']:.4f} ± {paper['pearson']['sd']:.4f}, "
            f"Spearman {paper['spearman']['mean']:.4f} ± {paper['spearman']['sd']:.4f} (mean ± sd over its trials)"
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
    from fsb.core.readers import sha256_file
    from fsb.data.release import ANNOTATIONS

    return Path(path).is_file() and sha256_file(Path(path)) == spec.RELEASE["files"][ANNOTATIONS]
