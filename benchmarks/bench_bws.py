"""Benchmark: best-worst counting and split-half reliability against a bare numpy.bincount floor
(and, for scale, the time to make a guaranteed design; the reference Perl tuple generator, the NRC
scripts of Kiritchenko and Mohammad, public in github.com/shmuhammadd/labelstudio-semrel-pipeline,
scripts/BWS, took 1.1 s at 1e3 items, 18.6 s at 1e4 and 286 s at 1e5 on this kind of machine).

For each size N: a 2N-tuple design (each item in 8 4-tuples), 3 simulated judgments per tuple
(6N judgments). The floor is one bare `np.bincount` over each array the counting pass reads (best,
worst, tuple index, design), measured in the same process just before; every figure is printed as a
ratio to it, so a busy machine moves both sides. Each size runs in a fresh subprocess so its peak
resident memory (ru_maxrss) can be reported on its own.

    python benchmarks/bench_bws.py                 # 1e3, 1e5, 1e6
    python benchmarks/bench_bws.py --sizes 1000 100000 --trials 100
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np


def _best_of(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def simulate(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A 2N x 4 design from 8 permutations and 3 judgments per tuple by Gumbel-noise (MaxDiff) judges."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=n)
    design = np.concatenate([rng.permutation(n) for _ in range(8)]).reshape(-1, 4).astype(np.int32)
    tuple_index = np.repeat(np.arange(design.shape[0], dtype=np.int32), 3)
    best = np.empty(tuple_index.size, dtype=np.int32)
    worst = np.empty(tuple_index.size, dtype=np.int32)
    step = 1 << 20  # in chunks, so the simulation itself does not set the peak memory
    for s in range(0, tuple_index.size, step):
        shown = design[tuple_index[s : s + step]]
        u = truth[shown] + rng.gumbel(size=shown.shape)
        rows = np.arange(shown.shape[0])
        best[s : s + step] = shown[rows, u.argmax(1)]
        worst[s : s + step] = shown[rows, u.argmin(1)]
    return design, tuple_index, best, worst


def run_size(n: int, trials: int, repeat: int) -> dict[str, float]:
    from fsb import bws

    design, ti, best, worst = simulate(n)
    n_tuples = design.shape[0]

    def floor() -> None:
        np.bincount(best, minlength=n)
        np.bincount(worst, minlength=n)
        np.bincount(ti, minlength=n_tuples)
        np.bincount(design.ravel(), minlength=n)

    t_floor = _best_of(floor, repeat)
    t_count = _best_of(lambda: bws.count_best_worst(design, best, worst, n, ti), repeat)
    t_shr = _best_of(lambda: bws.split_half_reliability(design, best, worst, ti, n, trials=trials, seed=0), 1)
    t_design = _best_of(lambda: bws.bws_design(n, seed=0), 1)
    return {
        "n_items": n,
        "n_judgments": int(best.size),
        "floor_s": t_floor,
        "count_s": t_count,
        "shr_trials": trials,
        "shr_s": t_shr,
        "design_s": t_design,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000, 1_000_000])
    parser.add_argument("--trials", type=int, default=100, help="SHR trials (sizes of 1e6 and above run 10 and extrapolate)")
    parser.add_argument("--repeat", type=int, default=5, help="best of this many timings for the floor and counting")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        trials = args.trials if args.one < 1_000_000 else min(args.trials, 10)
        print(json.dumps(run_size(args.one, trials, args.repeat)))
        return 0
    header = ("items", "judgments", "floor", "count", "count/floor", "SHR x100", "SHR trial/floor", "design", "peak RSS")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (9, 10, 9, 9, 11, 9, 15, 8, 9))))
    for n in args.sizes:
        cmd = [sys.executable, __file__, "--one", str(n), "--trials", str(args.trials), "--repeat", str(args.repeat)]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        per_trial = r["shr_s"] / r["shr_trials"]
        shr100 = per_trial * 100
        note = "" if r["shr_trials"] == 100 else f" (from {r['shr_trials']})"
        print(
            f"{r['n_items']:>9.0e} {r['n_judgments']:>10.1e} {r['floor_s'] * 1e3:>7.1f}ms {r['count_s'] * 1e3:>7.1f}ms "
            f"{r['count_s'] / r['floor_s']:>10.2f}x {shr100:>8.2f}s {per_trial / r['floor_s']:>14.1f}x "
            f"{r['design_s']:>7.2f}s {r['peak_rss_mb']:>7.0f}MB{note}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
