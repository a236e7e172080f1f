"""The information bound on adaptive rounds (fsb.bws.information): t_max is the most one judgment carries,
the Cauchy-Schwarz efficiency is at least 1 and 1 for a symmetric design, the bound's formula, and the
Bayesian information falls from t_max as the utilities grow uncertain."""

from __future__ import annotations

from itertools import combinations, pairwise, permutations

import numpy as np
import pytest

from fsb import bws
from fsb.bws import information as info


def test_equal_utilities_carry_the_most_information_and_its_closed_form() -> None:
    """t_max = (1 - 1/k) + (1 - 1/(k - 1)): 17/12 for 4-tuples, 7/6 for 3-tuples; no tuple of random
    utilities carries more (a J whose trace grew with spread, or a wrong worst-choice term, breaks this)."""
    assert info.max_information(4) == pytest.approx(17 / 12)
    assert info.max_information(3) == pytest.approx(7 / 6)
    for k in (3, 4, 5):
        level = np.trace(info.tuple_information(np.full((1, k), 0.7))[0])
        assert level == pytest.approx(info.max_information(k))
        x = np.random.default_rng(k).normal(scale=2.0, size=(500, k))
        assert np.trace(info.tuple_information(x), axis1=1, axis2=2).max() < info.max_information(k)


def test_mean_information_is_the_average_trace_over_the_design() -> None:
    u = np.array([0.0, 1.0, 2.0, 3.0, -1.0])
    design = np.array([[0, 1, 2, 3], [0, 1, 2, 4]])
    expect = np.mean([np.trace(info.tuple_information(u[row][None])[0]) for row in design])
    assert info.mean_information(u, design) == pytest.approx(expect)
    assert info.mean_information(np.zeros(5), design) == pytest.approx(info.max_information(4))


def test_design_efficiency_is_one_for_a_symmetric_design_and_above_one_otherwise() -> None:
    """All 4-subsets of 6 level items: every centred direction equally informed (Cauchy-Schwarz equality);
    a real design with spread utilities is above 1 (the fixed design's distance from the bound)."""
    everything = np.array(list(combinations(range(6), 4)))
    assert info.design_efficiency(np.zeros(6), everything) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    design = bws.bws_design(60, 4, 8, seed=0)
    eta = info.design_efficiency(rng.normal(scale=1.5, size=60), design, 2.5)
    assert 1.0 < eta < 3.0
    assert info.design_efficiency(np.zeros(8), np.array([[0, 1, 2, 3], [4, 5, 6, 7]])) == float("inf")  # two islands


def test_design_efficiency_bounds_the_summed_variance_by_cauchy_schwarz() -> None:
    """tr I^+ = eta (N - 1)^2 / tr I, checked on a dense information matrix built by hand."""
    rng = np.random.default_rng(1)
    n = 12
    design = bws.bws_design(n, 4, 6, seed=1)
    u = rng.normal(size=n)
    total = np.zeros((n, n))
    for row, j in zip(design, info.tuple_information(u[design])):
        total[np.ix_(row, row)] += j
    summed_var = np.trace(np.linalg.pinv(total))
    eta = info.design_efficiency(u, design)
    assert summed_var == pytest.approx(eta * (n - 1) ** 2 / np.trace(total), rel=1e-6)
    assert summed_var >= (n - 1) ** 2 / np.trace(total)


def test_judgment_bound_formula() -> None:
    t_max = info.max_information(4)
    assert info.judgment_bound(1000, 0, 0.9, t_max) == pytest.approx(0.9 / t_max)
    assert info.judgment_bound(1000, 0, 0.9, t_max, eta=1.2) == pytest.approx(0.9 / (1.2 * t_max))
    # a start of n_s fixed judgments: n_s + (n_f t_f / eta - n_s t_f) / t_max
    assert info.judgment_bound(5000, 1000, 0.9, t_max, 1.1) == pytest.approx((1000 + (5000 * 0.9 / 1.1 - 900) / t_max) / 5000)
    assert info.judgment_bound(1000, 1000, 0.9, t_max) == pytest.approx(1.0)  # the start is everything
    assert info.judgment_bound(1000, 500, t_max, t_max) == pytest.approx(1.0)  # fixed tuples already level: no room


def test_bayes_information_falls_from_t_max_as_sigma_grows() -> None:
    t_max = info.max_information(4)
    values = [info.bayes_information(s, draws=4000) for s in (0.01, 0.5, 1.0, 2.0)]
    assert values[0] == pytest.approx(t_max, rel=1e-3)
    assert all(a > b for a, b in pairwise(values))
    assert info.bayes_information(1.0, draws=4000, seed=3) == info.bayes_information(1.0, draws=4000, seed=3)  # seeded


