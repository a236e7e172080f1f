"""Hollis's value scoring and Rescorla-Wagner scoring of best-worst judgments, vectorised (`value_scores`,
`rw_scores`), for comparison with counting and MaxDiff (`benchmarks/bench_scorers.py`).

Both are "error-correction" tournaments (Hollis 2018, "Scoring best-worst data in unbalanced many-item
designs, with applications to crowdsourcing semantic judgments", Behav. Res. Methods 50: 711-729). Each
judgment of a k-tuple becomes 2k - 3 wins (`pairings`): best beats worst, best beats each unchosen item, each
unchosen item beats worst. Two dummy players are added: one beats every item, one loses to every item (they
keep values off 0 and 1). Then `ITERATIONS` passes over all the pairings in a fresh random order, pass i at
rate r = `RATE` / i:

value: every player starts at v = 0.5. A win of w over l has salience s = o_l / (o_w + o_l), o = v / (1 - v)
    (the odds; s is how surprising the win was), and moves v_w += s r (1 - v_w), v_l -= s r v_l.
Rescorla-Wagner (rw): every player has associations a_win = a_lose = 0, total A = a_win + a_lose and
    p = a_win / A (0.5 while A = 0); s = 1 - o_w / (o_w + o_l) with o = p / max(1e-4, 1 - p); the winner's
    a_win += s r (1 - A_w), the loser's a_lose += s r (1 - A_l); the score is p.

The rates shrink (sum of 0.025 / i over 100 passes is 0.13 per pairing), so the values never converge: an
item seen in few judgments stays near 0.5. That shrinkage is what value scoring gains on thin, skewed designs
(see the docs' scorer comparison); it is not a fitted model, so it gives no standard error.

Vectorised: a pass is cut into batches of about n/2 pairings (each item about once a batch); within a batch
every pairing reads the values at the batch's start, and each player's wins and losses are applied together
as the exact solution of their simultaneous pulls: for value, with a = sum over its wins of -log(1 - s r) and
b likewise over its losses, v <- v* + (v - v*) exp(-(a + b)), v* = a / (a + b); for rw, 1 - A shrinks by
exp(-(a + b)) and the gain is split a : b between a_win and a_lose. One pairing a batch (`batch=1`) is
exactly Hollis's sequential update (the tests hold it to his loop); larger batches differ from it by less
than the trial order does. The order is seeded (numpy's default_rng): the same seed, the same scores.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["ITERATIONS", "RATE", "pairings", "rw_scores", "value_scores"]

ITERATIONS = 100  # passes over the pairings (Hollis's default)
RATE = 0.025  # learning rate of pass 1; pass i uses RATE / i (Hollis's default)


def pairings(
    design: NDArray[np.integer], best: NDArray[np.integer], worst: NDArray[np.integer], tuple_index: NDArray[np.integer] | None = None
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The wins implied by the judgments: (winners, losers), 2k - 3 per judgment of a k-tuple.

    Parameters
    ----------
    design : (T, k) items of each tuple (or of each judgment, with `tuple_index` None).
    best, worst : (M,) items chosen best and worst in judgment j.
    tuple_index : (M,) the tuple of judgment j, or None.

    Returns
    -------
    (winners, losers)
        best > worst for every judgment, then per slot best > item and item > worst where the item was
        neither chosen best nor worst (Hollis 2018's pairings)."""
    shown = np.asarray(design) if tuple_index is None else np.asarray(design)[np.asarray(tuple_index)]
    b, w = np.asarray(best, dtype=np.intp), np.asarray(worst, dtype=np.intp)
    winners, losers = [b], [w]
    for j in range(shown.shape[1]):
        item = shown[:, j].astype(np.intp)
        other = (item != b) & (item != w)
        winners += [b[other], item[other]]
        losers += [item[other], w[other]]
    return np.concatenate(winners), np.concatenate(losers)


