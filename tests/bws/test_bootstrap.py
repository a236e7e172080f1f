"""fsb.bws.bootstrap: the intervals from the streamed tails of the Newton draws are those of all the draws
(the pieces are tested in tests/bws/test_newton.py and test_tails.py; the intervals' meaning against
simulated truth in tests/bws/test_maxdiff.py)."""

from __future__ import annotations

import numpy as np

from fsb.bws import bootstrap, newton, tails
from fsb.bws.coded import Coded
from fsb.bws.counting import count_best_worst
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


def test_the_minimum_resamples_is_where_the_widest_interval_of_r_draws_reaches_the_level() -> None:
    """(R - 1) / (R + 1), the chance that the lowest and highest of R draws enclose another, reaches 95% at 39."""
    assert bootstrap.MIN_RESAMPLES == bootstrap.minimum_resamples(0.95) == 39
    for level in (0.8, 0.9, 0.95, 0.99):
        r = bootstrap.minimum_resamples(level)
        assert (r - 1) / (r + 1) >= level - 1e-12 > (r - 2) / r


def _same_score_in_every_tuple() -> Coded:
    """Items 0 and 1 each in two 3-item tuples, with (B - W) / n = 1/3 in both: every resample scores them 2/3,
    which a float32 draw cannot hold exactly."""
    design = np.array([[0, 2, 3], [0, 4, 5], [1, 2, 4], [1, 3, 5]])
    ti = np.repeat(np.arange(4), 3)
    best = np.array([0, 2, 3, 0, 4, 5, 1, 2, 4, 1, 3, 5])
    worst = np.array([2, 3, 2, 4, 5, 4, 2, 4, 2, 3, 5, 3])
    return Coded(np.arange(6), design[ti], design, ti, best, worst)


def test_an_item_scored_the_same_in_every_resample_gets_an_interval_holding_its_score() -> None:
    """The draws are float32: the interval of an item whose every resample scores 2/3 was [f32(2/3), f32(2/3)],
    2e-8 above its score. An end that misses the score by rounding only is the score."""
    coded = _same_score_in_every_tuple()
    notes: list[str] = []
    low, high = bootstrap.bootstrap_intervals(coded, n_boot=60, seed=1, notes=notes)
    score = count_best_worst(coded.design, coded.best, coded.worst, 6, coded.tuple_index).score
    assert score[0] == score[1] == 2 / 3
    assert low[0] <= score[0] <= high[0] and low[1] <= score[1] <= high[1]
    assert not any("one side" in n for n in notes)


def test_an_interval_beside_its_score_carries_a_note_saying_why() -> None:
    """Two resamples (the API allows what `fsb score` refuses): the intervals that miss their score are counted
    and named in one note that gives the cause."""
    coded, start = simulated_study(n=40, seed=5)
    notes: list[str] = []
    low, high = bootstrap.bootstrap_intervals(coded, method="maxdiff", n_boot=2, seed=0, start=start, notes=notes)
    aside = int(((low > start) | (high < start)).sum())
    [note] = [n for n in notes if "lies wholly to one side" in n]
    assert aside > 0 and note.startswith(f"the interval of {aside} items (") and "fewer than the 39 a 95% interval needs" in note


def test_the_ridge_reaches_every_refit_of_the_bootstrap() -> None:
    """`--ridge` for MaxDiff: the bootstrap refits must use the point fit's prior. With ridge=1 (a N(0, 1) prior)
    the Newton intervals must agree with full L-BFGS refits under the same prior, and bracket the ridge-1 fit;
    before the fix the refits used the default ridge whatever the fit's was (no `ridge` argument at all)."""
    from fsb.bws import maxdiff

    coded, _ = simulated_study()
    d, ti = coded.design, coded.tuple_index
    start = maxdiff.fit_maxdiff(d, coded.best, coded.worst, ti, coded.n_items, ridge=1.0).utility
    newton_ci = bootstrap.bootstrap_intervals(coded, method="maxdiff", n_boot=80, seed=2, start=start, ridge=1.0)
    full_ci = bootstrap.bootstrap_intervals(coded, method="maxdiff", n_boot=80, seed=2, start=start, ridge=1.0, refit="full")
    default_ci = bootstrap.bootstrap_intervals(coded, method="maxdiff", n_boot=80, seed=2, start=start)
    width = lambda ci: float(np.nanmean(ci[1] - ci[0]))  # noqa: E731
    assert abs(width(newton_ci) - width(full_ci)) < 0.08 * width(full_ci)
    assert width(newton_ci) < 0.95 * width(default_ci)  # the prior shrinks the spread of the refits too
    assert np.mean((newton_ci[0] <= start) & (start <= newton_ci[1])) > 0.97
