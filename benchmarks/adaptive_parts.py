"""Helpers of benchmarks/bench_adaptive.py (issue 30), kept apart so each file stays readable: reading a
judgments file, judgments-to-target crossings and their summaries over seeds, the replay on a pool of real
judgments (see bench_adaptive's docstring, "Replay"), and the figure."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np


def read_judgments(path: Path):
    from fsb.bws.scoring import encode
    from fsb.tables.judgments import read_annotations

    c = encode(read_annotations(path, invalid="drop"))
    return c.design, c.best, c.worst, c.tuple_index, c.n_items


def crossing(curve: list[dict], key: str, target: float) -> float:
    """Judgments at which curve[key] first reaches target (linear between rounds); nan if never."""
    for a, b in itertools.pairwise(curve):
        if a[key] >= target:
            return float(a["judgments"])
        if b[key] >= target:
            return float(a["judgments"] + (target - a[key]) / (b[key] - a[key]) * (b["judgments"] - a["judgments"]))
    return float(curve[0]["judgments"]) if curve and curve[0][key] >= target else float("nan")


def summarise(values: np.ndarray, rng) -> dict:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return {"mean": None, "ci95": None, "range95": None, "seeds": 0}
    boots = rng.choice(v, size=(2000, v.size)).mean(axis=1)
    return {
        "mean": round(float(v.mean()), 4),
        "ci95": [round(float(x), 4) for x in np.quantile(boots, [0.025, 0.975])],
        "range95": [round(float(x), 4) for x in np.quantile(v, [0.025, 0.975])],
        "seeds": int(v.size),
    }


def replay(path: Path, seed: int, round_size: int) -> dict:
    """Replay on a pool of real judgments: each policy buys tuples of the pool round by round."""
    from fsb.bws import adaptive, maxdiff

    design, best, worst, ti, n = read_judgments(path)
    full = maxdiff.fit_maxdiff(design, best, worst, ti, n).utility
    rng = np.random.default_rng(seed)
    t = len(design)
    first = rng.permutation(t)[: t // 3]
    out = {}
    for policy in ("random", "naive", "adaptive"):
        bought = np.zeros(t, bool)
        bought[first] = True
        prng = np.random.default_rng(seed)
        curve = []
        while True:
            sel = bought[ti]
            fit = maxdiff.fit_maxdiff(design, best[sel], worst[sel], ti[sel], n)
            curve.append({"judgments": int(sel.sum()), "pearson": float(np.corrcoef(fit.utility, full)[0, 1])})
            pool = np.flatnonzero(~bought)
            if pool.size == 0:
                break
            size = min(round_size, pool.size)
            if policy == "random":
                pick = prng.choice(pool, size=size, replace=False)
            elif policy == "naive":
                x = fit.utility[design[pool]]
                pick = pool[np.argsort(x.max(axis=1) - x.min(axis=1), kind="stable")[:size]]
            else:
                u, v, _, _ = adaptive.item_uncertainty(design, best[sel], worst[sel], ti[sel], n)
                m = sel.sum() / bought.sum()
                spine = prng.choice(pool, size=round(adaptive.SPINE * size), replace=False)  # the rule's random quarter
                rest = np.setdiff1d(pool, spine)
                cand = np.sort(design[rest], axis=1)
                info = adaptive.expected_information(u[cand], v[cand], prng)
                rows, _ = adaptive.choose_tuples(cand, u, v, size - spine.size, m, set(), info=info)
                where = {tuple(r): i for i, r in zip(rest.tolist(), cand.tolist())}
                pick = np.concatenate([spine, np.array([where[tuple(r)] for r in rows], dtype=np.int64)])
                if pick.size < size:  # the greedy stops when no candidate is left that shares no item in a batch
                    rest = np.setdiff1d(pool, pick)
                    pick = np.concatenate([pick, prng.choice(rest, size=size - pick.size, replace=False)])
            bought[pick] = True
        out[policy] = curve
    return out


def replay_section(path: Path, seeds: int, round_size: int, srng) -> tuple[list[dict], list[dict], dict]:
    """(curves per seed, the mean curve's rows, judgments to Pearson 0.95 and 0.98 with ratios to random)."""
    reps = [replay(path, s, round_size or len(read_judgments(path)[0]) // 15) for s in range(seeds)]
    rows = []
    for i in range(len(reps[0]["random"]) if reps else 0):
        rows.append(
            {"judgments": int(np.mean([r["random"][i]["judgments"] for r in reps]))}
            | {p: round(float(np.mean([r[p][min(i, len(r[p]) - 1)]["pearson"] for r in reps])), 4) for p in ("random", "naive", "adaptive")}
        )
    reached = {}
    for target in (0.95, 0.98):  # judgments each policy bought to reach this Pearson with the whole pool's scores
        need = {p: np.array([crossing(r[p], "pearson", target) for r in reps]) for p in ("random", "naive", "adaptive")}
        reached[str(target)] = {p: summarise(need[p], srng) for p in need} | {
            f"ratio_{p}_to_random": summarise(need[p] / need["random"], srng) for p in ("naive", "adaptive")
        }
    return reps, rows, reached


def mean_curve(curves: list[list[dict]], key: str, grid: np.ndarray) -> np.ndarray:
    ys = [np.interp(grid, [c["judgments"] for c in cv], [c[key] for c in cv], right=np.nan) for cv in curves]
    return np.nanmean(np.array(ys), axis=0)


def figure(path: Path, sims: list[dict], reps: list[dict], targets: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    top = max(c["judgments"] for s in sims for p in s.values() for c in p["curve"])
    grid = np.linspace(min(s["fixed"]["curve"][0]["judgments"] for s in sims), top, 60)
    for ax, key, label in ((axes[0], "pearson", "Pearson with the truth"), (axes[1], "shr", "split-half (MaxDiff)")):
        for policy in ("fixed", "naive", "adaptive"):
            ax.plot(grid, mean_curve([s[policy]["curve"] for s in sims], key, grid), label=policy)
        ax.axhline(targets[key], color="grey", ls=":", lw=1)
        ax.set(xlabel="judgments", ylabel=label, title=f"simulation, {len(sims)} seeds (mean)")
        ax.legend()
    rgrid = np.linspace(reps[0]["random"][0]["judgments"], reps[0]["random"][-1]["judgments"], 40)
    for policy in ("random", "naive", "adaptive"):
        axes[2].plot(rgrid, mean_curve([r[policy] for r in reps], "pearson", rgrid), label=policy)
    axes[2].set(xlabel="judgments bought", ylabel="Pearson with all judgments' scores", title=f"replay on the release, {len(reps)} seeds")
    axes[2].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
