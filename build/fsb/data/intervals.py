"""Per-item 95% intervals for a study's dataset, and the coverage they reach on a simulated study.

`item_intervals` gives each item two intervals, both from the nonparametric bootstrap over the study's
tuples (`fsb.bws.bootstrap.bootstrap_intervals`, public API only): the counting score's percentile
interval and the MaxDiff utility's basic interval. Items without one get NaN (null in Parquet) and each
reason, with its count, is kept for the card.

`measure_coverage` simulates a study with a known truth (utilities drawn from N(0, 1), judgments drawn
from the best-worst logit itself, a `bws_design` of 4-tuples with every item in 8 tuples) and counts how
often the intervals hold the truth: the counting score's truth is its expectation under that design
(exact, from the logit's choice probabilities), MaxDiff's the centred utility. `COVERAGE` records what
it measured (seeded, deterministic); a slow test re-measures it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fsb import bws
from fsb.bws import bootstrap, maxdiff
from fsb.bws.coded import Coded

__all__ = [
    "COVERAGE",
    "Intervals",
    "coverage_text",
    "expected_counting_score",
    "item_intervals",
    "measure_coverage",
    "simulate_judgments",
]

LEVEL = 0.95
N_BOOT = 200

# measure_coverage() with its defaults (1000 items, 8 tuples each, 3 judgments a tuple, 200 resamples, seed 0):
# python -c "from fsb.data.intervals import measure_coverage; print(measure_coverage())"
COVERAGE: dict[str, Any] = {
    "items": 1000,
    "judgments_per_tuple": 3,
    "resamples": 200,
    "seed": 0,
    "score": 0.929,
    "score_with_interval": 1000,
    "score_maxdiff": 0.9449,
    "score_maxdiff_with_interval": 999,
}


@dataclass(frozen=True)
class Intervals:
    """Lower and upper bounds per item (NaN: none) of the counting score and of the MaxDiff utility, and
    why items have none: {column: [reason lines, each with its count]}."""

    score_low: np.ndarray
    score_high: np.ndarray
    maxdiff_low: np.ndarray
    maxdiff_high: np.ndarray
    reasons: dict[str, list[str]] = field(default_factory=dict)

    def summary(self, n_boot: int, seed: int) -> dict[str, Any]:
        """What stats.json records: method, resamples, seed, level, nulls per column and their reasons."""
        return {
            "method": "nonparametric bootstrap over tuples (each drawn tuple brings all its judgments)",
            "score": "percentile interval of the counting score",
            "score_maxdiff": "basic interval of the MaxDiff utility (one Newton step per resample from the full fit)",
            "level": LEVEL,
            "resamples": n_boot,
            "seed": seed,
            "null": {"score": int(np.isnan(self.score_low).sum()), "score_maxdiff": int(np.isnan(self.maxdiff_low).sum())},
            "reasons": self.reasons,
            "coverage_on_simulated_study": COVERAGE or None,
        }


def coverage_text(summary: dict[str, Any]) -> str:
    """The card's sentence on the coverage measured on a simulated study with known truth (from
    `Intervals.summary`'s `coverage_on_simulated_study`), naming the exact measurement; empty if none.

    Parameters
    ----------
    summary
        What `Intervals.summary` returns (stats.json's `intervals`).

    Returns
    -------
    str
        One paragraph, or "" when no coverage was recorded.
    """
    cov = summary.get("coverage_on_simulated_study")
    if not cov:
        return ""
    return (
        f"Coverage, measured on a simulated study with known truth ({cov['items']} items, each in 8 4-tuples of a "
        f"`bws_design`, {cov['judgments_per_tuple']} judgments per tuple drawn from the best-worst logit with utilities "
        f"from N(0, 1), {cov['resamples']} resamples, seed {cov['seed']}; "
        '`python -c "from fsb.data.intervals import measure_coverage; print(measure_coverage())"`): the counting '
        f"intervals held the truth (the score's expectation under that design) for {cov['score']:.1%} of the "
        f"{cov['score_with_interval']} items with an interval, the MaxDiff intervals (truth: the centred utility) for "
        f"{cov['score_maxdiff']:.1%} of {cov['score_maxdiff_with_interval']}, against a nominal {LEVEL:.0%}. This is "
        "the method's coverage on that simulation, not a property measured on this dataset."
    )


def item_intervals(coded: Coded, utility: np.ndarray, *, n_boot: int = N_BOOT, seed: int = 0) -> Intervals:
    """Both intervals for every item of `coded`; `utility` is the full MaxDiff fit (`fit_maxdiff(...).utility`),
    and the MaxDiff interval is in its frame. Deterministic for a given seed."""
    count_notes: list[str] = []
    md_notes: list[str] = []
    low, high = bootstrap.bootstrap_intervals(coded, method="counting", n_boot=n_boot, seed=seed, notes=count_notes)
    md_low, md_high = bootstrap.bootstrap_intervals(coded, method="maxdiff", n_boot=n_boot, seed=seed, start=utility, notes=md_notes)
    return Intervals(low, high, md_low, md_high, {"score": count_notes, "score_maxdiff": md_notes})


def simulate_judgments(design: np.ndarray, utility: np.ndarray, per_tuple: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Judgments drawn from the best-worst logit: best ~ softmax(u) over the tuple, worst ~ softmax(-u) over
    the rest (Gumbel-max). Returns (tuple_index, best, worst) as item codes."""
    rng = np.random.default_rng(seed)
    ti = np.repeat(np.arange(design.shape[0]), per_tuple)
    x = utility[design[ti]]
    rows = np.arange(ti.size)
    b = np.argmax(x + rng.gumbel(size=x.shape), axis=1)
    y = -x + rng.gumbel(size=x.shape)
    y[rows, b] = -np.inf
    w = np.argmax(y, axis=1)
    return ti, design[ti][rows, b], design[ti][rows, w]


def expected_counting_score(design: np.ndarray, utility: np.ndarray, per_tuple: np.ndarray) -> np.ndarray:
    """The counting score's expectation under the logit for this design, in [0, 1]: per item, the
    judgment-weighted mean over its tuples of P(best) - P(worst), rescaled as (x + 1) / 2."""
    e = np.exp(utility[design] - utility[design].max(axis=1, keepdims=True))
    p_best = e / e.sum(axis=1, keepdims=True)
    inv = np.exp(-(utility[design] - utility[design].min(axis=1, keepdims=True)))
    k = design.shape[1]
    p_worst = np.zeros_like(p_best)
    for b in range(k):
        rest = inv.copy()
        rest[:, b] = 0.0
        p_worst += p_best[:, [b]] * rest / rest.sum(axis=1, keepdims=True)
    n = design.max() + 1
    weight = np.repeat(per_tuple.astype(float)[:, None], k, axis=1)
    num = np.bincount(design.ravel(), weights=(weight * (p_best - p_worst)).ravel(), minlength=n)
    den = np.bincount(design.ravel(), weights=weight.ravel(), minlength=n)
    return (num / den + 1.0) / 2.0


def measure_coverage(n_items: int = 1000, per_tuple: int = 3, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """Simulate one study with known truth and return how often each interval holds it.

    Returns
    -------
    dict
        {"items", "judgments_per_tuple", "resamples", "seed", "score": share covered, "score_maxdiff": share
        covered, "score_with_interval", "score_maxdiff_with_interval"}; shares over items with an interval.
    """
    rng = np.random.default_rng(seed)
    truth = rng.normal(0.0, 1.0, n_items)
    design = bws.bws_design(n_items, seed=seed)
    ti, best, worst = simulate_judgments(design, truth, per_tuple, seed=seed + 1)
    coded = Coded(np.arange(n_items), design[ti], design, ti, best, worst)
    fit = maxdiff.fit_maxdiff(design, best, worst, ti, n_items)
    iv = item_intervals(coded, fit.utility, n_boot=n_boot, seed=seed)
    expected = expected_counting_score(design, truth, np.bincount(ti, minlength=design.shape[0]))
    centred = truth - truth.mean()
    out: dict[str, Any] = {"items": n_items, "judgments_per_tuple": per_tuple, "resamples": n_boot, "seed": seed}
    for name, lo, hi, target in (
        ("score", iv.score_low, iv.score_high, expected),
        ("score_maxdiff", iv.maxdiff_low, iv.maxdiff_high, centred),
    ):
        ok = ~np.isnan(lo)
        out[name] = round(float(((lo[ok] <= target[ok]) & (target[ok] <= hi[ok])).mean()), 4)
        out[f"{name}_with_interval"] = int(ok.sum())
    return out


def zero_width_counts(iv: Intervals, bound: np.ndarray) -> dict[str, int]:
    """Counting intervals of width 0 (`zero_width_score`: every resample gave the item one score) and how many of
    them are best-always/worst-always items' (`zero_width_bound`, by the `bound` column); the cards' sentence
    (`fsb.data.card.zero_width_sentence`) names both, so it agrees with the column."""
    zero = iv.score_high - iv.score_low == 0
    return {"zero_width_score": int(zero.sum()), "zero_width_bound": int((zero & (np.char.find(bound.astype(str), "-always") >= 0)).sum())}
