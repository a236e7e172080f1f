"""Benchmark (issue 30): adaptive annotation rounds (`fsb.bws.adaptive`) against the fixed design and the naive
rule, in seeded simulations and in a replay on real judgments (the replay, the figure and the summaries live
in benchmarks/adaptive_parts.py).

Simulation. Truth: the release's MaxDiff utilities (fit of its 5360 judgments), shrunk by sqrt(1 - mean se^2
/ var u) to remove their estimation noise, times a factor beta, permuted over the items per seed (resampled
with replacement for other sizes). Judgments: the MaxDiff model (Gumbel draws: best = argmax u + G, worst =
argmax -u + G over the rest), 2 or 3 judgments per tuple as in the release (640 / 1360 of its 2000 tuples).
beta carries the residual noise: fitted by bisection so that the reference (counting) split-half of a
simulated fixed study (the paper's 2N tuples, 8 per item) equals the release's 0.872 (beta = 0.96: judgments
slightly noisier than the fitted logit); `--noise F` divides it by F. Every policy starts from the same
first tuples of the fixed design (`--start` tuples per item, default 2) and buys `--round` tuples a round
(default N / 4): fixed = the next tuples of a 16-per-item `bws_design` (more of the same); naive = items
sorted by their current MaxDiff score, cut into consecutive groups (offset per round), skipping a group that
would share 3 items with a tuple of the study; adaptive = `plan_round`; oracle = `plan_round`'s search told
the true utilities (what knowing the truth buys this rule). The scorer is the same for all, the
build's MaxDiff fit (`fit_maxdiff`): Pearson with the truth, and split-half reliability of MaxDiff scores
(each tuple's judgments halved as the reference procedure does, both halves fitted; counting is biased once
tuples are chosen by score); `shr_prior` fits the halves with the prior ridge 1 / s^2 of the release
instead. Targets: Pearson 0.95; the release's own split-half on the same measure (printed), and 0.872
literally. Judgments-to-target are interpolated linearly between rounds (a round is N / 4 tuples, about 670
judgments: the curves are concave, so this overstates every policy's need a little, the fixed design's
most); ratios are per seed (policy / fixed), with the mean, a 95% Student t interval of the mean over seeds,
and the 2.5-97.5% range of the seeds, and as the ratio of mean judgments (paired over seeds, t interval by
the delta method). A run that never reaches a target (it ran out of tuples, or hit --max-per-item) is
censored at its last judgments, never dropped: its value is a lower bound, counted as `censored`, and a cell
holding one reads ">= mean". `bound`: the information approximations of `fsb.bws.information` (asymptotic,
not strict) for this truth and start; `information_per_judgment`: mean tr J at the truth of the tuples
bought after the start; `a_efficiency`: the study's (N - 1)^2 / (tr I^+ n t_max). `slope`: the fit regressed
on the truth (1 = the right scale). Coverage: share of items whose 95% MaxDiff bootstrap interval
(`bootstrap_intervals`, Newton refits, 200 resamples) holds the centred truth, at the end of each run (each
policy's own end point, `coverage_at_judgments`: not equal judgments).

Replay: the judgments of FILE (default the release) as a pool of tuples: start from a random third, buy
`--replay-round` further tuples a round (their real judgments): random (the fixed design's order is random),
naive (the tuples of smallest spread of current scores), adaptive (the rule of `plan_round` over the pool's
tuples: `choose_tuples` on the study's full covariance); Pearson of the MaxDiff scores with those of all of
FILE against judgments bought, and the judgments each bought to reach Pearson 0.95 and 0.98 (ratio to random
per seed).

    python benchmarks/bench_adaptive.py --seeds 3 --replay-seeds 1          # a quick look (about 1 CPU minute)
    python benchmarks/bench_adaptive.py --json --figure docs/figures/adaptive.png   # the full run (20 seeds)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from adaptive_parts import censored_crossing, figure, ratio_summary, read_judgments, replay_section, summarise, t_interval, tables

RELEASE = Path("/work/shared/data/fsb-upstream/FSB/fsb-tuples-annotations.csv")
TARGET_PEARSON = 0.95
POLICIES = ("fixed", "naive", "adaptive", "oracle")
RELEASE_SHR = 0.872


def release_truth(path: Path) -> tuple[np.ndarray, float, np.ndarray]:
    """(shrunk centred utilities, prior ridge 1/s^2, judgments-per-tuple distribution) of a judgments file."""
    from fsb.bws import maxdiff

    design, best, worst, ti, n = read_judgments(path)
    f = maxdiff.fit_maxdiff(design, best, worst, ti, n)
    s2 = float(f.utility.var() - np.mean(f.se**2))
    per = np.bincount(np.bincount(ti))
    return (f.utility - f.utility.mean()) * np.sqrt(s2 / f.utility.var()), 1.0 / s2, per / per.sum()


def judge(u, design, ti, rng):
    """MaxDiff judgments of design[ti]: best then worst, by Gumbel draws."""
    rows = design[ti]
    x = u[rows]
    b = np.argmax(x + rng.gumbel(size=x.shape), axis=1)
    y = -x + rng.gumbel(size=x.shape)
    y[np.arange(len(b)), b] = -np.inf
    w = np.argmax(y, axis=1)
    return rows[np.arange(len(b)), b], rows[np.arange(len(b)), w]


def halves(ti, rng):
    """Each tuple's judgments halved: floor(n/2) to half 1, one more with probability 1/2 when n is odd."""
    n_t = np.bincount(ti)
    order = np.lexsort((rng.random(ti.size), ti))
    start = np.cumsum(n_t) - n_t
    rank = np.empty(ti.size, np.int64)
    rank[order] = np.arange(ti.size) - start[ti[order]]
    cut = n_t // 2 + ((n_t % 2 == 1) & (rng.random(n_t.size) < 0.5))
    return rank < cut[ti]


