"""Agreement of a scorer with the human scores, with intervals: metrics, bootstrap intervals (over
sentences, and over sentences and few-shot sets), paired differences, breakdowns and calibration.
(size: 416 lines: the rating and best-worst figures share the interval helpers; the metric functions
move out to fsb.evaluate.metrics with the harness helper's change, which brings it under 400.)

Small functions on `TaskSamples` (one per few-shot set, all over the same sentences). The metric
values are the harness's own functions (so they equal what lm-eval reported); the bootstrap redoes
them vectorised over resamples with the same definitions.

Intervals are percentile intervals (Efron and Tibshirani 1993, ch. 13). A group's interval is a
two-level bootstrap (Davison and Hinkley 1997, sec. 3.8): each draw resamples the K few-shot sets
with replacement and, independently, the sentences with replacement, and averages the resampled
sets' metrics on the resampled sentences; it so reflects the choice of in-context examples as well
as the sentences. The paired difference of two scorers resamples the sentences they share, once for
both (Koehn 2004's paired bootstrap), and their few-shot sets, paired too when both rows ran the same sets.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fsb.evaluate.results import Run, TaskSamples

__all__ = [
    "METRICS",
    "MIN_GROUP",
    "bootstrap",
    "breakdown",
    "bws_summary",
    "calibration",
    "draws",
    "metric_values",
    "paired_difference",
    "summarize",
    "summary",
    "undefined_reason",
    "why_undefined",
]

METRICS = ("pearson", "spearman", "mse", "parse_rate")


def metric_values(sets: list[TaskSamples]) -> dict[str, list[float]]:
    """Each metric per set, with the harness's functions (NaN where undefined)."""
    from fsb.evaluate import metrics as u

    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for s in sets:
        items = s.items()
        out["pearson"].append(u.pearson(items))
        out["spearman"].append(u.spearman(items))
        out["mse"].append(u.mse(items))
        out["parse_rate"].append(float(s.parsed.mean()) if s.ids.size else math.nan)
    return out


MIN_GROUP = 10  # a breakdown group below this many sentences gets no correlation ("not meaningful")


def set_label(name: str) -> str:
    """A few-shot set's short name for messages: "fsb_set3" -> "set3"."""
    return name.rsplit("_", 1)[-1]


def undefined_reason(s: TaskSamples) -> str | None:
    """Why a correlation over `s` is undefined (None when it is defined): fewer than 2 parsed answers,
    constant predictions, or constant human scores (a correlation divides by both spreads)."""
    p, g = s.preds[s.parsed], s.golds[s.parsed]
    if p.size < 2:
        return f"{p.size} parsed answer{'s' if p.size != 1 else ''}"
    if np.ptp(p) == 0:
        return "constant predictions"
    if np.ptp(g) == 0:
        return "constant human scores"
    return None


def why_undefined(sets: list[TaskSamples]) -> str | None:
    """Why the mean correlation over `sets` is undefined, naming the sets: "constant predictions in set3"
    (one set), "constant predictions in set1, set4" (several), or just the reason for a single task."""
    reasons: dict[str, list[str]] = {}
    for s in sets:
        r = undefined_reason(s)
        if r is not None:
            reasons.setdefault(r, []).append(set_label(s.name))
    if not reasons:
        return None
    if len(sets) == 1:
        return next(iter(reasons))
    return "; ".join(f"{r} in {', '.join(names)}" for r, names in reasons.items())


