"""Model-based best-worst scores: the MaxDiff (best-worst multinomial logit) fit. Per-item bootstrap
intervals for counting and MaxDiff scores are in `fsb.bws.bootstrap`.

The model (Marley and Louviere 2005, "Some probabilistic models of best, worst, and best-worst choices",
J. Math. Psych. 49; the sequential best-then-worst form): an item i has utility u_i; in a tuple S the
best is chosen with P(best = b) = exp(u_b) / sum_{i in S} exp(u_i), and then the worst among the rest
with P(worst = w | b) = exp(-u_w) / sum_{i in S \\ {b}} exp(-u_i). Utilities are fitted by maximum
likelihood with a tiny ridge (lambda/2 ||u||^2, which also fixes the free shift) by L-BFGS.
Unlike counting, the fit accounts for the competition each item met, so it stays unbiased in
unbalanced designs (Hollis 2018, "Scoring best-worst data in unbalanced many-item designs", Behav.
Res. Methods 50).

Speed: the judgments of a tuple share its best-choice softmax, and the worst-choice softmax depends
only on which slot was best, so the likelihood is evaluated per distinct tuple on (T, k) counts
(`TupleCounts`: judgments per tuple, and per slot how often it was chosen best and worst), never per
judgment: O(T k) work and memory per L-BFGS step, and the steps are counted in the report. The
judgment-level form (`maxdiff_nll` on `layout`) is kept as the plain reference the tests compare with.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["RIDGE", "MaxDiffFit", "TupleCounts", "fit_maxdiff", "layout", "maxdiff_nll", "tuple_counts", "tuple_nll"]

RIDGE = 1e-2  # prior precision on each utility (a N(0, 10^2) prior): negligible beside the data, keeps perfect items finite


@dataclass(frozen=True)
class MaxDiffFit:
    """Fitted utilities (logit scale, centred to mean 0), their standard errors, and the optimiser's report."""

    utility: NDArray[np.float64]
    se: NDArray[np.float64]
    nll: float
    iterations: int
    converged: bool


@dataclass(frozen=True)
class TupleCounts:
    """Judgments summarised per distinct tuple, slot-major for speed (numpy reduces fast across rows of
    length T, slowly along a short last axis): `slots` (k, T) the items of tuple t in column t, `n` (T,)
    judgments of each tuple, `nb`/`nw` (k, T) how many of them chose each slot best / worst. Weighting
    the tuples (bootstrap counts) multiplies the three count arrays by the weight. `linear` (n,) is the
    part of the likelihood linear in u, sum over judgments of [i = w] - [i = b] (times the weights)."""

    slots: NDArray[np.integer]
    n: NDArray[np.float64]
    nb: NDArray[np.float64]
    nw: NDArray[np.float64]
    linear: NDArray[np.float64]

    @classmethod
    def of(
        cls, slots: NDArray[np.integer], n: NDArray[np.float64], nb: NDArray[np.float64], nw: NDArray[np.float64], n_items: int
    ) -> TupleCounts:
        """The counts, with `linear` computed."""
        return cls(slots, n, nb, nw, np.bincount(slots.ravel(), weights=(nw - nb).ravel(), minlength=n_items))

    def weighted(self, w: NDArray[np.float64]) -> TupleCounts:
        """The counts with tuple t's judgments counted w_t times."""
        return TupleCounts.of(self.slots, self.n * w, self.nb * w, self.nw * w, self.linear.size)


def _positions(shown: NDArray[np.integer], chosen: NDArray[np.integer]) -> NDArray[np.int64]:
    """Column of each row's chosen item in `shown` (the first slot holding it)."""
    return np.argmax(shown == chosen[:, None], axis=1)


