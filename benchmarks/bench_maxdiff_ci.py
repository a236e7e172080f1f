"""Benchmark: MaxDiff bootstrap intervals, the batched Newton refits against L-BFGS refits of each
resample, both as ratios to counting measured in the same process (so a busy machine moves both sides).

For each size N: a 2N-tuple design (each item in 8 4-tuples), 3 simulated judgments per tuple. Times are
CPU seconds (process time), the fair measure on a shared machine. The L-BFGS refit is timed on a few
resamples and multiplied out to the same number of resamples.

    python benchmarks/bench_maxdiff_ci.py                       # 1e4, 1e5
    python benchmarks/bench_maxdiff_ci.py --sizes 100000 --boot 200 --full 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bws import simulate


def cpu(fn) -> tuple[float, object]:
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def run_size(n: int, boot: int, full: int) -> str:
    from fsb import bws
    from fsb.bws import bootstrap, maxdiff
    from fsb.bws.coded import Coded

    design, ti, best, worst = simulate(n)
    coded = Coded(np.arange(n), design[ti], design, ti, best, worst)
    t_count = min(cpu(lambda: bws.count_best_worst(design, best, worst, n, ti))[0] for _ in range(3))
    t_fit, fit = cpu(lambda: maxdiff.fit_maxdiff(design, best, worst, ti, n))
    start = fit.utility  # type: ignore[attr-defined]
    t_newton, _ = cpu(lambda: bootstrap.bootstrap_intervals(coded, method="maxdiff", n_boot=boot, start=start))
    t_full, _ = cpu(lambda: bootstrap.bootstrap_intervals(coded, method="maxdiff", n_boot=full, start=start, refit="full"))
    t_full *= boot / full
    return (
        f"{n:>8.0e} {t_count * 1e3:>7.2f}ms {t_fit:>7.2f}s {t_newton:>12.1f}s {t_full:>12.0f}s  "
        f"fit {t_fit / t_count:.0f}x, newton {t_newton / t_count:.0f}x, L-BFGS {t_full / t_count:.0f}x; "
        f"L-BFGS/newton {t_full / t_newton:.0f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--boot", type=int, default=200, help="bootstrap resamples")
    parser.add_argument("--full", type=int, default=3, help="L-BFGS refits timed (multiplied out to --boot)")
    args = parser.parse_args()
    b = str(args.boot)
    print(f"{'items':>8} {'counting':>9} {'fit':>8} {'newton x' + b:>13} {'L-BFGS x' + b:>13}  CPU ratios to counting")
    for n in args.sizes:
        print(run_size(n, args.boot, args.full), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