def _masked_pearson(x: np.ndarray, y: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r over the `valid` entries of each row; NaN where fewer than 2 or either side is constant."""
    m = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = np.where(valid, x, 0.0).sum(axis=1) / m
        my = np.where(valid, y, 0.0).sum(axis=1) / m
        dx = np.where(valid, x - mx[:, None], 0.0)
        dy = np.where(valid, y - my[:, None], 0.0)
        r = (dx * dy).sum(axis=1) / np.sqrt((dx * dx).sum(axis=1) * (dy * dy).sum(axis=1))
    constant = lambda a: np.where(valid, a, np.inf).min(axis=1) == np.where(valid, a, -np.inf).max(axis=1)  # noqa: E731
    return np.where((m >= 2) & ~constant(x) & ~constant(y), r, np.nan)


def draws(s: TaskSamples, idx: np.ndarray, metrics: tuple[str, ...] = METRICS) -> dict[str, np.ndarray]:
    """Every metric on every resample (rows of `idx`), vectorised; the same definitions as the harness."""
    import scipy.stats

    p, g = s.preds[idx], s.golds[idx]
    valid = ~np.isnan(p)
    n_valid = valid.sum(axis=1)
    out: dict[str, np.ndarray] = {}
    pearson = _masked_pearson(p, g, valid)
    out["pearson"] = pearson
    if "spearman" in metrics:
        gv = np.where(valid, g, np.nan)
        ranks_p = scipy.stats.rankdata(p, axis=1, nan_policy="omit")
        ranks_g = scipy.stats.rankdata(gv, axis=1, nan_policy="omit")
        out["spearman"] = np.where(np.isnan(pearson), np.nan, _masked_pearson(ranks_p, ranks_g, valid))
    if "mse" in metrics:
        with np.errstate(invalid="ignore", divide="ignore"):
            mse = np.where(valid, (p - g) ** 2, 0.0).sum(axis=1) / n_valid
        out["mse"] = np.where(n_valid > 0, mse, np.nan)
    if "parse_rate" in metrics:
        out["parse_rate"] = valid.mean(axis=1)
    return out


def _interval(d: np.ndarray, level: float) -> dict[str, Any]:
    ok = d[~np.isnan(d)]
    share = ok.size / d.size if d.size else 0.0
    alpha = (1 - level) / 2
    lo, hi = (float(np.quantile(ok, alpha)), float(np.quantile(ok, 1 - alpha))) if share >= 0.5 else (math.nan, math.nan)
    return {"low": lo, "high": hi, "defined": share}


def bootstrap(
    samples: list[TaskSamples],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    over_sets: bool = False,
    metrics: tuple[str, ...] = METRICS,
) -> dict[str, dict[str, Any]]:
    """Percentile interval of each metric. Sentences are resampled with replacement, the same resample
    for every set (they all score the same sentences); the value of a draw is the mean over sets. With
    `over_sets`, each draw also resamples the sets with replacement (the two-level bootstrap).

    A draw on which a metric is undefined (constant answers in a set) is left out; `defined` is the
    share of draws that count, and below one half no interval is given.
    """
    n = samples[0].ids.size
    if any(not np.array_equal(s.ids, samples[0].ids) for s in samples):
        raise ValueError("the variants of a group must score the same sentences")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    per_set = [draws(s, idx, metrics) for s in samples]
    k = len(samples)
    pick = rng.integers(0, k, size=(n_boot, k)) if over_sets and k > 1 else np.tile(np.arange(k), (n_boot, 1))
    out = {}
    for m in metrics:
        stacked = np.stack([v[m] for v in per_set])  # (k, n_boot)
        d = stacked[pick, np.arange(n_boot)[:, None]].mean(axis=1)  # NaN in any picked set makes the draw NaN
        out[m] = _interval(d, level)
    return out


def summary(sets: list[TaskSamples], n_boot: int = 1000, seed: int = 0, has_parse_rate: bool = True) -> dict[str, Any]:
    """Values (mean over sets), per-set values, the interval (two-level for several sets), the mean over
    the sets where a correlation is defined (with their count), distinct answers and sizes."""
    per = metric_values(sets)
    values = {m: float(np.mean(v)) for m, v in per.items()}
    ci = bootstrap(sets, n_boot=n_boot, seed=seed, over_sets=len(sets) > 1)
    defined = {}
    for m in ("pearson", "spearman"):
        ok = [v for v in per[m] if not math.isnan(v)]
        defined[m] = {"mean": float(np.mean(ok)) if ok else math.nan, "sets": len(ok), "of": len(sets)}
        if 0 < len(ok) < len(sets):  # the interval of that mean, two-level over the defined sets only
            kept = [s for s, v in zip(sets, per[m]) if not math.isnan(v)]
            defined[m]["ci95"] = bootstrap(kept, n_boot=n_boot, seed=seed, over_sets=len(kept) > 1, metrics=(m,))[m]
    if not has_parse_rate:
        values["parse_rate"] = math.nan
        ci["parse_rate"] = {"low": math.nan, "high": math.nan, "defined": 0.0}
    out = {
        "variants": len(sets),
        "sentences": int(sets[0].ids.size),
        "undefined": why_undefined(sets),
        "distinct_answers": min(int(np.unique(s.preds[s.parsed]).size) for s in sets),
        "values": values,
        "ci95": ci,
        "per_set": {s.name: {m: per[m][i] for m in METRICS} for i, s in enumerate(sets)} if len(sets) > 1 else {},
        "defined_sets": defined,
    }
    if len(sets) > 1:
        out["ci95_sentences_only"] = bootstrap(sets, n_boot=n_boot, seed=seed, metrics=("pearson", "mse"))
    return out


def summarize(run: Run, n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per reported task of an lm-eval run (groups, and leaf tasks outside any group): `summary` of it;
    a group also lists each variant the same way under `by_variant`."""
    in_group = {t for subs in run.groups.values() for t in subs}
    out: dict[str, dict[str, Any]] = {}
    for group, subs in run.groups.items():
        samples = [run.tasks[t] for t in subs if t in run.tasks]
        if samples:
            out[group] = summary(samples, n_boot, seed)
            out[group]["by_variant"] = {s.name: summary([s], n_boot, seed) for s in samples}
    for name, s in run.tasks.items():
        if name not in in_group:
            out[name] = summary([s], n_boot, seed)
    return out


def breakdown(
    sets: list[TaskSamples],
    labels: np.ndarray,
    order: tuple[str, ...],
    n_boot: int = 1000,
    seed: int = 0,
    min_n: int = MIN_GROUP,
    correlation_meaningful: bool = True,
) -> dict[str, dict[str, Any]]:
    """Pearson and mse (mean over sets) within each category of `labels` (aligned with the sentences),
    with the same intervals as the headline (two-level for several sets). A group of fewer than `min_n`
    sentences gets mse only: its correlation is "not meaningful" (NaN, with `pearson_note` saying why),
    as is every group of a scorer whose correlation is not meaningful overall (a constant by design)."""
    out = {}
    for c in order:
        mask = labels == c
        if not mask.any():
            continue
        sub = [s.subset(mask) for s in sets]
        per = metric_values(sub)
        n = int(mask.sum())
        note = None
        if not correlation_meaningful:
            note = "not meaningful: constant by design"
        elif n < min_n:
            note = f"not meaningful: n = {n} < {min_n}"
        metrics = ("mse",) if note else ("pearson", "mse")
        ci = bootstrap(sub, n_boot=n_boot, seed=seed, over_sets=len(sets) > 1, metrics=metrics)
        if note:
            ci["pearson"] = {"low": math.nan, "high": math.nan, "defined": 0.0}
        pearson = math.nan if note else float(np.mean(per["pearson"]))
        if note is None and math.isnan(pearson):
            note = f"undefined: {why_undefined(sub)}"
            ok = [v for v in per["pearson"] if not math.isnan(v)]
            if ok and len(sub) > 1:
                note += f"; mean over the {len(ok)} defined sets of {len(sub)}: {np.mean(ok):.3f}"
        out[c] = {
            "sentences": n,
            "human_mean": float(sub[0].golds.mean()),
            "model_mean": float(np.nanmean(np.concatenate([s.preds for s in sub]))) if any(s.parsed.any() for s in sub) else math.nan,
            "pearson": pearson,
            "pearson_note": note,
            "mse": float(np.mean(per["mse"])),
            "ci95": ci,
        }
    return out


def calibration(sets: list[TaskSamples]) -> dict[str, float]:
    """Least-squares line of the human score on the model's, human = intercept + slope * model, over the
    parsed answers of each set, averaged over sets (NaN where a set's answers are constant). A calibrated
    scorer has slope 1 and intercept 0; slope < 1 means its scores spread more than the human ones."""
    slopes, intercepts = [], []
    for s in sets:
        p, g = s.preds[s.parsed], s.golds[s.parsed]
        if p.size < 2 or np.ptp(p) == 0:
            slopes.append(math.nan)
            intercepts.append(math.nan)
            continue
        pc = p - p.mean()
        b = float(pc @ (g - g.mean()) / (pc @ pc))
        slopes.append(b)
        intercepts.append(float(g.mean() - b * p.mean()))
    return {"slope": float(np.mean(slopes)), "intercept": float(np.mean(intercepts))}


def paired_difference(
    a: list[TaskSamples],
    b: list[TaskSamples],
    metric: str = "pearson",
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    over_sets: bool = True,
) -> dict[str, Any]:
    """metric(a) - metric(b) on the sentences both scored, with a paired percentile interval.

    Each draw resamples the shared sentences once for both rows and, with `over_sets`, the few-shot sets
    of each row with replacement: paired on the sets too (the same picks for both) when the two rows
    have the same sets (names), each row's own picks otherwise. A row of one set has nothing to
    resample there. Without `over_sets` (or with single sets) the verdict is conditional on these sets.

    Parameters
    ----------
    a, b : each row's few-shot sets (one `TaskSamples` per set).
    metric : "pearson", "spearman", "mse" or "parse_rate".
    n_boot, seed, level : bootstrap draws, seed and interval level.
    over_sets : also resample the sets (the two-level bootstrap).

    Returns
    -------
    dict: metric, sentences, difference, ci95 {low, high, defined}, resampled (what each draw
    resamples) and conditional_on (what the interval holds fixed; "" when nothing).

    Raises
    ------
    ValueError
        When the rows share fewer than 3 sentences.
    """
    common = np.intersect1d(a[0].ids, b[0].ids)
    if common.size < 3:
        raise ValueError(f"the two rows share {common.size} sentences; a paired comparison needs the same sentences")

    def restrict(sets: list[TaskSamples]) -> list[TaskSamples]:
        return [s.subset(np.isin(s.ids, common)) for s in sets]

    ra, rb = restrict(a), restrict(b)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, common.size, size=(n_boot, common.size))
    va = np.stack([draws(s, idx, (metric,))[metric] for s in ra])  # (sets, n_boot)
    vb = np.stack([draws(s, idx, (metric,))[metric] for s in rb])
    same_sets = [s.name for s in ra] == [s.name for s in rb]
    pick_a = _set_picks(rng, len(ra), n_boot, over_sets)
    pick_b = pick_a if same_sets else _set_picks(rng, len(rb), n_boot, over_sets)
    cols = np.arange(n_boot)[:, None]
    da, db = va[pick_a, cols].mean(axis=1), vb[pick_b, cols].mean(axis=1)
    observed = float(np.mean(metric_values(ra)[metric]) - np.mean(metric_values(rb)[metric]))
    k = max(len(ra), len(rb))
    if over_sets and k > 1:
        resampled = "the shared sentences and the few-shot sets" + (
            ", the same draw of both for both rows" if same_sets else " (each row's own sets), the same sentences for both rows"
        )
        conditional = ""
    else:
        resampled = "the shared sentences, the same draw for both rows"
        conditional = f"these {k} few-shot sets" if k > 1 else ""
    return {
        "metric": metric,
        "sentences": int(common.size),
        "difference": observed,
        "ci95": _interval(da - db, level),
        "resampled": resampled,
        "conditional_on": conditional,
    }


