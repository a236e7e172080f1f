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


def censored_crossing(curve: list[dict], key: str, target: float) -> tuple[float, bool]:
    """(judgments, censored): the crossing, or, for a run that stopped short of the target (it ran out of tuples
    or reached the cap), its last judgments and True: a lower bound on what it would need, never dropped."""
    x = crossing(curve, key, target)
    return (x, False) if np.isfinite(x) else (float(curve[-1]["judgments"]) if curve else float("nan"), True)


def t_interval(v: np.ndarray) -> list[float] | None:
    """95% Student t interval of the mean of per-seed values (the percentile bootstrap of the mean covered
    only 0.84 at 5 seeds and 0.89 at 8)."""
    from scipy import stats

    if v.size < 2:
        return None
    half = float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return [round(float(v.mean()) - half, 4), round(float(v.mean()) + half, 4)]


def summarise(values: np.ndarray, censored: np.ndarray | None = None) -> dict:
    """Mean over seeds with its 95% t interval and the seeds' 2.5-97.5% range. censored: seeds whose value is a
    lower bound (a run that never reached the target, at its last judgments): kept, counted, and the mean is
    then a lower bound too ("reads": ">=")."""
    finite = np.isfinite(values)
    v = values[finite]
    cens = int(np.asarray(censored)[finite].sum()) if censored is not None else 0
    if v.size == 0:
        return {"mean": None, "ci95": None, "range95": None, "seeds": 0, "censored": cens}
    return {
        "mean": round(float(v.mean()), 4),
        "ci95": t_interval(v),
        "range95": [round(float(x), 4) for x in np.quantile(v, [0.025, 0.975])],
        "seeds": int(v.size),
        "censored": cens,
        "reads": ">=" if cens else "=",
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
                u, v, bound, s2 = adaptive.item_uncertainty(design, best[sel], worst[sel], ti[sel], n)
                m = sel.sum() / bought.sum()
                cov = adaptive.study_covariance(design, ti[sel], u, bound, s2, n)  # the rule of plan_round (N <= FULL_ITEMS)
                cand = np.sort(design[pool], axis=1)
                info = adaptive.expected_information(u[cand], v[cand], prng)
                rows, _ = adaptive.choose_tuples(cand, u, v, size, m, set(), info=info, cov=cov)
                where = {tuple(r): i for i, r in zip(pool.tolist(), cand.tolist())}
                pick = np.array([where[tuple(r)] for r in rows], dtype=np.int64)
                if pick.size < size:  # the greedy stops when no candidate is left that shares no item in a batch
                    rest = np.setdiff1d(pool, pick)
                    pick = np.concatenate([pick, prng.choice(rest, size=size - pick.size, replace=False)])
            bought[pick] = True
        out[policy] = curve
    return out


def ratio_summary(need: np.ndarray, need_cens: np.ndarray, base: np.ndarray, base_cens: np.ndarray) -> dict:
    """Per-seed ratios need / base summarised: a seed whose numerator is censored gives a lower bound on its ratio
    (kept and counted); one whose base is censored bounds nothing and is left out, counted as base_censored."""
    ok = ~np.asarray(base_cens, dtype=bool)
    out = summarise(need[ok] / base[ok], need_cens[ok])
    return out | {"base_censored": int(base_cens.sum())}


def replay_section(path: Path, seeds: int, round_size: int) -> tuple[list[dict], list[dict], dict]:
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
        got = {p: [censored_crossing(r[p], "pearson", target) for r in reps] for p in ("random", "naive", "adaptive")}
        need = {p: np.array([x for x, _ in got[p]]) for p in got}
        cens = {p: np.array([c for _, c in got[p]], dtype=bool) for p in got}
        reached[str(target)] = {p: summarise(need[p], cens[p]) for p in need} | {
            f"ratio_{p}_to_random": ratio_summary(need[p], cens[p], need["random"], cens["random"]) for p in ("naive", "adaptive")
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
        for policy in [p for p in ("fixed", "naive", "adaptive", "oracle") if p in sims[0]]:
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


def _cell(s: dict | None, digits: int = 2, key: str = "mean") -> str:
    """'0.84 [0.82, 0.87]', '>= 0.95 [...] (3 censored)' for a cell holding censored seeds, '-' for none."""
    if not s or s.get(key) is None:
        return "-"
    ci = f" [{s['ci95'][0]:,.{digits}f}, {s['ci95'][1]:,.{digits}f}]" if s.get("ci95") else ""
    text = f"{'>= ' if s.get('censored') else ''}{s[key]:,.{digits}f}{ci}"
    notes = [
        f"{s['censored']} of {s['seeds']} censored" if s.get("censored") else "",
        f"fixed censored in {s['base_censored']}" if s.get("base_censored") else "",
    ]
    return text + "".join(f" ({n})" for n in notes if n)


def tables(result: dict) -> str:
    """The human-readable tables (what docs/bws.md quotes): judgments to each target and the ratios to the fixed
    design (mean over seeds, 95% t interval), end-of-run slope and coverage, the information approximations,
    and the replay; `--json` prints everything instead."""
    out: list[str] = []
    sim = result.get("simulation")
    if sim:
        out.append(f"simulation: {result['args']['seeds']} seeds, {result['args']['items']} items, calibration {result['calibration']}")
        out.append("| target | fixed (judgments) | adaptive / fixed | naive / fixed | oracle / fixed | adaptive / fixed (ratio of means) |")
        out.append("|---|---|---|---|---|---|")
        for name, (key, t) in result["targets"].items():
            out.append(
                f"| {key} {t} | {_cell(sim['fixed'][f'judgments_to_{name}'], 0)} | {_cell(sim['adaptive'][f'ratio_to_fixed_{name}'])} | "
                f"{_cell(sim['naive'][f'ratio_to_fixed_{name}'])} | {_cell(sim.get('oracle', {}).get(f'ratio_to_fixed_{name}'))} | "
                f"{_cell(sim['adaptive'][f'ratio_of_means_{name}'], key='ratio')} |"
            )
        out.append("")
        out.append("| policy | slope at end | coverage (own end point) | at judgments | widen for 95% | A-efficiency |")
        out.append("|---|---|---|---|---|---|")
        for p in [p for p in ("fixed", "naive", "adaptive", "oracle") if p in sim]:
            row = sim[p]
            out.append(
                f"| {p} | {_cell(row['slope_at_end'])} | {_cell(row.get('coverage'), 3)} | {_cell(row.get('coverage_at_judgments'), 0)} | "
                f"{_cell(row.get('widen_for_95'))} | {_cell(row['a_efficiency'])} |"
            )
        b = result["bound"]
        if "oracle_ratio_approx" in b:
            out.append(
                f"\ninformation approximations (asymptotic, not strict bounds): knowing the truth {b['oracle_ratio_approx']}x "
                f"({b['oracle_ratio_approx_no_start']}x with no start), knowing the judgments {b['knowable_ratio_approx']}x; "
                f"fixed tuples carry {b['t_fixed_over_t_max']} of the most, eta {b['eta_fixed']}"
            )
    replay = result.get("replay", {}).get("to_pearson")
    if replay and result["replay"].get("curves"):
        out.append(f"\nreplay on {result['replay']['pool']}: judgments bought to a Pearson with the whole pool's scores")
        out.append("| Pearson | random | naive | adaptive | adaptive / random | naive / random |")
        out.append("|---|---|---|---|---|---|")
        for t, r in replay.items():
            out.append(
                f"| {t} | {_cell(r['random'], 0)} | {_cell(r['naive'], 0)} | {_cell(r['adaptive'], 0)} | "
                f"{_cell(r['ratio_adaptive_to_random'])} | {_cell(r['ratio_naive_to_random'])} |"
            )
    load = result["load"]
    out.append(f"\n{load['wall_s']} s wall, {load['cpu_s']} s CPU (this process), load {load['loadavg_1_5_15min']}")
    return "\n".join(out)
