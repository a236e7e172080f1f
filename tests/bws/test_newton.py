"""fsb.bws.newton: the pieces that issue 23 rebuilt for 1e6 items, the chunked Newton resamples, the
tuple-major Hessian products, the freezing PCG and the sliced second steps (their meaning is checked
against simulated truth in tests/bws/test_maxdiff.py)."""

from __future__ import annotations

import numpy as np
import pytest

from fsb.bws import maxdiff, newton
from tests._support import simulated_study

pcg = newton.pcg


def test_newton_draws_do_not_depend_on_how_many_resamples_are_solved_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resamples are drawn one after the other from the seeded generator and solved in chunks sized by
    memory (`CHUNK_BYTES`): one resample at a time (with a ragged last chunk reusing the scratch buffer)
    must give the draws and the stretch of all at once, to the solver's float32 rounding."""
    coded, start = simulated_study()
    whole, stretch = newton.newton_draws(coded, start, 30, np.random.default_rng(5))
    calls = []
    monkeypatch.setattr(newton, "pcg", lambda matvec, rhs, diag: calls.append(rhs.shape[1]) or pcg(matvec, rhs, diag))
    monkeypatch.setattr(newton, "CHUNK_SMALL", 0.0)  # a small study is solved at once unless told otherwise
    monkeypatch.setattr(newton, "CHUNK_BYTES", 1.0)  # one resample per chunk
    single, stretch1 = newton.newton_draws(coded, start, 30, np.random.default_rng(5))
    monkeypatch.setattr(newton, "CHUNK_BYTES", 4 * 7 * (coded.design.size + 10 * coded.n_items) + 1)  # 7, 7, 7, 7, 2
    sevens, stretch7 = newton.newton_draws(coded, start, 30, np.random.default_rng(5))
    assert calls == [1, 1] * 4 + [1] * 26 + [7, 4, 7, 7, 7, 2], calls  # the chunks as meant (a second-step solve after each of the first 4)
    np.testing.assert_array_equal(np.isnan(whole), np.isnan(single))
    spread = np.nanstd(whole)
    np.testing.assert_allclose(single, whole, atol=2e-3 * spread)
    np.testing.assert_allclose(sevens, whole, atol=2e-3 * spread)
    assert stretch1 == pytest.approx(stretch, rel=1e-3) and stretch7 == pytest.approx(stretch, rel=1e-3)
    assert 0.0 < stretch < 0.2


def test_hessian_products_are_the_derivative_of_the_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    """H_w x from the tuple-major float32 blocks (taken a few tuples at a time) must be the directional
    derivative of the weighted gradient `tuple_nll`: a slot transposed in a block, a block boundary
    dropped or the scatter built in the wrong cell order would all break it."""
    monkeypatch.setattr(maxdiff, "BLOCK", 7)
    coded, start = simulated_study(40, seed=8)
    counts = maxdiff.tuple_counts(coded.design, coded.best, coded.worst, coded.tuple_index, 40)
    pieces = newton.Resamples(start, counts, 40)
    rng = np.random.default_rng(0)
    w = rng.integers(0, 3, size=(pieces.n_tuples, 2)).astype(np.float32)
    x = rng.normal(size=(40, 2)).astype(np.float32)
    got = pieces.hessian_times(x, w)
    for j in range(2):
        weighted = counts.weighted(w[:, j].astype(np.float64))
        eps = 1e-5
        up = maxdiff.tuple_nll(start + eps * x[:, j], weighted)[1]
        down = maxdiff.tuple_nll(start - eps * x[:, j], weighted)[1]
        np.testing.assert_allclose(got[:, j], (up - down) / (2 * eps), rtol=2e-3, atol=2e-3)
    g = np.bincount(pieces.slots.ravel(), weights=pieces.g.ravel().astype(np.float64), minlength=40)
    np.testing.assert_allclose(g + maxdiff.RIDGE * start, maxdiff.tuple_nll(start, counts)[1], atol=1e-4)


def test_pcg_freezes_each_column_once_it_has_converged() -> None:
    """A column whose residual is below tolerance stops taking part in the products (the others iterate on
    alone), and every column still solves its own system: a frozen column moved by the others' steps, or
    the columns' coefficients mixed up after a column is dropped, gives a wrong solution."""
    rng = np.random.default_rng(2)
    n = 60
    a = rng.normal(size=(n, n))
    h = a @ a.T / n + np.diag(np.linspace(0.05, 40.0, n))  # ill-conditioned: many steps
    h -= h.mean(axis=1, keepdims=True) + h.mean(axis=0, keepdims=True) - h.mean()  # 1 in the null space ...
    h += 0.01 * np.eye(n)  # ... up to the ridge, as the bootstrap's Hessians
    rhs = rng.normal(size=(n, 4))
    rhs[:, 1] = np.linalg.eigh(h)[1][:, -1]  # an eigenvector: converges in a step or two, long before the others
    rhs[:, 2] = 0.0  # converged at once
    diag = np.repeat(np.diag(h)[:, None], 4, axis=1)
    widths = []

    def matvec(d: np.ndarray, cols: np.ndarray) -> np.ndarray:
        widths.append(cols.tolist())
        assert d.shape[1] == cols.size
        return h @ d

    x = pcg(matvec, rhs, diag, rtol=1e-8, maxiter=500)
    assert widths[0] == [0, 1, 2, 3] and 2 not in widths[1]  # the zero column frozen after the first product
    assert len({len(w) for w in widths}) >= 3, widths  # the columns froze at different steps
    projected = rhs - rhs.mean(axis=0)
    for j in range(4):
        want = np.linalg.solve(h, projected[:, j])
        got = x[:, j]
        np.testing.assert_allclose(got - got.mean(), want - want.mean(), atol=1e-6 * max(1.0, np.abs(want).max()))
    assert np.all(x[:, 2] == 0.0)


def test_second_steps_weighted_a_slice_of_tuples_at_a_time_give_the_same_stretch(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1e6 items the second steps' gradients are summed over slices of tuples (`WEIGHT_SLICE`), each
    slice's counts weighted alone: the ridge counted once per slice, a slice's linear part lost, or a
    ragged last slice dropped moves the measured stretch (and so every draw), which must stay the
    whole-array one to float rounding."""
    coded, start = simulated_study()
    whole, stretch = newton.newton_draws(coded, start, 12, np.random.default_rng(8))
    monkeypatch.setattr(newton, "WEIGHT_SLICE", 7)  # many slices, the last one ragged
    sliced, stretch_sliced = newton.newton_draws(coded, start, 12, np.random.default_rng(8))
    assert coded.design.shape[0] % 7 != 0 and coded.design.shape[0] > 7 * 5
    assert 0.0 < stretch < 0.2
    assert stretch_sliced == pytest.approx(stretch, rel=1e-5)
    np.testing.assert_allclose(sliced, whole, rtol=1e-5, atol=1e-6)