def _set_picks(rng: np.random.Generator, k: int, n_boot: int, over_sets: bool) -> np.ndarray:
    """(n_boot, k) set indices of each draw: resampled with replacement, or every set once."""
    if over_sets and k > 1:
        return rng.integers(0, k, size=(n_boot, k))
    return np.tile(np.arange(k), (n_boot, 1))


# --- the best-worst protocol (fsb_bws, fsb_bws_ll): agreement with the human majority, positions ------


def _bws_tuple_counts(records: list[dict[str, Any]]) -> np.ndarray:
    """Per tuple (rows): presentations, parsed, best hits, worst hits, then best at positions 1..4 and
    worst at positions 1..4 (columns): every rate below is a ratio of two column sums."""
    out = np.zeros((len(records), 12))
    for t, rec in enumerate(records):
        for s in rec["shown"]:
            out[t, 0] += 1
            if s["best"] is None:
                continue
            out[t, 1] += 1
            out[t, 2] += s["best_item"] in rec["majority_best"]
            out[t, 3] += s["worst_item"] in rec["majority_worst"]
            out[t, 3 + int(s["best"])] += 1
            out[t, 7 + int(s["worst"])] += 1
    return out


def bws_summary(records: list[dict[str, Any]], n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """A best-worst run's own figures: parse rate, agreement of the model's best and worst with the human
    majority (beside the chance rate), and how often each display position was chosen (beside the uniform
    0.25), each with a percentile interval from resampling the tuples with replacement.

    Point values are the harness's functions; the bootstrap redoes them as ratios of per-tuple counts."""
    from fsb.evaluate import metrics as u

    counts = _bws_tuple_counts(records)
    k = u.BWS_SIZE
    values = {
        "parse_rate": u.bws_parse_rate(records),
        "best_agreement": u.bws_agreement(records, "best"),
        "worst_agreement": u.bws_agreement(records, "worst"),
        **{f"best_position_{p}": u.bws_position_rate(records, "best", p) for p in range(1, k + 1)},
        **{f"worst_position_{p}": u.bws_position_rate(records, "worst", p) for p in range(1, k + 1)},
    }
    ratios = {"parse_rate": (1, 0), "best_agreement": (2, 1), "worst_agreement": (3, 1)}
    ratios |= {f"best_position_{p}": (3 + p, 1) for p in range(1, k + 1)}
    ratios |= {f"worst_position_{p}": (7 + p, 1) for p in range(1, k + 1)}
    n = len(records)
    ci: dict[str, dict[str, Any]] = {}
    if n:
        weights = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot)  # tuples drawn per resample
        sums = weights @ counts
        with np.errstate(invalid="ignore", divide="ignore"):
            for name, (num, den) in ratios.items():
                ci[name] = _interval(np.where(sums[:, den] > 0, sums[:, num] / sums[:, den], np.nan), level)
    return {
        "tuples": n,
        "presentations": int(counts[:, 0].sum()),
        "rotations": sorted({int(s["shift"]) for r in records for s in r["shown"]}),
        "values": values,
        "ci95": ci,
        "chance": {side: u.bws_chance_agreement(records, side) for side in ("best", "worst")},
        "uniform_position_rate": 1 / k,
    }
