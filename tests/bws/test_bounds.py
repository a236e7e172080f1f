"""fsb.bws.bounds: which items' scores are bounds (always best, always worst, outside the largest connected
part, never judged), the `bound` column, its counts and its sentence; the same masks as the adaptive
planner's own rule on random designs."""

from __future__ import annotations

import numpy as np
import pytest

from fsb.bws.bounds import bound_column, bound_counts, bound_sentence, components, score_bounds

# items 0..3 share tuples; 4 is always best, 3 always worst; 5, 6, 7, 8 form a part of their own; 9 is never shown
DESIGN = np.array([[0, 1, 2, 3], [0, 1, 2, 4], [1, 2, 3, 4], [5, 6, 7, 8], [0, 1, 2, 3]])
TUPLE_INDEX = np.array([0, 0, 1, 2, 3])
BEST = np.array([0, 1, 4, 4, 5])
WORST = np.array([3, 3, 0, 3, 8])


def test_each_reason_is_found_by_hand() -> None:
    masks = score_bounds(DESIGN, BEST, WORST, TUPLE_INDEX, 10)
    assert np.flatnonzero(masks["always_best"]).tolist() == [4, 5]
    assert np.flatnonzero(masks["always_worst"]).tolist() == [3, 8]
    assert np.flatnonzero(masks["outside_main"]).tolist() == [5, 6, 7, 8]  # tuple 4 ([0,1,2,3] again) is never judged: no link
    assert np.flatnonzero(masks["never"]).tolist() == [9]
    column = bound_column(masks)
    assert column.tolist() == [
        "",
        "",
        "",
        "worst-always",
        "best-always",
        "best-always+disconnected",
        "disconnected",
        "disconnected",
        "worst-always+disconnected",
        "unjudged",
    ]
    assert bound_counts(column) == {"total": 7, "best-always": 2, "worst-always": 2, "disconnected": 4, "unjudged": 1}


def test_rows_as_judgments_give_the_same_masks_as_tuples_with_an_index() -> None:
    by_tuple = score_bounds(DESIGN, BEST, WORST, TUPLE_INDEX, 10)
    by_row = score_bounds(DESIGN[TUPLE_INDEX], BEST, WORST, None, 10)
    assert all((by_tuple[k] == by_row[k]).all() for k in by_tuple)


def test_no_bound_gives_an_empty_column_and_no_sentence() -> None:
    design = np.array([[0, 1, 2, 3]] * 2)
    masks = score_bounds(design, np.array([0, 1]), np.array([1, 0]), None, 4)
    column = bound_column(masks)
    assert column.tolist() == [""] * 4 and bound_counts(column) == {"total": 0} and bound_sentence(bound_counts(column)) == ""


def test_the_sentence_counts_and_names_each_reason() -> None:
    assert (
        bound_sentence({"total": 1, "best-always": 1}, explain=False)
        == "1 item is a bound, not an estimate: 1 best-always (their bound column)"
    )
    text = bound_sentence({"total": 3, "worst-always": 2, "disconnected": 1}, "sentences")
    assert text.startswith("3 sentences are bounds, not estimates: 2 worst-always, 1 disconnected (the `bound` column")


@pytest.mark.parametrize("seed", range(40))
def test_components_and_masks_equal_scipy_and_the_planners_rule(seed: int) -> None:
    """Against scipy's connected components on the item-tuple graph (the rule of fsb.bws.adaptive.score_bounds,
    which this module's name and keys mirror), on small random designs with repeated and unjudged tuples."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from fsb.bws.adaptive import score_bounds as planner_bounds

    rng = np.random.default_rng(seed)
    n, t = int(rng.integers(5, 60)), int(rng.integers(1, 30))
    design = np.array([rng.choice(n, 4, replace=False) for _ in range(t)])
    ti = rng.integers(0, t, int(rng.integers(1, 50)))
    best, worst = design[ti, 0], design[ti, rng.integers(1, 4, ti.size)]
    rows = np.repeat(np.arange(t), 4)
    graph = coo_matrix((np.ones(rows.size), (design.ravel(), n + rows)), shape=(n + t, n + t))
    want = connected_components(graph, directed=False)[1][:n]
    got = components(design, n)
    assert all((want == want[i]).tolist() == (got == got[i]).tolist() for i in range(n))  # the same partition
    assert (got == np.array([np.flatnonzero(got == got[i]).min() for i in range(n)])).all()  # labelled by the smallest item
    mine, theirs = score_bounds(design, best, worst, ti, n), planner_bounds(design, best, worst, ti, n)
    assert mine.keys() == theirs.keys() and all((mine[k] == theirs[k]).all() for k in mine)


def test_a_long_chain_is_one_component() -> None:
    """Items chained tuple to tuple, numbered against the hooking order: still one part."""
    n = 3001
    chain = np.stack([np.arange(0, n - 3, 3) + j for j in range(4)], axis=1)[::-1]
    assert (components(chain, n) == 0).all()
