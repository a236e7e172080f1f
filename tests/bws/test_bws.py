"""Unit tests of the best-worst scaling functions (fsb.bws) on hand-made and simulated arrays."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
import scipy.stats

from fsb import bws
from fsb.bws import reliability


def test_counting_by_hand() -> None:
    # Two tuples over items 0..4; tuple 0 judged twice, tuple 1 once.
    design = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    tuple_index = np.array([0, 0, 1])
    best = np.array([0, 1, 4])
    worst = np.array([3, 3, 1])
    c = bws.count_best_worst(design, best, worst, n_items=5, tuple_index=tuple_index)
    assert c.appearances.tolist() == [2, 3, 3, 3, 1]
    assert c.best.tolist() == [1, 1, 0, 0, 1]
    assert c.worst.tolist() == [0, 1, 0, 2, 0]
    np.testing.assert_allclose(c.score_raw, [0.5, 0.0, 0.0, -2 / 3, 1.0])
    np.testing.assert_allclose(c.score, (c.score_raw + 1) / 2)


def test_counting_without_tuple_index_and_unseen_items() -> None:
    rows = np.array([[0, 1, 2], [0, 1, 2]])
    c = bws.count_best_worst(rows, np.array([0, 0]), np.array([2, 1]), n_items=4)
    assert c.appearances.tolist() == [2, 2, 2, 0]
    assert np.isnan(c.score_raw[3]), "an item never shown has no score, not a made-up 0"
    assert c.score_raw[0] == 1.0


def test_counting_rejects_codes_beyond_n_items() -> None:
    with pytest.raises(ValueError, match="n_items"):
        bws.count_best_worst(np.array([[0, 1]]), np.array([5]), np.array([1]), n_items=2)


def test_encode_labels_is_consistent_and_order_free() -> None:
    (a, b), labels = bws.encode_labels(np.array([["x", "y"], ["z", "x"]]), np.array(["y", "z"]))
    assert labels.tolist() == ["x", "y", "z"]
    assert labels[a].tolist() == [["x", "y"], ["z", "x"]]
    assert labels[b].tolist() == ["y", "z"]


def test_rank_average_matches_scipy() -> None:
    x = np.random.default_rng(3).integers(0, 20, size=500).astype(float)
    np.testing.assert_allclose(reliability._rank_average(x), scipy.stats.rankdata(x))


@pytest.mark.parametrize("max_size", [3, 12])
def test_ranks_within_groups_are_permutations(max_size: int) -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, max_size + 1, size=200)
    group = np.repeat(np.arange(sizes.size), sizes)
    rank = reliability._ranks_within_groups(group, rng.random(group.size), int(sizes.max()))
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
    first = reliability._first_half(g, sizes, 4, np.random.default_rng(0))
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


def _max_shared_brute_force(design: np.ndarray) -> int:
    sets = [set(row.tolist()) for row in design]
    return max(len(a & b) for a, b in combinations(sets, 2))


@pytest.mark.parametrize(("n", "seed"), [(40, 0), (100, 1), (1000, 2)])
def test_design_guarantees(n: int, seed: int) -> None:
    design = bws.bws_design(n, seed=seed)
    assert design.shape == (2 * n, 4)
    assert np.bincount(design.ravel(), minlength=n).tolist() == [8] * n
    assert all(len(set(row.tolist())) == 4 for row in design)
    if n <= 100:
        assert _max_shared_brute_force(design) <= 2
    report = bws.design_report(design, n)
    assert report["max_shared_items"] <= 2
    assert report["appearances_min"] == report["appearances_max"] == 8
    assert np.array_equal(design, bws.bws_design(n, seed=seed)), "same seed, same design"
    assert not np.array_equal(design, bws.bws_design(n, seed=seed + 1))


def test_design_with_unique_pairs_when_feasible_and_fallback_when_not() -> None:
    assert bws.design_report(bws.bws_design(1000, seed=0))["repeated_pairs"] == 0
    # 12 items: each needs 24 partner slots but has only 11 partners, so pairs must repeat; the
    # hard guarantee (no two tuples share 3) still holds.
    small = bws.bws_design(12, seed=0)
    report = bws.design_report(small, 12)
    assert report["repeated_pairs"] > 0
    assert _max_shared_brute_force(small) <= 2


def test_design_refuses_impossible_requests() -> None:
    with pytest.raises(ValueError, match="multiple"):
        bws.bws_design(10, tuple_size=4, appearances=1)
    with pytest.raises(ValueError, match="more than 4 items"):
        bws.bws_design(4)
    # 12 tuples need 48 3-subsets, 6 items have 20: refused before any search
    with pytest.raises(ValueError, match=r"12 tuples of 4 items hold 48 3-item subsets, but 6 items have only 20.*use more items"):
        bws.bws_design(6, max_rounds=50)
    with pytest.raises(RuntimeError, match="within 1425 swaps; use more items"):
        bws.bws_design(20, appearances=57, max_rounds=5)


def test_design_report_sees_a_triple_shared_by_two_tuples() -> None:
    design = np.array([[0, 1, 2, 3], [0, 1, 2, 4], [5, 6, 7, 8]])
    report = bws.design_report(design)
    assert report["max_shared_items"] == 3
    assert report["repeated_pairs"] == 3