def split_half(design, best, worst, ti, n, ridge, rng, trials=2) -> float:
    from fsb.bws import maxdiff

    out = []
    for _ in range(trials):
        h = halves(ti, rng)
        a = maxdiff.fit_maxdiff(design, best[h], worst[h], ti[h], n, ridge=ridge).utility
        b = maxdiff.fit_maxdiff(design, best[~h], worst[~h], ti[~h], n, ridge=ridge).utility
        both = (np.bincount(design[ti[h]].ravel(), minlength=n) > 0) & (np.bincount(design[ti[~h]].ravel(), minlength=n) > 0)
        out.append(np.corrcoef(a[both], b[both])[0, 1])
    return float(np.mean(out))


class Study:
    """A study in progress: distinct tuples and judgments (tuple_index into them)."""

    def __init__(self, n, tuples, u, per_p, rng):
        self.n, self.u, self.per_p, self.rng = n, u, per_p, rng
        self.design = np.zeros((0, tuples.shape[1]), np.int64)
        self.best = self.worst = self.ti = np.zeros(0, np.int64)
        self.used: set[tuple[int, ...]] = set()
        self.add(tuples)

    def add(self, tuples):
        from itertools import combinations

        tuples = np.asarray(tuples, np.int64)
        per = self.rng.choice(len(self.per_p), size=len(tuples), p=self.per_p)
        ti = len(self.design) + np.repeat(np.arange(len(tuples)), per)
        self.design = np.concatenate([self.design, tuples])
        b, w = judge(self.u, self.design, ti, self.rng)
        self.best, self.worst, self.ti = (np.concatenate([a, x]) for a, x in ((self.best, b), (self.worst, w), (self.ti, ti)))
        for row in tuples.tolist():
            self.used.update(combinations(sorted(row), 3))

    def arrays(self):
        return self.design, self.best, self.worst, self.ti, self.n


