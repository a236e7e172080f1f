"""fsb.bws.bootstrap: the intervals from the streamed tails of the Newton draws are those of all the draws
(the pieces are tested in tests/bws/test_newton.py and test_tails.py; the intervals' meaning against
simulated truth in tests/bws/test_maxdiff.py)."""

from __future__ import annotations

import numpy as np

from fsb.bws import bootstrap, newton, tails
from tests._support import simulated_study


def test_intervals_from_the_tails_equal_those_from_all_the_draws() -> None:
    """`bootstrap_intervals` keeps only the tails of the Newton draws and scales them by the stretch at the
    end; that must be the basic interval of the whole draws (as `newton_draws` returns them)."""
    coded, start = simulated_study()
    low, high = bootstrap.bootstrap_intervals(coded, method="maxdiff", n_boot=120, seed=4, start=start)
    draws, _ = newton.newton_draws(coded, start, 120, np.random.default_rng(4))
    (q_low, q_high), _ = tails.quantiles(draws, [0.025, 0.975])
    frame = float(start.mean())
    np.testing.assert_allclose(low, 2 * start - (q_high + frame), atol=1e-5)
    np.testing.assert_allclose(high, 2 * start - (q_low + frame), atol=1e-5)
    assert np.all(low < start) and np.all(start < high)
