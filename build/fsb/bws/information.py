"""Fisher information of best-worst (MaxDiff) judgments, and the bound it puts on adaptive rounds.

One judgment of a tuple S (best, then worst among the rest; the logit of `fsb.bws.maxdiff`, Marley and
Louviere 2005) with utilities u_S carries the Fisher information

    J(S) = diag(p) - p p'  +  sum_b p_b [diag(q_b) - q_b q_b'],   p = softmax(u_S), q_b = softmax(-u_{S minus b})

(the Hessian of a log-softmax does not depend on the outcome, so J is its expectation over the best
choice b). J 1 = 0 (only differences are identified), and tr J is largest when the utilities are equal:
t_max = (1 - 1/k) + (1 - 1/(k - 1)), 17/12 for k = 4.

The approximations (`judgment_bound`, `knowable_bound`): asymptotic, not strict bounds. They compare summed
asymptotic variances (tr I^+, what the maximum-likelihood utilities approach with many judgments per item),
while a benchmark measures where a finite study's Pearson crosses a target: at that crossing the actual
summed error is larger (a review of bench_adaptive measured a mean squared error of 0.36-0.41 there, where
tr I^+ / N gives 0.27-0.28), so a rule may land on either side of them. Read them as where the information runs out, not as
a guarantee. n judgments with information matrix I = sum_j J(S_j) (N items; on the
N - 1 dimensional space of centred utilities, eigenvalues l_1..l_{N-1}) give the maximum-likelihood
utilities a summed asymptotic variance tr I^+ = sum 1/l_i >= (N - 1)^2 / sum l_i = (N - 1)^2 / tr I
(Cauchy-Schwarz; equality iff all l_i are equal), and tr I = sum_j tr J(S_j) <= n t_max. A fixed design of
n_f judgments whose tuples carry t_f = mean tr J on average sits at tr I^+ = eta (N - 1)^2 / (n_f t_f),
eta >= 1 its distance from equality (`design_efficiency`; about 1.1 for the paper's balanced design on
the release's scale). Any design that matches its summed variance therefore needs tr I >= n_f t_f / eta;
after a common start of n_s judgments of the fixed design (information n_s t_f) the rest need at least
(n_f t_f / eta - n_s t_f) / t_max judgments asymptotically, whatever rule chooses them, even one that knows
the truth:

    adaptive / fixed >= (n_s + (n_f t_f / eta - n_s t_f) / t_max) / n_f     (-> t_f / (eta t_max), n_s = 0).

A rule that knows only the judgments does worse: a tuple whose items' utilities are known to within a
posterior sd sigma has true utilities m + sigma z at best (equal means), hence expected information at
most t_B(sigma) = E tr J(sigma z) < t_max (`bayes_information`); `knowable_bound` integrates that along the
study (the summed information so far and the prior set the posterior variance sigma^2 = 1 / (tr I / (N - 1)
+ 1 / prior_var), every item taken as equally known: an approximation). Summed error variance is what Pearson with the truth falls with
(r^2 ~ var u / (var u + mean error variance)), so these bound the judgments to a Pearson target too.
References: Chaloner and Verdinelli 1995 (Bayesian A-optimal design), Kessels, Goos and Vandebroek 2006
(choice designs), Chaloner and Larntz 1989 (design averaged over a prior).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "bayes_information",
    "covariance_gain",
    "covariance_update",
    "design_efficiency",
    "expected_information",
    "information_matrix",
    "judgment_bound",
    "knowable_bound",
    "max_information",
    "mean_information",
    "tuple_information",
    "variance_drop",
]


def tuple_information(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Fisher information J(S) of one best-then-worst judgment for tuples with utilities x (C, k): (C, k, k)
    (the formula of the module docstring)."""
    x = np.asarray(x, dtype=np.float64)
    k = x.shape[1]
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    eye = np.eye(k)
    info = p[:, :, None] * eye - p[:, :, None] * p[:, None, :]
    for b in range(k):
        y = -x.copy()
        y[:, b] = -np.inf
        q = np.exp(y - y.max(axis=1, keepdims=True))
        q /= q.sum(axis=1, keepdims=True)
        info += p[:, b, None, None] * (q[:, :, None] * eye - q[:, :, None] * q[:, None, :])
    return info


