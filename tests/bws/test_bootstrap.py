"""The bootstrap's pieces that issue 23 rebuilt for 1e6 items: the streamed tail quantiles, the chunked
Newton resamples and the tuple-major Hessian products (their meaning is checked against simulated truth
in tests/bws/test_maxdiff.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fsb import bws
from fsb.bws import bootstrap, maxdiff
from fsb.bws.scoring import Coded
from tests._support import simulate_bws

pcg = bootstrap.pcg


def _study(n: int = 90, seed: int = 3) -> tuple[Coded, np.ndarray]:
    truth = np.random.default_rng(seed).normal(size=n)
    design = bws.bws_design(n, seed=seed)
    ti, best, worst = simulate_bws(design, truth, 3, seed=seed + 1)
    coded = Coded(np.arange(n), design[ti], design, ti, best, worst)
    return coded, maxdiff.fit_maxdiff(design, best, worst, ti, n).utility


@pytest.mark.parametrize(("rows", "chunk"), [(200, 7), (200, 200), (40, 1), (3, 2)])
def test_tails_give_the_quantiles_of_all_the_draws(rows: int, chunk: int) -> None:
    """Keeping only each column's m lowest and highest draws (m = floor(a (R - 1)) + 2) must give numpy's
    quantiles of all of them, NaNs included, whatever the chunks: an m one too small, or the highs read
    from the wrong end, shifts the interval by one draw in the columns with the most valid draws."""
    rng = np.random.default_rng(rows + chunk)
    draws = rng.normal(size=(rows, 500)).astype(np.float32)
    draws[rng.random(draws.shape) < 0.3] = np.nan
    draws[:, 0] = np.nan  # no draw
    draws[1:, 1] = np.nan  # one draw
    draws[:, 2] = 0.5  # ties
    alpha = 0.025
    tails = bootstrap.Tails(500, rows, alpha)
    for s in range(0, rows, chunk):
        tails.add(draws[s : s + chunk])
    want, empty = bootstrap.quantiles(draws, [alpha, 1 - alpha])
    got = np.stack([tails.quantile(alpha), tails.quantile(1 - alpha)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(tails.valid == 0, empty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(got, np.nanquantile(draws.astype(np.float64), [alpha, 1 - alpha], axis=0), rtol=1e-6, atol=1e-7)


def test_newton_draws_do_not_depend_on_how_many_resamples_are_solved_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resamples are drawn one after the other from the seeded generator and solved in chunks sized by
    memory (`CHUNK_BYTES`): one resample at a time (with a ragged last chunk reusing the scratch buffer)
    must give the draws and the stretch of all at once, to the solver's float32 rounding."""
    coded, start = _study()
    whole, stretch = bootstrap.newton_draws(coded, start, 30, np.random.default_rng(5))
    calls = []
    monkeypatch.setattr(bootstrap, "pcg", lambda matvec, rhs, diag: calls.append(rhs.shape[1]) or pcg(matvec, rhs, diag))
    monkeypatch.setattr(bootstrap, "CHUNK_SMALL", 0.0)  # a small study is solved at once unless told otherwise
    monkeypatch.setattr(bootstrap, "CHUNK_BYTES", 1.0)  # one resample per chunk
    single, stretch1 = bootstrap.newton_draws(coded, start, 30, np.random.default_rng(5))
    monkeypatch.setattr(bootstrap, "CHUNK_BYTES", 4 * 7 * (coded.design.size + 10 * coded.n_items) + 1)  # 7, 7, 7, 7, 2
    sevens, stretch7 = bootstrap.newton_draws(coded, start, 30, np.random.default_rng(5))
    assert calls == [1, 1] * 4 + [1] * 26 + [7, 4, 7, 7, 7, 2], calls  # the chunks as meant (a second-step solve after each of the first 4)
    np.testing.assert_array_equal(np.isnan(whole), np.isnan(single))
    spread = np.nanstd(whole)
    np.testing.assert_allclose(single, whole, atol=2e-3 * spread)
    np.testing.assert_allclose(sevens, whole, atol=2e-3 * spread)
    assert stretch1 == pytest.approx(stretch, rel=1e-3) and stretch7 == pytest.approx(stretch, rel=1e-3)
    assert 0.0 < stretch < 0.2


def test_intervals_from_the_tails_equal_those_from_all_the_draws() -> None:
    """`bootstrap_intervals` keeps only the tails of the Newton draws and scales them by the stretch at the
    end; that must be the basic interval of the whole draws (as `newton_draws` returns them)."""
    coded, start = _study()
    low, high = bootstrap.bootstrap_intervals(coded, method="maxdiff", n_boot=120, seed=4, start=start)
    draws, _ = bootstrap.newton_draws(coded, start, 120, np.random.default_rng(4))
    (q_low, q_high), _ = bootstrap.quantiles(draws, [0.025, 0.975])
    frame = float(start.mean())
    np.testing.assert_allclose(low, 2 * start - (q_high + frame), atol=1e-5)
    np.testing.assert_allclose(high, 2 * start - (q_low + frame), atol=1e-5)
    assert np.all(low < start) and np.all(start < high)


def test_hessian_products_are_the_derivative_of_the_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    """H_w x from the tuple-major float32 blocks (taken a few tuples at a time) must be the directional
    derivative of the weighted gradient `tuple_nll`: a slot transposed in a block, a block boundary
    dropped or the scatter built in the wrong cell order would all break it."""
    monkeypatch.setattr(maxdiff, "BLOCK", 7)
    coded, start = _study(40, seed=8)
    counts = maxdiff.tuple_counts(coded.design, coded.best, coded.worst, coded.tuple_index, 40)
    pieces = bootstrap.Resamples(start, counts, 40)
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
