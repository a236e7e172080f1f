"""fsb.bws.tails: the streamed tail quantiles give numpy's quantiles of all the draws."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fsb.bws.tails import Tails, quantiles


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
    tails = Tails(500, rows, alpha)
    for s in range(0, rows, chunk):
        tails.add(draws[s : s + chunk])
    want, empty = quantiles(draws, [alpha, 1 - alpha])
    got = np.stack([tails.quantile(alpha), tails.quantile(1 - alpha)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(tails.valid == 0, empty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(got, np.nanquantile(draws.astype(np.float64), [alpha, 1 - alpha], axis=0), rtol=1e-6, atol=1e-7)


def test_block_quantiles_equal_numpys_nanquantile() -> None:
    """The quantiles that replaced np.nanquantile (one Python call per item) give its values, NaNs included."""
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(57, 300)).astype(np.float32)
    draws[rng.random(draws.shape) < 0.2] = np.nan
    draws[:, 7] = np.nan
    draws[:-1, 8] = np.nan
    got, empty = quantiles(draws, [0.025, 0.5, 0.975], block=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.nanquantile(draws.astype(np.float64), [0.025, 0.5, 0.975], axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(empty, np.arange(300) == 7)