def tuple_counts(
    design: NDArray[np.integer],
    best: NDArray[np.integer],
    worst: NDArray[np.integer],
    tuple_index: NDArray[np.integer],
    n_items: int | None = None,
) -> TupleCounts:
    """Summarise judgment j (items `design[tuple_index[j]]`, choices `best[j]`, `worst[j]`) into per-tuple counts.

    Parameters
    ----------
    design : (T, k) int array, the items of each distinct tuple.
    best, worst : (M,) int arrays, the items chosen best and worst in each judgment (items of its tuple).
    tuple_index : (M,) int array, the tuple of each judgment.
    n_items : number of items (default: the largest item in `design` + 1).

    Returns
    -------
    TupleCounts
        n_t = #judgments of t; nb_it = #judgments of t whose best is in slot i (the first slot holding the
        item); nw_it likewise for worst.
    """
    design = np.asarray(design)
    ti = np.asarray(tuple_index, dtype=np.int64)
    n_tuples, k = design.shape
    cells = n_tuples * k

    def per_slot(chosen: NDArray[np.integer]) -> NDArray[np.float64]:
        pos = np.zeros(ti.size, dtype=np.int64)
        found = np.zeros(ti.size, dtype=bool)
        for i in range(k):  # the first slot holding the chosen item, without an (M, k) temporary
            hit = ~found & (design[ti, i] == chosen)
            pos[hit] = i
            found |= hit
        return np.bincount(pos * n_tuples + ti, minlength=cells).astype(np.float64).reshape(k, n_tuples)

    slots = np.ascontiguousarray(design.T, dtype=np.intp)  # np.take and np.bincount index by intp: no cast per step
    n = np.bincount(ti, minlength=n_tuples).astype(np.float64)
    n_items = int(design.max()) + 1 if n_items is None else n_items
    return TupleCounts.of(slots, n, per_slot(np.asarray(best)), per_slot(np.asarray(worst)), n_items)