def test_knowable_bound_lies_above_the_oracle_bound() -> None:
    """A rule that knows only the judgments cannot beat one that knows the truth; with vanishing prior
    uncertainty it approaches it."""
    t_f, t_max, eta = 0.9, info.max_information(4), 1.15
    oracle = info.judgment_bound(4700, 1340, t_f, t_max, eta)
    knowable = info.knowable_bound(4700, 1340, t_f, eta, 1000, prior_var=2.9)
    assert oracle < knowable < 1.0
    assert info.knowable_bound(4700, 1340, t_f, eta, 1000, prior_var=1e-6) == pytest.approx(oracle, rel=0.02)


def test_tuple_information_is_the_expected_outer_product_of_the_score() -> None:
    """J(S) = E[g g'] over every (best, worst) outcome, g the gradient of log P(best, worst) (brute force):
    a wrong worst-choice term or a missing p_b weight fails here."""
    x = np.array([0.3, -1.2, 0.8, 0.1])
    k = x.size
    expect = np.zeros((k, k))
    for b, w in permutations(range(k), 2):
        p = np.exp(x) / np.exp(x).sum()
        rest = [i for i in range(k) if i != b]
        q = np.zeros(k)
        q[rest] = np.exp(-x[rest]) / np.exp(-x[rest]).sum()
        g = -p + q
        g[b] += 1
        g[w] -= 1
        expect += p[b] * q[w] * np.outer(g, g)
    assert np.allclose(info.tuple_information(x[None])[0], expect)


def test_variance_drop_matches_a_dense_posterior() -> None:
    v = np.array([[0.5, 1.0, 2.0, 0.3]])
    j = info.tuple_information(np.array([[0.0, 0.2, -0.1, 0.4]]))
    gain, new_v = info.variance_drop(v, j, 2.5)
    post = np.linalg.inv(np.diag(1 / v[0]) + 2.5 * j[0])
    assert np.allclose(new_v[0], np.diag(post)) and np.isclose(gain[0], v.sum() - np.trace(post))
    assert (new_v < v).all()


def test_covariance_gain_and_update_match_a_dense_posterior() -> None:
    """The Woodbury gain is the drop of the centred trace of the dense posterior (Sigma^-1 + m E J E')^-1,
    and the in-place update leaves exactly that posterior: a wrong sign, a missing centring or an
    un-transposed side would each move one of them."""
    rng = np.random.default_rng(0)
    n = 9
    a = rng.standard_normal((n, n))
    cov = np.linalg.inv(a @ a.T / n + np.eye(n))
    rows = np.array([[0, 3, 5, 8], [1, 2, 4, 7]])
    j = info.tuple_information(rng.standard_normal(rows.shape))
    centre = np.eye(n) - 1.0 / n
    gain = info.covariance_gain(cov, cov @ centre @ cov, rows, j, 2.5)
    for t in range(2):
        embed = np.zeros((n, n))
        embed[np.ix_(rows[t], rows[t])] = 2.5 * j[t]
        post = np.linalg.inv(np.linalg.inv(cov) + embed)
        assert np.isclose(gain[t], np.trace(centre @ cov @ centre) - np.trace(centre @ post @ centre))
        updated, centred_sq = cov.copy(), cov @ centre @ cov
        info.covariance_update(updated, rows[t], j[t], 2.5, centred_sq)
        assert np.allclose(updated, post) and np.allclose(centred_sq, post @ centre @ post)
    both, both_sq = cov.copy(), cov @ centre @ cov  # the two tuples (no shared item) in one update: as one after the other
    info.covariance_update(both, rows, j, 2.5, both_sq)
    embed = np.zeros((n, n))
    for t in range(2):
        embed[np.ix_(rows[t], rows[t])] += 2.5 * j[t]
    post = np.linalg.inv(np.linalg.inv(cov) + embed)
    assert np.allclose(both, post) and np.allclose(both_sq, post @ centre @ post)
    assert (gain > 0).all()


def test_information_matrix_sums_the_tuples_and_ignores_a_shift() -> None:
    u = np.array([0.0, 0.5, -0.3, 1.2, 0.1])
    design = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    total = info.information_matrix(u, design, np.array([2.0, 1.0]))
    j = info.tuple_information(u[design])
    expect = np.zeros((5, 5))
    expect[np.ix_(design[0], design[0])] += 2.0 * j[0]
    expect[np.ix_(design[1], design[1])] += j[1]
    assert np.allclose(total, expect) and np.allclose(total @ np.ones(5), 0.0)