def naive_round(study: Study, size: int, r: int) -> np.ndarray:
    """Items sorted by their current MaxDiff score, cut into consecutive groups of k. Round r starts where
    round r - 1 stopped on the scale (a round smaller than N / k covers every item in turn), with the
    grouping offset by 1 each time the scale is run through."""
    from itertools import combinations

    from fsb.bws import maxdiff

    k = study.design.shape[1]
    u = maxdiff.fit_maxdiff(*study.arrays()).utility
    order = np.argsort(u, kind="stable")
    groups = study.n // k
    out: list[list[int]] = []
    g = r * size  # groups handed out so far
    for _ in range(4 * groups * k):  # every group of every offset, at most
        if len(out) == size:
            break
        offset = (g // groups) % k
        s = offset + (g % groups) * k
        g += 1
        if s + k > study.n:
            continue
        row = sorted(order[s : s + k].tolist())
        subs = list(combinations(row, 3))
        if not any(x in study.used for x in subs):
            out.append(row)
            study.used.update(subs)  # Study.add re-adds them
    return np.array(out, dtype=np.int64).reshape(-1, k)


def oracle_round(study: Study, size: int, seed: int) -> np.ndarray:
    """The adaptive rule told the truth: `plan_round`'s search on the true utilities (their information, and the
    covariance at them) instead of the fitted ones, the variances still those of the judgments so far. Not a
    strict bound either (its criterion is the same approximation), but what knowing the truth buys this rule."""
    from fsb.bws import adaptive

    d, b, w, ti, n = study.arrays()
    _, v, bound, s2 = adaptive.item_uncertainty(d, b, w, ti, n)
    cov = adaptive.study_covariance(d, ti, study.u, bound, s2, n)
    m = float(np.bincount(ti).mean())
    chosen, _, _ = adaptive._search(
        size,
        set(study.used),
        u=study.u,
        v=v,
        cov=cov,
        k=d.shape[1],
        m=m,
        reach=adaptive.REACH,
        draws=0,
        spine=0.0,
        seed=seed,
        progress=None,
    )
    return np.array(chosen, dtype=np.int64)


def evaluate(study: Study, ridge: float, rng) -> dict:
    from fsb.bws import maxdiff

    fit = maxdiff.fit_maxdiff(*study.arrays())
    return {
        "judgments": int(study.best.size),
        "tuples": len(study.design),
        "pearson": float(np.corrcoef(fit.utility, study.u)[0, 1]),
        "slope": float(np.polyfit(study.u - study.u.mean(), fit.utility, 1)[0]),  # the fit's scale against the truth
        "shr": split_half(*study.arrays(), maxdiff.RIDGE, rng),
        "shr_prior": split_half(*study.arrays(), ridge, rng),
    }


def coverage(study: Study) -> dict:
    from fsb.bws import maxdiff
    from fsb.bws.bootstrap import bootstrap_intervals
    from fsb.bws.coded import Coded

    d, b, w, ti, n = study.arrays()
    low, high = bootstrap_intervals(Coded(np.arange(n), d[ti], d, ti, b, w), method="maxdiff", n_boot=200, seed=0)
    ok = np.isfinite(low) & np.isfinite(high)
    truth = study.u - study.u.mean()
    fit = maxdiff.fit_maxdiff(d, b, w, ti, n).utility
    slope, icpt = np.polyfit(truth, fit, 1)
    mapped = icpt + slope * truth  # the truth on the fit's own scale (a stretched scale moves every interval outward)
    return {
        "coverage": float(np.mean((low[ok] <= truth[ok]) & (truth[ok] <= high[ok]))),
        "coverage_rescaled": float(np.mean((low[ok] <= mapped[ok]) & (mapped[ok] <= high[ok]))),
        "widen_for_95": widen_for(fit[ok], low[ok], high[ok], truth[ok] + fit.mean() - truth.mean(), 0.95),
        "items_with_interval": int(ok.sum()),
        "coverage_at_judgments": int(b.size),
    }


def widen_for(est, low, high, truth, level: float) -> float:
    """The factor by which every interval must be widened about its estimate (each side by its own length)
    for `level` of them to hold the truth: 1 = calibrated, above 1 = too narrow."""
    side = np.where(truth >= est, (truth - est) / np.maximum(high - est, 1e-12), (est - truth) / np.maximum(est - low, 1e-12))
    return float(np.quantile(side, level))


def simulate_seed(seed: int, args, base_u, per_p, ridge, beta, targets) -> dict:
    from fsb import bws
    from fsb.bws import adaptive, information

    rng = np.random.default_rng(1000 + seed)
    n = args.items
    u = beta * (rng.permutation(base_u) if n == base_u.size else rng.choice(base_u, size=n))
    fixed_all = bws.bws_design(n, 4, 16, seed=seed)
    start = fixed_all[: n * args.start // 4]
    out = {}
    for policy in POLICIES:
        study = Study(n, start, u, per_p, np.random.default_rng(seed))
        curve = [evaluate(study, ridge, rng)]
        nxt, r = len(start), 0
        while len(study.design) < args.max_tuples:
            if policy == "fixed":
                new = fixed_all[nxt : nxt + args.round]
                nxt += args.round
            elif policy == "naive":
                new = naive_round(study, args.round, r)
            elif policy == "oracle":
                new = oracle_round(study, args.round, seed * 100 + r)
            else:
                new = adaptive.plan_round(*study.arrays(), args.round, seed=seed * 100 + r, **args.rule)[0]
            if len(new) == 0:  # the policy found no tuple it may add (small studies: every group shares 3 items)
                break
            study.add(new)
            r += 1
            curve.append(evaluate(study, ridge, rng))
            if all(curve[-1][key] >= t for key, t in targets.values()):
                break
        out[policy] = {"curve": curve}
        for name, (key, t) in targets.items():
            out[policy][f"to_{name}"], out[policy][f"censored_{name}"] = censored_crossing(curve, key, t)
        later = study.ti[study.ti >= len(start)]  # judgments bought after the common start
        out[policy]["information_per_judgment"] = information.mean_information(u, study.design[later]) if later.size else float("nan")
        per_tuple = np.bincount(study.ti, minlength=len(study.design))
        eta = information.design_efficiency(u, study.design, per_tuple)
        # the study's A-efficiency at the truth: (N - 1)^2 / (tr I^+ n t_max), 1 at the information bound
        t_mean = information.mean_information(u, study.design[study.ti])
        out[policy]["a_efficiency"] = t_mean / (eta * information.max_information(study.design.shape[1]))
        out[policy].update(coverage(study) if args.coverage else {})
    return out


def calibrate_beta(base_u, per_p, n, seeds=3) -> float:
    """beta such that the counting split-half of a simulated 2N, 8-per-item study is the release's 0.872."""
    from fsb import bws

    studies = []
    for s in range(seeds):
        rng = np.random.default_rng(s)
        d = bws.bws_design(n, 4, 8, seed=s)
        ti = np.repeat(np.arange(len(d)), rng.choice(len(per_p), size=len(d), p=per_p))
        studies.append((d, ti, rng.permutation(base_u) if n == base_u.size else rng.choice(base_u, size=n), s))
    lo, hi = 0.3, 2.0
    for _ in range(12):
        beta = (lo + hi) / 2
        shr = np.mean(
            [
                bws.split_half_reliability(d, *judge(beta * u, d, ti, np.random.default_rng(s)), ti, n, trials=10).pearson.mean()
                for d, ti, u, s in studies
            ]
        )
        lo, hi = (beta, hi) if shr < RELEASE_SHR else (lo, beta)
    return (lo + hi) / 2


def bound_section(base_u, beta, per_p, ridge, n: int, n_fixed: float, n_start: float, target: float = TARGET_PEARSON) -> dict:
    """The information bound (`fsb.bws.information`) on adaptive / fixed judgments in this simulation: t_f the
    fixed design's mean tr J at the truth, t_max its most, eta the fixed design's distance from the
    Cauchy-Schwarz equality at n_fixed judgments; `oracle` the asymptotic approximation for a rule knowing the
    truth, `knowable` the one for a rule that knows only the judgments (both compare asymptotic summed
    variances tr I^+ with a finite-sample Pearson crossing: approximations, not strict bounds; a rule may
    land on either side of them); `level_tuples` the information
    of tuples of 4 neighbours in the true order (what a study of that size can offer at most, per judgment)."""
    from fsb import bws
    from fsb.bws import information as info

    rng = np.random.default_rng(0)
    u = beta * (rng.permutation(base_u) if n == base_u.size else rng.choice(base_u, size=n))
    m = float((per_p * np.arange(per_p.size)).sum())
    design = bws.bws_design(n, 4, 16, seed=0)
    t_f = info.mean_information(u, design[: n // 2])
    t_max = info.max_information(4)
    if not np.isfinite(n_fixed):  # the fixed design never reached the target: no judgments to compare with
        return {"t_fixed_over_t_max": round(t_f / t_max, 4), "note": "the fixed design did not reach the target"}
    eta = info.design_efficiency(u, design[: min(len(design), max(n // 2, int(n_fixed / m)))], m)
    sd_target = float(u.std() * np.sqrt(1 / target**2 - 1))
    level = {}
    for size in (50, 100, 300, 1000):
        x = np.sort(beta * rng.choice(base_u, size=size))
        level[str(size)] = round(info.mean_information(x, np.arange(size - size % 4).reshape(-1, 4)) / t_max, 4)
    return {
        "t_fixed": round(t_f, 4),
        "t_max": round(t_max, 4),
        "t_fixed_over_t_max": round(t_f / t_max, 4),
        "eta_fixed": round(eta, 4),
        "n_fixed_to_pearson": round(n_fixed, 1),
        "n_start": round(n_start, 1),
        "note": "asymptotic approximations (tr I^+), not strict bounds: see fsb.bws.information",
        "oracle_ratio_approx": round(info.judgment_bound(n_fixed, n_start, t_f, t_max, eta), 4),
        "oracle_ratio_approx_no_start": round(info.judgment_bound(n_fixed, 0, t_f, t_max, eta), 4),
        "knowable_ratio_approx": round(info.knowable_bound(n_fixed, n_start, t_f, eta, n, 1.0 / ridge * beta**2), 4),
        "posterior_sd_at_target": round(sd_target, 4),
        "t_bayes_at_target_over_t_max": round(info.bayes_information(sd_target) / t_max, 4),
        "level_tuples_over_t_max_by_items": level,
    }


def ratio_of_means(need: np.ndarray, need_cens: np.ndarray, base: np.ndarray, base_cens: np.ndarray) -> dict:
    """mean(need) / mean(base) over the seeds whose fixed run reached the target, paired, with a 95% t interval
    by the delta method (se = sd(need - R base) / (sqrt(n) mean(base))): steadier than the mean of per-seed
    ratios when the fixed design's crossing is noisy (its Pearson curve is flat near the target). A censored
    numerator (the policy never reached it: its last judgments) makes the ratio a lower bound ("reads": ">=")."""
    ok = np.isfinite(need) & np.isfinite(base) & ~base_cens
    if not ok.any():
        return {"ratio": None, "ci95": None, "seeds": 0, "censored": 0, "base_censored": int(base_cens.sum())}
    a, b = need[ok], base[ok]
    r = float(a.mean() / b.mean())
    ci = t_interval(r + (a - r * b) / b.mean())  # the linearised ratio per seed: its mean is r
    cens = int(need_cens[ok].sum())
    return {
        "ratio": round(r, 4),
        "ci95": ci,
        "seeds": int(a.size),
        "censored": cens,
        "reads": ">=" if cens else "=",
        "base_censored": int(base_cens.sum()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Adaptive annotation rounds (fsb.bws.adaptive) against the fixed design and the naive rule: seeded "
        "simulations fitted to the release and a replay on real judgments. Prints tables; --json the full result.",
    )
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--start", type=int, default=2, help="tuples per item in the common first round")
    ap.add_argument("--round", type=int, default=0, help="tuples bought a round (default items / 4)")
    ap.add_argument("--max-per-item", type=float, default=12, help="stop a run at this many tuples per item")
    ap.add_argument("--target-pearson", type=float, default=TARGET_PEARSON, help="the Pearson-with-the-truth target")
    ap.add_argument("--noise", type=float, default=1.0, help="divide the fitted utility scale by this (2: noisier annotators)")
    ap.add_argument("--reach", type=float, default=None, help="the rule's reach (default adaptive.REACH)")
    ap.add_argument("--draws", type=int, default=None, help="the rule's utility draws (default adaptive.DRAWS)")
    ap.add_argument(
        "--spine", type=float, default=None, help="the rule's random share (default: 0 on the full covariance, adaptive.SPINE beyond)"
    )
    ap.add_argument("--no-coverage", dest="coverage", action="store_false")
    ap.add_argument("--judgments", type=Path, default=RELEASE, help="replay pool (Item1..Item4,BestItem,WorstItem[,Annotator])")
    ap.add_argument("--replay-seeds", type=int, default=5)
    ap.add_argument("--replay-round", type=int, default=0, help="tuples bought a replay round (default pool / 15)")
    ap.add_argument("--skip-sim", action="store_true")
    ap.add_argument("--figure", type=Path)
    ap.add_argument("--json", action="store_true", help="print the full result (curves per seed) as JSON instead of the tables")
    args = ap.parse_args(argv)
    args.round = args.round or args.items // 4
    args.rule = {k: getattr(args, k) for k in ("reach", "draws", "spine") if getattr(args, k) is not None}
    args.max_tuples = int(args.max_per_item * args.items / 4)
    t0, c0 = time.time(), time.process_time()
    base_u, ridge, per_p = release_truth(RELEASE)
    result: dict = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    sims: list[dict] = []
    if not args.skip_sim:
        beta = calibrate_beta(base_u, per_p, args.items) / args.noise
        d, b, w, ti, n = read_judgments(RELEASE)
        from fsb.bws import maxdiff

        release_shr = split_half(d, b, w, ti, n, maxdiff.RIDGE, np.random.default_rng(0), trials=10)
        release_prior = split_half(d, b, w, ti, n, ridge, np.random.default_rng(0), trials=10)
        targets = {
            "pearson": ("pearson", args.target_pearson),
            "shr_release": ("shr", release_shr),
            "shr_0.872": ("shr", RELEASE_SHR),
            "shr_prior_release": ("shr_prior", release_prior),
        }
        result["calibration"] = {"beta": round(beta, 4), "prior_ridge": round(ridge, 4)}
        result["targets"] = {name: [key, round(t, 4)] for name, (key, t) in targets.items()}
        for seed in range(args.seeds):
            sims.append(simulate_seed(seed, args, base_u, per_p, ridge, beta, targets))
            print(f"seed {seed} done ({time.time() - t0:.0f} s)", file=sys.stderr)
        table = {}
        for policy in POLICIES:
            row = {}
            for name in targets:
                need, cens = (np.array([s[policy][f"{x}_{name}"] for s in sims]) for x in ("to", "censored"))
                base, base_cens = (np.array([s["fixed"][f"{x}_{name}"] for s in sims]) for x in ("to", "censored"))
                row[f"judgments_to_{name}"] = summarise(need, cens)
                row[f"ratio_to_fixed_{name}"] = ratio_summary(need, cens, base, base_cens)
                row[f"ratio_of_means_{name}"] = ratio_of_means(need, cens, base, base_cens)
            row["slope_at_end"] = summarise(np.array([s[policy]["curve"][-1]["slope"] for s in sims]))
            for key in ("information_per_judgment", "a_efficiency"):
                row[key] = summarise(np.array([s[policy][key] for s in sims]))
            if args.coverage:  # each policy at its own end point (coverage_at_judgments): not equal judgments
                for key in ("coverage", "coverage_rescaled", "widen_for_95", "coverage_at_judgments"):
                    row[key] = summarise(np.array([s[policy][key] for s in sims], dtype=float))
            table[policy] = row
        result["simulation"] = table
        n_fixed = float(np.nanmean([s["fixed"]["to_pearson"] if not s["fixed"]["censored_pearson"] else np.nan for s in sims]))
        n_start = float(np.mean([s["fixed"]["curve"][0]["judgments"] for s in sims]))
        result["bound"] = bound_section(base_u, beta, per_p, ridge, args.items, n_fixed, n_start, args.target_pearson)
        result["simulation_curves"] = sims
    reps, rows, reached = replay_section(args.judgments, args.replay_seeds, args.replay_round)
    result["replay"] = {"pool": str(args.judgments), "rows": rows, "to_pearson": reached, "curves": reps}
    load = [round(x, 2) for x in os.getloadavg()]
    result["load"] = {"wall_s": round(time.time() - t0, 1), "cpu_s": round(time.process_time() - c0, 1), "loadavg_1_5_15min": load}
    if args.figure and sims and reps:
        figure(args.figure, sims, reps, {"pearson": args.target_pearson, "shr": result["targets"]["shr_release"][1]})
    if args.json:
        print(json.dumps(result))
    else:
        print(tables(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