def expected_information(x, v, rng: np.random.Generator, draws: int = 8) -> NDArray[np.float64]:
    """E J(S) over utilities drawn from N(x, diag v) (C, k), by `draws` Monte Carlo draws (the Bayesian
    design criterion of Chaloner and Larntz 1989; draws = 0: J at x, the locally optimal design)."""
    if draws == 0:
        return tuple_information(x)
    total = np.zeros((*x.shape, x.shape[1]))
    sd = np.sqrt(v)
    for _ in range(draws):
        total += tuple_information(x + sd * rng.standard_normal(x.shape))
    return total / draws


def variance_drop(v: NDArray[np.float64], info: NDArray[np.float64], m: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(gain, new_v) for tuples with item variances v (C, k) and per-judgment information info (C, k, k)
    judged m times: gain = tr V - tr (V^-1 + m J)^-1 and new_v its diagonal."""
    k = v.shape[1]
    post = np.linalg.inv(np.eye(k) / v[:, :, None] + m * info)
    new_v = np.diagonal(post, axis1=1, axis2=2)
    return v.sum(axis=1) - new_v.sum(axis=1), new_v.copy()


def max_information(k: int) -> float:
    """t_max: tr J of a k-tuple whose utilities are all equal, the most one judgment can carry."""
    return (1.0 - 1.0 / k) + (1.0 - 1.0 / (k - 1))


def mean_information(u: NDArray[np.float64], design: NDArray[np.integer]) -> float:
    """t_f: the mean tr J(S) over the tuples of `design` (item codes) with true utilities u."""
    info = tuple_information(np.asarray(u, dtype=np.float64)[np.asarray(design)])
    return float(np.trace(info, axis1=1, axis2=2).mean())


def information_matrix(
    u: NDArray[np.float64], design: NDArray[np.integer], per_tuple: NDArray[np.floating] | float = 1.0
) -> NDArray[np.float64]:
    """I = sum_t m_t J(S_t) (N x N, dense): the Fisher information of `design` (item codes) judged per_tuple
    times a tuple at utilities u; I 1 = 0 (only differences are identified)."""
    u = np.asarray(u, dtype=np.float64)
    design = np.asarray(design)
    info = tuple_information(u[design]) * np.broadcast_to(np.asarray(per_tuple, dtype=np.float64), (len(design),))[:, None, None]
    total = np.zeros((u.size, u.size))
    k = design.shape[1]
    for a in range(k):
        for b in range(k):
            np.add.at(total, (design[:, a], design[:, b]), info[:, a, b])
    return total


def covariance_gain(
    cov: NDArray[np.float64], centred_sq: NDArray[np.float64], cand: NDArray[np.integer], info: NDArray[np.float64], m: float
) -> NDArray[np.float64]:
    """The drop in summed centred posterior variance, tr C Sigma C - tr C Sigma' C, if tuple S (a row of cand, (C, k))
    were judged m times with per-judgment information info (C, k, k): by Woodbury, Sigma' = Sigma - Sigma_.S M Sigma_S.
    with M = (I + m J Sigma_SS)^-1 m J, so the drop is tr(M (Sigma C Sigma)_SS). centred_sq: Sigma C Sigma (C = I - 11'/N,
    the centring: Pearson ignores a shift of all scores). Unlike `variance_drop` it sees the covariances: a tuple of
    items tied to each other only through long chains lowers the variance of every item on the chain."""
    k = cand.shape[1]
    mj = m * info
    m_mat = np.linalg.solve(np.eye(k) + mj @ cov[cand[:, :, None], cand[:, None, :]], mj)
    return np.einsum("cij,cji->c", m_mat, centred_sq[cand[:, :, None], cand[:, None, :]])


def covariance_update(
    cov: NDArray[np.float64], rows: NDArray[np.integer], info: NDArray[np.float64], m: float, centred_sq: NDArray[np.float64] | None = None
) -> None:
    """Sigma <- (Sigma^-1 + m sum_t E_t J_t E_t')^-1 in place for tuples `rows` (b, k) sharing no item, each judged m
    times with per-judgment information info (b, k, k): one Woodbury update over their items B (Sigma - W U',
    U = Sigma_.B, W = U (I + m J_B Sigma_BB)^-1 m J_B with J_B block diagonal: O(N^2 bk), the same matrix as b
    updates in turn). centred_sq, if given, becomes Sigma' C Sigma' in place too: G - W G_B. - G_.B W' + W (U' C U) W'
    (G = Sigma C Sigma, symmetric), so a round never recomputes it (O(N^3))."""
    rows = np.atleast_2d(np.asarray(rows))
    info = np.asarray(info).reshape(len(rows), rows.shape[1], rows.shape[1])
    items = rows.ravel()
    k = rows.shape[1]
    mj = np.zeros((items.size, items.size))
    for t in range(len(rows)):
        mj[t * k : (t + 1) * k, t * k : (t + 1) * k] = m * info[t]
    side = cov[:, items]
    w = side @ np.linalg.solve(np.eye(items.size) + mj @ cov[np.ix_(items, items)], mj)
    if centred_sq is not None:
        g_side = centred_sq[:, items]
        core = side.T @ (side - side.mean(axis=0))
        centred_sq -= np.concatenate([w, g_side, -(w @ core)], axis=1) @ np.concatenate([g_side, w, w], axis=1).T
    cov -= w @ side.T


def design_efficiency(u: NDArray[np.float64], design: NDArray[np.integer], per_tuple: NDArray[np.floating] | float = 1.0) -> float:
    """eta = tr I^+ tr I / (N - 1)^2 >= 1 for `design` judged per_tuple times a tuple (dense N x N: for
    N up to a few thousand). 1: every centred direction equally known (Cauchy-Schwarz equality); inf when
    the design does not connect the items."""
    total = information_matrix(u, design, per_tuple)
    n = total.shape[0]
    centre = np.eye(n) - 1.0 / n
    eig = np.linalg.eigvalsh(centre @ total @ centre)[1:]  # the smallest is the constant direction (0)
    if eig[0] <= 1e-10 * eig[-1]:
        return float("inf")
    return float((1.0 / eig).sum() * eig.sum() / (n - 1) ** 2)


def bayes_information(sigma: float, k: int = 4, draws: int = 20_000, seed: int = 0) -> float:
    """t_B(sigma) = E tr J(sigma z), z ~ N(0, I_k): the expected information of a tuple whose items are known
    to within a posterior sd sigma and placed level (equal posterior means). Monte Carlo, seeded."""
    z = np.random.default_rng(seed).standard_normal((draws, k))
    return float(np.trace(tuple_information(sigma * z), axis1=1, axis2=2).mean())


def judgment_bound(n_fixed: float, n_start: float, t_fixed: float, t_max: float, eta: float = 1.0) -> float:
    """Asymptotic approximation (not a strict bound: see the module docstring) of the least adaptive / fixed
    judgments to the fixed design's summed variance at n_fixed judgments, both sharing the first n_start (the
    formula of the module docstring; eta = 1 gives a lower figure)."""
    need = max(0.0, n_fixed * t_fixed / eta - n_start * t_fixed)
    return (n_start + need / t_max) / n_fixed


def knowable_bound(
    n_fixed: float,
    n_start: float,
    t_fixed: float,
    eta: float,
    n_items: int,
    prior_var: float,
    k: int = 4,
    steps: int = 200,
    seed: int = 0,
) -> float:
    """Approximate adaptive / fixed judgments for a rule that knows only the judgments so far: as
    `judgment_bound`, but each judgment after the start carries at most t_B(sigma), sigma^2 =
    1 / (tr I / (N - 1) + 1 / prior_var) the mean posterior variance of the information gathered so far
    (every item taken as equally known: an approximation, not a strict bound)."""
    target = n_fixed * t_fixed / eta
    have = n_start * t_fixed
    grid = np.geomspace(0.02, 20.0, 60)
    table = np.array([bayes_information(s, k, draws=4000, seed=seed) for s in grid])
    n = float(n_start)
    step = max((target - have) / (steps * max_information(k)), 1e-9)
    while have < target:
        sigma = 1.0 / np.sqrt(have / (n_items - 1) + 1.0 / prior_var)
        rate = float(np.interp(sigma, grid, table))
        have += step * rate
        n += step
    return n / n_fixed