def softmaxes(
    x: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The tuple-level pieces at slot utilities x (k, T).

    Returns
    -------
    p : (k, T), the best-choice softmax exp(x_i) / sum_S exp(x).
    lse : (T,), log sum_S exp(x).
    e : (k, T), exp(-x_i - m_t) with m_t = max_S(-x).
    loo : (k, T), L_it = sum_{l != i} e_lt, the worst-choice normaliser when slot i was best, summed
        directly (prefix + suffix sums: no cancellation when one term dominates).
    m : (T,), so that log L_it + m_t is the log-normaliser.
    """
    x_max = np.maximum.reduce(x, axis=0)
    p = np.exp(x - x_max)
    z = np.add.reduce(p, axis=0)
    p /= z
    lse = np.log(z)
    lse += x_max
    m = -np.minimum.reduce(x, axis=0)
    e = np.exp(-x - m)
    return p, lse, e, others(e), m


def others(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """For a (k, T): out_it = sum_{l != i} a_lt, by prefix and suffix sums (never a total minus a_it, which
    cancels when one term dominates)."""
    out = np.empty_like(a)
    out[0] = 0.0
    for i in range(1, a.shape[0]):
        np.add(out[i - 1], a[i - 1], out=out[i])
    suffix = np.zeros_like(a[0])
    for i in range(a.shape[0] - 1, -1, -1):
        out[i] += suffix
        suffix += a[i]
    return out


BLOCK = 1 << 12  # tuples per block of `tuple_nll`: its (k, BLOCK) float64 temporaries stay in a core's L2 cache


def tuple_nll(u: NDArray[np.float64], counts: TupleCounts, ridge: float = RIDGE) -> tuple[float, NDArray[np.float64]]:
    """Negative log-likelihood of the best-worst logit and its gradient, from per-tuple counts.

    Parameters
    ----------
    u : (n,) utilities.
    counts : the judgments per tuple (`tuple_counts`).
    ridge : prior precision lambda.

    Returns
    -------
    (nll, grad)
        NLL = sum_t [n_t LSE(u_S) - sum_i nb_it u_i + sum_i nb_it LSE(-u_{S \\ i}) + sum_i nw_it u_i]
        + lambda/2 ||u||^2 (equal to `maxdiff_nll` over the judgments), and d/du through the slots:
        n_t p_it - nb_it + nw_it - e_it sum_{l != i} R_lt with R_lt = nb_lt / L_lt, p the best softmax and
        e / L the worst softmax of the slots other than the best (`softmaxes`), plus lambda u.
        Computed `BLOCK` tuples at a time in preallocated buffers (`_block_nll`): whole-array passes over
        (k, T) temporaries made each step memory-bound (0.40 s a step at 1e6 items, 0.036 s at 1e5, on
        this 2-core machine); in blocks 0.18 s and 0.027 s.
    """
    slots = counts.slots
    k, n_tuples = slots.shape
    cell = np.empty((k, n_tuples))  # each slot's share of the gradient, summed into items at the end
    size = min(BLOCK, n_tuples)
    buffers = [np.empty((k, size)) for _ in range(4)] + [np.empty(size) for _ in range(3)]
    nll = 0.0
    for s in range(0, n_tuples, BLOCK):
        e = min(s + BLOCK, n_tuples)
        b = e - s
        nll += _block_nll(u, slots[:, s:e], counts.n[s:e], counts.nb[:, s:e], cell[:, s:e], [a[..., :b] for a in buffers])
    grad = np.bincount(slots.ravel(), weights=cell.ravel(), minlength=u.size)
    grad += counts.linear
    grad += ridge * u
    return float(nll + counts.linear @ u + 0.5 * ridge * (u @ u)), grad


def _block_nll(u, slots, n, nb, out, buffers) -> float:
    """`tuple_nll` on one block of tuples: returns the part of the NLL not linear in u, and writes each
    slot's gradient share n_t p_it - e_it sum_{l != i} R_lt into `out` (k, b). The arithmetic of
    `softmaxes` and `others`, in place in `buffers` (four (k, b) and three (b,) arrays)."""
    x, p, e, loo, top, low, z = buffers
    np.take(u, slots, out=x)
    np.maximum.reduce(x, axis=0, out=top)
    np.minimum.reduce(x, axis=0, out=low)
    np.subtract(x, top, out=p)
    np.exp(p, out=p)
    np.add.reduce(p, axis=0, out=z)
    np.subtract(low, x, out=e)  # exp(-x_i - m), m = max(-x) = -min(x)
    np.exp(e, out=e)
    np.subtract(top, low, out=top)  # LSE(x) + m = log z + max(x) - min(x); sum_i nb_it = n_t
    top += np.log(z, out=low)
    nll = float(n @ top)
    np.divide(n, z, out=z)
    p *= z  # n_t times the best softmax
    _others_into(e, loo, z)
    r = np.divide(nb, loo, out=x)
    nll += float(np.einsum("it,it->", nb, np.log(loo, out=loo)))
    _others_into(r, loo, z)
    e *= loo
    np.subtract(p, e, out=out)
    return nll


def _others_into(a: NDArray[np.float64], out: NDArray[np.float64], suffix: NDArray[np.float64]) -> None:
    """`others` into `out`, with `suffix` (a row's size) as scratch."""
    k = a.shape[0]
    out[0] = 0.0
    for i in range(1, k):
        np.add(out[i - 1], a[i - 1], out=out[i])
    suffix[:] = a[k - 1]
    for i in range(k - 2, -1, -1):
        out[i] += suffix
        if i:
            suffix += a[i]


def layout(
    design: NDArray[np.integer], tuple_index: NDArray[np.integer], best: NDArray[np.integer], worst: NDArray[np.integer]
) -> tuple[NDArray[np.integer], NDArray[np.bool_], NDArray[np.bool_]]:
    """Judgment-level layout for `maxdiff_nll`: (k, M) slots of every judgment and one-hot masks of the
    best and worst slot."""
    shown = np.asarray(design)[np.asarray(tuple_index)]
    k = shown.shape[1]
    best_mask = np.arange(k)[:, None] == _positions(shown, np.asarray(best))[None, :]
    worst_mask = np.arange(k)[:, None] == _positions(shown, np.asarray(worst))[None, :]
    return np.ascontiguousarray(shown.T), best_mask, worst_mask


def maxdiff_nll(
    u: NDArray[np.float64],
    slots: NDArray[np.integer],
    best_mask: NDArray[np.bool_],
    worst_mask: NDArray[np.bool_],
    weight: NDArray[np.float64] | None = None,
    ridge: float = RIDGE,
) -> tuple[float, NDArray[np.float64]]:
    """Negative log-likelihood of the best-worst logit and its gradient, judgment by judgment (the plain
    reference for `tuple_nll`, which the fit uses).

    Parameters
    ----------
    u : (n,) utilities.
    slots, best_mask, worst_mask : (k, M) from `layout`: column j holds judgment j's items and marks the
        slots chosen best and worst.
    weight : (M,) multiplies each judgment (bootstrap counts), or None.
    ridge : prior precision lambda.

    Returns
    -------
    (nll, grad)
        NLL = sum_j w_j [LSE(u_S) - u_b + LSE(-u_{S \\ b}) + u_w] + lambda/2 ||u||^2, and
        d/du_i = sum_j w_j (p_ji - [i=b] - q_ji + [i=w]) + lambda u_i, p the softmax of u over S and q the
        softmax of -u over S minus b.
    """
    x = u[slots]
    x_max = x.max(axis=0)
    p = np.exp(x - x_max)
    z = p.sum(axis=0)
    p /= z
    y = np.where(best_mask, -np.inf, -x)
    y_max = y.max(axis=0)
    q = np.exp(y - y_max)
    zy = q.sum(axis=0)
    q /= zy
    ll = np.log(z) + x_max + np.log(zy) + y_max - np.where(best_mask, x, 0.0).sum(axis=0) + np.where(worst_mask, x, 0.0).sum(axis=0)
    g = p - q - best_mask + worst_mask
    if weight is not None:
        ll = ll * weight
        g *= weight
    grad = np.bincount(slots.ravel(), weights=g.ravel(), minlength=u.size) + ridge * u
    return float(ll.sum() + 0.5 * ridge * (u @ u)), grad


def diag_information(u: NDArray[np.float64], counts: TupleCounts, ridge: float = RIDGE) -> NDArray[np.float64]:
    """Diagonal of the Fisher information.

    Parameters
    ----------
    u : (n,) utilities.
    counts : the judgments per tuple (`tuple_counts`).
    ridge : prior precision lambda.

    Returns
    -------
    (n,) float64
        Sum over judgments of p_i (1 - p_i) + q_i (1 - q_i), plus the ridge (q the worst softmax given
        the judgment's best slot); `BLOCK` tuples at a time, as `tuple_nll`.
    """
    slots = counts.slots
    k, n_tuples = slots.shape
    h = np.empty((k, n_tuples))
    for s in range(0, n_tuples, BLOCK):
        part = slice(s, min(s + BLOCK, n_tuples))
        p, _, e, loo, _ = softmaxes(u[slots[:, part]])
        hp = h[:, part]
        np.multiply(counts.n[part] * p, 1.0 - p, out=hp)
        for i in range(k):
            q = e / loo[i]
            q[i] = 0.0
            hp += counts.nb[i, part] * q * (1.0 - q)
    return np.bincount(slots.ravel(), weights=h.ravel(), minlength=u.size) + ridge


def one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """Vector products on one BLAS thread: threads that spin-wait cost more than they save on a shared
    machine. A no-op without threadpoolctl."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def minimise(
    counts: TupleCounts, n_items: int, start: NDArray[np.float64] | None, ridge: float = RIDGE, tol: float = 1e-4
) -> tuple[NDArray[np.float64], float, int, bool]:
    """L-BFGS on `tuple_nll` from `start` (zeros when None): (u, nll, iterations, converged)."""
    import scipy.optimize

    u0 = np.zeros(n_items) if start is None else np.array(start, dtype=np.float64)
    with one_blas_thread():
        res = scipy.optimize.minimize(
            tuple_nll, u0, args=(counts, ridge), jac=True, method="L-BFGS-B", options={"maxiter": 2000, "gtol": tol, "ftol": 1e-10}
        )
    return res.x, float(res.fun), int(res.nit), bool(res.success)


def counting_start(counts: TupleCounts, n_items: int) -> NDArray[np.float64]:
    """A starting point from the counts: 2 (B - W) / n, close to the logit utilities of a 4-tuple design."""
    n = np.bincount(counts.slots.ravel(), weights=np.tile(counts.n, counts.slots.shape[0]), minlength=n_items)
    return -2.0 * counts.linear / np.maximum(n, 1)


def fit_maxdiff(
    design: NDArray[np.integer],
    best: NDArray[np.integer],
    worst: NDArray[np.integer],
    tuple_index: NDArray[np.integer],
    n_items: int,
    *,
    ridge: float | None = RIDGE,
    tol: float = 1e-4,
) -> MaxDiffFit:
    """Maximum-likelihood utilities of the best-worst logit for judgments of `design[tuple_index[j]]`.

    Parameters
    ----------
    design : (T, k) items of each tuple.
    best, worst : (M,) items chosen best and worst in judgment j.
    tuple_index : (M,) the tuple of judgment j.
    n_items : number of items (codes 0..n_items-1).
    ridge : prior precision lambda (lambda/2 ||u||^2 added to the negative log-likelihood; None: `RIDGE`).
    tol : L-BFGS's projected-gradient tolerance.

    Returns
    -------
    MaxDiffFit
        Utilities argmin_u NLL(u) (`tuple_nll`) centred to mean 0 (the model fixes only differences) and
        standard errors 1 / sqrt(I_ii) from the diagonal of the Fisher information (conditional on the
        other utilities, so slightly narrow; `fsb.bws.bootstrap.bootstrap_intervals` gives the
        design-honest interval). Marley and Louviere (2005).
    """
    ridge = RIDGE if ridge is None else ridge
    counts = tuple_counts(design, best, worst, tuple_index, n_items)
    u, nll, nit, ok = minimise(counts, n_items, counting_start(counts, n_items), ridge, tol)
    se = 1.0 / np.sqrt(diag_information(u, counts, ridge))
    return MaxDiffFit(u - u.mean(), se, nll, nit, ok)
