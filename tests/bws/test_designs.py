"""Best-worst designs (fsb.bws.designs): the guarantees (appearances, no two tuples sharing 3 items),
reproducibility, the fallback when pairs must repeat, refusals, and the design report."""

from __future__ import annotations

import re
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


_MET = re.compile(r"--k (\d+) is met here; the counting bound is --k (\d+), which the search may not reach\)$")


@pytest.mark.parametrize(("n", "size", "k"), [(20, 4, 100), (20, 4, 58), (14, 4, 40), (15, 5, 30), (12, 3, 200)])
def test_every_suggested_k_is_accepted_and_met(n: int, size: int, k: int) -> None:
    """Issue 34, fault 3: `fsb tuples 20 --k 100` suggested "at most 57", a counting bound the search does not
    meet (it failed after 26 s). The --k suggested now is one the search met with the same seed, the bound is
    named as a bound, and the suggestion, tried, gives a design."""
    with pytest.raises(ValueError) as e:
        bws.bws_design(n, tuple_size=size, appearances=k, seed=3)
    met = _MET.search(str(e.value))
    assert met is not None, str(e.value)
    suggested, bound = int(met.group(1)), int(met.group(2))
    assert suggested <= bound == bws.appearance_bound(n, size) < k
    design = bws.bws_design(n, tuple_size=size, appearances=suggested, seed=3)
    assert bws.design_report(design, n)["appearances_min"] == suggested and bws.design_report(design, n)["max_shared_items"] <= 2


@pytest.mark.parametrize("k", [8, 7, 6, 2, 1])
def test_a_size_no_k_can_meet_is_refused_by_the_rules_before_any_search(k: int) -> None:
    """`fsb tuples 40 --size 16` suggested "--k at most 7"; 7 fills no whole tuples and 6 searched 55 s and
    failed. No --k can work: 15 tuples of 16 over 40 items share 3 items somewhere (two tuples meet in at most
    2 items, so 40 C(r, 2) <= 2 C(b, 2) leaves r <= 1, and 40 places fill no 16-tuples). Refused by the rules
    (ValueError; a failed search raises RuntimeError), saying that no --k works and what would."""
    assert bws.appearance_bound(40, 16) == 1
    refusal = r"; no --k gives a design of 40 items in 16-tuples \(each item can be in at most 1, a counting bound\): "
    with pytest.raises(ValueError, match=refusal + "use more items or a smaller --size$"):
        bws.bws_design(40, tuple_size=16, appearances=k)


def test_the_appearance_bound_holds_for_designs_that_exist() -> None:
    """The bound is a bound: a Fano plane (7 items, 3-tuples, 3 each) and 2N designs the search meets sit within it;
    tuples of 2 repeat no 3-subset and are bounded by MAX_TUPLES alone."""
    assert bws.appearance_bound(7, 3) == 15 >= 3 and bws.appearance_bound(40, 4) >= 8 and bws.appearance_bound(20, 4) == 57
    assert bws.appearance_bound(10, 2) == bws.MAX_TUPLES * 2 // 10
