"""Best-worst designs (fsb.bws.designs): the guarantees (appearances, no two tuples sharing 3 items),
reproducibility, the fallback when pairs must repeat, refusals, and the design report."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from fsb import bws


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