def _tournament(
    winners: NDArray[np.intp],
    losers: NDArray[np.intp],
    n_items: int,
    step: Callable[[NDArray[np.intp], NDArray[np.intp], float], None],
    *,
    iterations: int,
    rate: float,
    seed: int,
    batch: int | None,
    dummies: bool,
) -> None:
    """Run the passes: the pairings (plus the dummies' 2n, players n and n + 1) shuffled each pass, cut into
    batches, `step(winners, losers, r)` called per batch."""
    if dummies:
        items = np.arange(n_items, dtype=np.intp)
        winners = np.concatenate([winners, np.full(n_items, n_items, dtype=np.intp), items])
        losers = np.concatenate([losers, items, np.full(n_items, n_items + 1, dtype=np.intp)])
    size = max(1, (n_items + 2) // 2) if batch is None else int(batch)
    rng = np.random.default_rng(seed)
    for i in range(1, iterations + 1):
        order = rng.permutation(winners.size)
        w, lo = winners[order], losers[order]
        for s in range(0, order.size, size):
            step(w[s : s + size], lo[s : s + size], rate / i)


def _gains(salience: NDArray[np.float64], r: float) -> NDArray[np.float64]:
    """-log(1 - s r): one event's pull as a rate, so that events compose by adding."""
    return -np.log1p(-salience * r)


def value_scores(
    winners: NDArray[np.intp],
    losers: NDArray[np.intp],
    n_items: int,
    *,
    iterations: int = ITERATIONS,
    rate: float = RATE,
    seed: int = 0,
    batch: int | None = None,
    dummies: bool = True,
) -> NDArray[np.float64]:
    """Hollis's value scores in (0, 1) (see the module docstring for the update and its reference).

    Parameters
    ----------
    winners, losers : (P,) the pairings (`pairings`), item codes 0..n_items-1.
    n_items : number of items.
    iterations, rate : passes, and pass 1's rate (pass i: rate / i).
    seed : seed of the pairings' order in each pass.
    batch : pairings per batch (None: about n/2; 1: Hollis's sequential update exactly).
    dummies : add the always-winning and always-losing players (Hollis's default).

    Returns
    -------
    (n_items,) float64
        Each item's value. An item in no pairing starts at 0.5 and meets only the dummies (with `dummies`), so it
        ends near 0.5, not at it (0.49989 and 0.50004 measured); exactly 0.5 without dummies."""
    v = np.full(n_items + 2, 0.5)
    size = v.size

    def step(w: NDArray[np.intp], lo: NDArray[np.intp], r: float) -> None:
        nonlocal v
        vw, vl = v[w], v[lo]
        den = vw * (1.0 - vl) + vl * (1.0 - vw)  # o_l / (o_w + o_l) without dividing by 1 - v
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(den > 0, vl * (1.0 - vw) / den, 0.5)
        g = _gains(s, r)
        a, b = np.bincount(w, weights=g, minlength=size), np.bincount(lo, weights=g, minlength=size)
        pull = a + b
        moved = pull > 0
        target = a[moved] / pull[moved]
        v[moved] = target + (v[moved] - target) * np.exp(-pull[moved])

    _tournament(winners, losers, n_items, step, iterations=iterations, rate=rate, seed=seed, batch=batch, dummies=dummies)
    return v[:n_items]


def rw_scores(
    winners: NDArray[np.intp],
    losers: NDArray[np.intp],
    n_items: int,
    *,
    iterations: int = ITERATIONS,
    rate: float = RATE,
    seed: int = 0,
    batch: int | None = None,
    dummies: bool = True,
) -> NDArray[np.float64]:
    """Hollis's Rescorla-Wagner scores p = a_win / (a_win + a_lose) in [0, 1] (see the module docstring).
    Parameters as `value_scores`. An item in no pairing meets only the dummies (with `dummies`): one win and one
    loss a pass against them leave it well away from 0.5 (0.66 and 0.751 measured); exactly 0.5 without dummies."""
    win, lose = np.zeros(n_items + 2), np.zeros(n_items + 2)
    size = win.size

    def odds(p: NDArray[np.float64]) -> NDArray[np.float64]:
        return p / np.maximum(1e-4, 1.0 - p)

    def step(w: NDArray[np.intp], lo: NDArray[np.intp], r: float) -> None:
        total = win + lose
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(total > 0, win / total, 0.5)
        ow, ol = odds(p[w]), odds(p[lo])
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(ow + ol > 0, 1.0 - ow / (ow + ol), 1.0)
        g = _gains(s, r)
        a, b = np.bincount(w, weights=g, minlength=size), np.bincount(lo, weights=g, minlength=size)
        pull = a + b
        moved = pull > 0
        gained = (1.0 - total[moved]) * -np.expm1(-pull[moved])
        win[moved] += gained * a[moved] / pull[moved]
        lose[moved] += gained * b[moved] / pull[moved]

    _tournament(winners, losers, n_items, step, iterations=iterations, rate=rate, seed=seed, batch=batch, dummies=dummies)
    total = win[:n_items] + lose[:n_items]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, win[:n_items] / total, 0.5)
