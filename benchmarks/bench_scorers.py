"""Benchmark: which best-worst scorer recovers a known truth best, on balanced and unbalanced designs.

Each seed draws a truth (N item utilities from N(0, 1)) and judgments from the best-worst logit itself
(MaxDiff: best ~ softmax(u), worst ~ softmax(-u) over the rest; `fsb.data.intervals.simulate_judgments`),
4-tuples, 16 judgments an item on average, in three designs:

    balanced   `fsb.bws.bws_design` (2N tuples, each item in 8), 2 judgments a tuple
    skewed     N/4 tuples of a random permutation (every item once), then 4N - N/4 random tuples with items
               drawn in proportion to lognormal(0, 1) weights (the commonest item 14-32x the median), 1 judgment
    sorted     round 1: `bws_design` (2N tuples), 1 judgment; round 2: 2N tuples of neighbours on round 1's
               MaxDiff scale (8 passes: sort by score + N(0, 0.3) jitter, consecutive 4 items a tuple), 1 judgment

Scorers: counting ((B - W) / n), maxdiff (`fsb.bws.maxdiff.fit_maxdiff`, ridge 0.01, fsb's default), maxdiff
with an N(0, 1) prior (ridge 1), Hollis's value and Rescorla-Wagner scoring (`fsb.bws.value`, 100 passes).
Reported per design and scorer: Pearson r with the truth, mean over seeds with a 95% t interval; the paired
differences from maxdiff and from value (per seed, then mean and 95% t interval over the seeds: the
seeds' shared noise cancels, which unpaired intervals cannot show; no row for a scorer minus itself); CPU seconds per scoring (process time,
mean over seeds).

    python benchmarks/bench_scorers.py                      # 1000 items, 20 seeds
    python benchmarks/bench_scorers.py --seeds 40 --json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np

DESIGNS = ("balanced", "skewed", "sorted")
SCORERS = ("counting", "maxdiff", "maxdiff_prior", "value", "rw")
PAIRED = ("maxdiff", "value")  # each scorer's paired difference from these, seed by seed


def simulate(design_name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(truth, design, tuple_index, best, worst) of one simulated study."""
    from fsb import bws
    from fsb.bws import maxdiff
    from fsb.data.intervals import simulate_judgments

    rng = np.random.default_rng(seed)
    truth = rng.normal(0.0, 1.0, n)
    if design_name == "balanced":
        design = bws.bws_design(n, seed=seed)
        ti, best, worst = simulate_judgments(design, truth, 2, seed=seed + 1)
        return truth, design, ti, best, worst
    if design_name == "skewed":
        first = rng.permutation(n)[: n - n % 4].reshape(-1, 4)
        weight = rng.lognormal(0.0, 1.0, n)
        rest = np.array([rng.choice(n, 4, replace=False, p=weight / weight.sum()) for _ in range(4 * n - first.shape[0])])
        design = np.concatenate([first, rest])
        ti, best, worst = simulate_judgments(design, truth, 1, seed=seed + 1)
        return truth, design, ti, best, worst
    if design_name == "sorted":
        first = bws.bws_design(n, seed=seed)
        ti1, b1, w1 = simulate_judgments(first, truth, 1, seed=seed + 1)
        u = maxdiff.fit_maxdiff(first, b1, w1, ti1, n).utility
        passes = [np.argsort(u + rng.normal(0.0, 0.3, n))[: n - n % 4].reshape(-1, 4) for _ in range(8)]
        second = np.concatenate(passes)
        ti2, b2, w2 = simulate_judgments(second, truth, 1, seed=seed + 2)
        design = np.concatenate([first, second])
        return truth, design, np.concatenate([ti1, ti2 + first.shape[0]]), np.concatenate([b1, b2]), np.concatenate([w1, w2])
    raise ValueError(design_name)


def scorers(design, ti, best, worst, n: int, seed: int) -> dict[str, Callable[[], np.ndarray]]:
    from fsb import bws
    from fsb.bws import maxdiff, value

    def tournament(fn):
        return lambda: fn(*value.pairings(design, best, worst, ti), n, seed=seed)

    return {
        "counting": lambda: bws.count_best_worst(design, best, worst, n, ti).score_raw,
        "maxdiff": lambda: maxdiff.fit_maxdiff(design, best, worst, ti, n).utility,
        "maxdiff_prior": lambda: maxdiff.fit_maxdiff(design, best, worst, ti, n, ridge=1.0).utility,
        "value": tournament(value.value_scores),
        "rw": tournament(value.rw_scores),
    }


def interval(x: np.ndarray) -> tuple[float, float, float]:
    """Mean and its 95% t interval over seeds."""
    from scipy import stats

    m = float(np.mean(x))
    h = float(stats.t.ppf(0.975, x.size - 1) * np.std(x, ddof=1) / np.sqrt(x.size)) if x.size > 1 else float("nan")
    return m, m - h, m + h


def run(n: int, seeds: int) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    warm = simulate("balanced", 40, seed=0)[1:]
    for fn in scorers(*warm, 40, seed=0).values():  # imports (scipy's optimiser) are not charged to the first seed
        fn()
    for design_name in DESIGNS:
        r = {s: np.empty(seeds) for s in SCORERS}
        cpu = {s: np.empty(seeds) for s in SCORERS}
        for k in range(seeds):
            truth, design, ti, best, worst = simulate(design_name, n, seed=k)
            for name, fn in scorers(design, ti, best, worst, n, seed=k).items():
                t = time.process_time()
                score = fn()
                cpu[name][k] = time.process_time() - t
                r[name][k] = np.corrcoef(score, truth)[0, 1]
        out[design_name] = {}
        for name in SCORERS:
            mean, lo, hi = interval(r[name])
            row = {"pearson": mean, "pearson_low": lo, "pearson_high": hi}
            for ref in PAIRED:
                if ref != name:  # a scorer minus itself is 0 [0, 0]: no row
                    d_mean, d_lo, d_hi = interval(r[name] - r[ref])
                    row |= {f"minus_{ref}": d_mean, f"minus_{ref}_low": d_lo, f"minus_{ref}_high": d_hi}
            out[design_name][name] = row | {"cpu_s": float(cpu[name].mean())}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000, help="items per simulated study (default 1000)")
    parser.add_argument("--seeds", type=int, default=20, help="seeded studies per design (default 20)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    result = run(args.items, args.seeds)
    if args.json:
        print(json.dumps({"items": args.items, "seeds": args.seeds, "results": result}, indent=2))
        return 0
    print(f"{args.items} items, {args.seeds} seeds; Pearson r with the truth, mean [95% t interval over seeds]")
    heads = "".join(f" {'minus ' + ref + ' (paired)':>28}" for ref in PAIRED)
    print(f"{'design':<9} {'scorer':<14} {'pearson':>26}{heads} {'cpu s':>7}")
    for design_name, rows in result.items():
        for name, x in rows.items():
            diffs = "".join(
                f" {x[f'minus_{ref}']:>+9.4f} [{x[f'minus_{ref}_low']:+.4f}, {x[f'minus_{ref}_high']:+.4f}]"
                if f"minus_{ref}" in x
                else f" {'':>28}"
                for ref in PAIRED
            )
            pearson = f"{x['pearson']:>8.4f} [{x['pearson_low']:.4f}, {x['pearson_high']:.4f}]"
            print(f"{design_name:<9} {name:<14} {pearson}{diffs} {x['cpu_s']:>7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
