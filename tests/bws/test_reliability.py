"""Split-half reliability (fsb.bws.reliability): its rank helpers against scipy, the halves' draw against
the reference rule, and the whole procedure on simulated judges against a plain reimplementation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from fsb import bws
from fsb.bws import reliability


def test_rank_average_matches_scipy() -> None:
    x = np.random.default_rng(3).integers(0, 20, size=500).astype(float)
    np.testing.assert_allclose(reliability.rank_average(x), scipy.stats.rankdata(x))


@pytest.mark.parametrize("max_size", [3, 12])
def test_ranks_within_groups_are_permutations(max_size: int) -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, max_size + 1, size=200)
    group = np.repeat(np.arange(sizes.size), sizes)
    rank = reliability.ranks_within_groups(group, rng.random(group.size), int(sizes.max()))
    for gi in range(sizes.size):
        assert sorted(rank[group == gi].tolist()) == list(range(sizes[gi]))


def _simulated(n_items: int, per_tuple: int, noise: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=n_items)
    design = bws.bws_design(n_items, seed=seed)
    ti = np.repeat(np.arange(design.shape[0]), per_tuple)
    shown = design[ti]
    utility = truth[shown] + rng.normal(0, noise, size=shown.shape)
    rows = np.arange(ti.size)
    return design, ti, shown[rows, utility.argmax(1)], shown[rows, utility.argmin(1)], truth


def test_split_half_is_one_for_noiseless_judges_and_reproducible() -> None:
    design, ti, best, worst, _ = _simulated(200, 2, noise=0.0)
    r = bws.split_half_reliability(design, best, worst, ti, trials=5, seed=1)
    np.testing.assert_allclose(r.pearson, 1.0)
    np.testing.assert_allclose(r.spearman, 1.0)
    design, ti, best, worst, _ = _simulated(200, 3, noise=1.0)
    a = bws.split_half_reliability(design, best, worst, ti, trials=20, seed=7)
    b = bws.split_half_reliability(design, best, worst, ti, trials=20, seed=7)
    c = bws.split_half_reliability(design, best, worst, ti, trials=20, seed=8)
    assert np.array_equal(a.pearson, b.pearson) and np.array_equal(a.spearman, b.spearman)
    assert not np.array_equal(a.pearson, c.pearson)
    assert 0.3 < a.summary()["pearson"]["mean"] < 0.99
    assert a.summary()["trials"] == 20 and a.summary()["seed"] == 7


def test_split_half_halves_follow_the_reference_rule() -> None:
    """The draw split_half_reliability uses: of 3 judgments, half 1 gets 1 or 2 (about equally often);
    of 2, exactly 1; of 1, 0 or 1; of 4, exactly 2. Never all of a tuple to one side when n >= 2."""
    sizes = np.array([3] * 400 + [2] * 100 + [1] * 100 + [4] * 100)
    g = np.repeat(np.arange(sizes.size), sizes)
    first = reliability.first_half(g, sizes, 4, np.random.default_rng(0))
    got = np.bincount(g[first], minlength=sizes.size)
    assert set(np.unique(got[:400]).tolist()) == {1, 2}
    assert 0.4 < np.mean(got[:400] == 2) < 0.6
    assert set(got[400:500].tolist()) == {1}
    assert set(got[500:600].tolist()) == {0, 1}
    assert set(got[600:].tolist()) == {2}


def _plain_split_half(design, ti, best, worst, n_items, trials, rng):
    """The reference procedure written out tuple by tuple with its own random draws (random.shuffle of
    each tuple's judgments, floor(n/2) to half 1 plus one more on a coin flip when n is odd)."""
    by_tuple: dict[int, list[int]] = {}
    for j, t in enumerate(ti.tolist()):
        by_tuple.setdefault(t, []).append(j)
    out = []
    for _ in range(trials):
        half_of = {}
        for js in by_tuple.values():
            js = js[:]
            rng.shuffle(js)
            take = len(js) // 2 + (len(js) % 2 == 1 and rng.random() < 0.5)
            half_of |= {j: 0 if pos < take else 1 for pos, j in enumerate(js)}
        scores = []
        for h in (0, 1):
            b, w, n = np.zeros(n_items), np.zeros(n_items), np.zeros(n_items)
            for j in range(ti.size):
                if half_of[j] == h:
                    n[design[ti[j]]] += 1
                    b[best[j]] += 1
                    w[worst[j]] += 1
            scores.append((b - w) / n)
        out.append(scipy.stats.pearsonr(*scores)[0])
    return np.array(out)


def test_split_half_has_the_distribution_of_a_plain_reimplementation() -> None:
    """Same procedure, independent random draws: the trial correlations must have the same mean and
    spread (within sampling error). A property of the split, not a replay of its random-call order."""
    import random

    design, ti, best, worst, _ = _simulated(60, 3, noise=0.8, seed=2)
    ours = bws.split_half_reliability(design, best, worst, ti, trials=300, seed=11).pearson
    plain = _plain_split_half(design, ti, best, worst, 60, 300, random.Random(5))
    se = np.sqrt(ours.var() / ours.size + plain.var() / plain.size)
    assert abs(ours.mean() - plain.mean()) < 4 * se, (ours.mean(), plain.mean(), se)
    assert 0.7 < ours.std() / plain.std() < 1.4
