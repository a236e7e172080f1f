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
    assert text.startswith("3 sentences are not estimates: 2 worst-always, 1 disconnected (the `bound` column")
    # review M4: disconnected is named as a scale of its own, not a bound; overlapping reasons are said to overlap
    assert "on a scale of its own, not comparable with the rest" in text and "reasons overlap" not in text
    both = bound_sentence({"total": 2, "best-always": 1, "worst-always": 1, "disconnected": 2}, explain=False)
    assert both == "2 items are not estimates: 1 best-always, 1 worst-always, 2 disconnected; reasons overlap (their bound column)"


def _reference_bounds(design, best, worst, ti, n) -> dict[str, np.ndarray]:
    """The rule written plainly with scipy: weak parts on the item-tuple graph of judged tuples (a unique largest
    one, else none); groups = strong components of the beats graph (best -> x, x -> worst); in a part with a
    unique largest group, a group with a path to it and none back is best-always, the reverse worst-always,
    neither way disconnected (and by arcs as follows); in a part without, a group no arc enters (leaves) is best- (worst-) always."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    rows = design[ti]
    shown = np.bincount(rows.ravel(), minlength=n) > 0
    judged = design[np.unique(ti)]
    links = np.repeat(np.arange(judged.shape[0]), judged.shape[1])
    size = n + links.size
    weak = connected_components(coo_matrix((np.ones(links.size), (judged.ravel(), n + links)), shape=(size, size)), directed=False)[1][:n]
    sizes = {p: int((weak[shown] == p).sum()) for p in set(weak[shown].tolist())}
    top = [p for p, c in sizes.items() if c == max(sizes.values())]
    main = shown & (weak == top[0]) if len(top) == 1 else np.zeros(n, dtype=bool)
    arcs = [(b, x) for j, b in enumerate(best) for x in rows[j]] + [(x, w) for j, w in enumerate(worst) for x in rows[j]]
    src, dst = np.array(arcs).T
    graph = coo_matrix((np.ones(src.size), (src, dst)), shape=(n, n)).tocsr()
    group = connected_components(graph, directed=True, connection="strong")[1]
    reach = {i: set(breadth_first_order(graph, i, directed=True, return_predecessors=False).tolist()) for i in range(n)}
    out = {k: np.zeros(n, dtype=bool) for k in ("always_best", "always_worst", "apart")}
    for p in sizes:
        items = [i for i in range(n) if shown[i] and weak[i] == p]
        gsize = {g: sum(group[i] == g for i in items) for g in {group[i] for i in items}}
        largest = [g for g, c in gsize.items() if c == max(gsize.values())]
        for i in items:
            if len(largest) == 1:
                r = next(j for j in items if group[j] == largest[0])
                up, down = r in reach[i], i in reach[r]
                out["always_best"][i], out["always_worst"][i], out["apart"][i] = up and not down, down and not up, not up and not down
            if len(largest) != 1 or out["apart"][i]:
                others = [j for j in items if group[j] != group[i]]
                out["always_best"][i] |= not any(i in reach[j] for j in others)
                out["always_worst"][i] |= not any(j in reach[i] for j in others)
    return {
        "never": ~shown,
        "always_best": out["always_best"],
        "always_worst": out["always_worst"],
        "outside_main": shown & (~main | out["apart"]),
    }


@pytest.mark.parametrize("seed", range(60))
def test_components_and_masks_equal_scipy_and_the_plain_rule(seed: int) -> None:
    """Against scipy's connected components on the item-tuple graph and its strong components on the beats graph
    (`_reference_bounds`), on small random designs with repeated, unjudged and separated tuples. Before review
    finding M2 the masks were 'best (worst) in every judgment' and missed groups that never lose."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(seed)
    n, t = int(rng.integers(5, 60)), int(rng.integers(1, 30))
    design = np.array([rng.choice(n, 4, replace=False) for _ in range(t)])
    ti = rng.integers(0, t, int(rng.integers(1, 50)))
    order = np.argsort(design[ti], axis=1) if seed % 2 else rng.permuted(np.tile(np.arange(4), (ti.size, 1)), axis=1)
    ranked = np.take_along_axis(design[ti], order, axis=1)  # even seeds: random choices; odd: by item code (few cycles)
    best, worst = ranked[:, 0], ranked[np.arange(ti.size), rng.integers(1, 4, ti.size)]
    rows = np.repeat(np.arange(t), 4)
    graph = coo_matrix((np.ones(rows.size), (design.ravel(), n + rows)), shape=(n + t, n + t))
    want = connected_components(graph, directed=False)[1][:n]
    got = components(design, n)
    assert all((want == want[i]).tolist() == (got == got[i]).tolist() for i in range(n))  # the same partition
    assert (got == np.array([np.flatnonzero(got == got[i]).min() for i in range(n)])).all()  # labelled by the smallest item
    mine, theirs = score_bounds(design, best, worst, ti, n), _reference_bounds(design, best, worst, ti, n)
    assert mine.keys() == theirs.keys() and all((mine[k] == theirs[k]).all() for k in mine), (mine, theirs)


# a and b each best in 2 of 3 judgments, never chosen worst, and never losing to an item outside {a, b}
SEPARATED = np.array([[0, 1, 2, 3], [0, 1, 4, 5], [0, 1, 2, 4], [2, 3, 4, 5], [2, 3, 4, 5], [2, 3, 4, 5], [1, 2, 3, 5]])
SEP_BEST, SEP_WORST = np.array([0, 1, 0, 2, 3, 4, 1]), np.array([3, 5, 4, 5, 4, 2, 2])


def test_a_group_that_never_loses_is_a_bound_though_each_item_lost_once() -> None:
    """Review finding M2: neither a nor b is best in every judgment (each loses once, to the other), so the old rule
    called both estimates; yet their MaxDiff utilities grow as the ridge shrinks. Now both are best-always (a group
    above c..f, the largest group, which is the scale: estimates); the fit shows why."""
    from fsb.bws import maxdiff

    ti = np.arange(7)
    masks = score_bounds(SEPARATED, SEP_BEST, SEP_WORST, ti, 6)
    assert np.flatnonzero(masks["always_best"]).tolist() == [0, 1]
    assert not masks["always_worst"].any() and not masks["outside_main"].any()
    u = [maxdiff.fit_maxdiff(SEPARATED, SEP_BEST, SEP_WORST, ti, 6, ridge=r, tol=1e-8).utility[0] for r in (1e-2, 1e-3, 1e-4)]
    assert u[0] + 1 < u[1] < u[2] - 1  # no finite maximum: the ridge, not the data, sets it


def test_an_item_best_in_every_judgment_is_best_always_however_often_a_row_repeats_it() -> None:
    """Review finding M6 (`--invalid count` keeps a row showing an item twice): item 0 best in both judgments, one
    showing it twice, counted 3 appearances and 2 bests, so 'best == shown' missed it. Judgments decide now."""
    design = np.array([[0, 0, 1, 2], [0, 3, 4, 5]])
    masks = score_bounds(design, np.array([0, 0]), np.array([2, 5]), None, 6)
    assert np.flatnonzero(masks["always_best"]).tolist() == [0]
    assert np.flatnonzero(masks["always_worst"]).tolist() == [2, 5]


def test_a_long_chain_is_one_component() -> None:
    """Items chained tuple to tuple, numbered against the hooking order: still one part."""
    n = 3001
    chain = np.stack([np.arange(0, n - 3, 3) + j for j in range(4)], axis=1)[::-1]
    assert (components(chain, n) == 0).all()


@pytest.mark.parametrize(("rest", "sweeps"), [(0, 64), (512, 1)])
def test_the_scipy_fallback_gives_the_same_masks(monkeypatch: pytest.MonkeyPatch, rest: int, sweeps: int) -> None:
    """Many items outside the pivot's group, or sweeps that do not settle, go to scipy's strong components:
    the same masks as the plain rule (forced here by shrinking both limits)."""
    from fsb.bws import bounds

    monkeypatch.setattr(bounds, "SMALL_REST", rest)
    monkeypatch.setattr(bounds, "PEEL_ITERATIONS", sweeps)
    rng = np.random.default_rng(7)
    for _ in range(10):
        design = np.array([rng.choice(30, 4, replace=False) for _ in range(20)])
        ti = rng.integers(0, 20, 40)
        ranked = np.sort(design[ti], axis=1)
        best, worst = ranked[:, 0], ranked[np.arange(ti.size), rng.integers(1, 4, ti.size)]
        mine, theirs = bounds.score_bounds(design, best, worst, ti, 30), _reference_bounds(design, best, worst, ti, 30)
        assert all((mine[k] == theirs[k]).all() for k in mine)


def test_parts_tied_for_largest_are_all_disconnected_whatever_their_codes() -> None:
    """Review finding M3: two parts of 4 items each; which half was `disconnected` depended on which held the
    lowest item code (an id's spelling). With no unique largest part, none shares a scale: all are outside."""
    design = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3], [4, 5, 6, 7]])
    best, worst = np.array([0, 4, 3, 7]), np.array([3, 7, 0, 4])  # each part one group (0 over 3, 3 over 0)
    for perm in (np.arange(8), np.array([7, 6, 5, 4, 3, 2, 1, 0])):  # the codes renamed: the same answer
        masks = score_bounds(perm[design], perm[best], perm[worst], None, 8)
        assert masks["outside_main"].all() and not masks["always_best"].any() and not masks["always_worst"].any()
    bigger = np.vstack([design, [[8, 0, 1, 2]]])  # one part now larger: it is the scale
    masks = score_bounds(bigger, np.append(best, 8), np.append(worst, 0), None, 9)
    assert np.flatnonzero(masks["outside_main"]).tolist() == [4, 5, 6, 7]


@pytest.mark.parametrize("n", [0, 3])
def test_no_judgments_give_no_side_bounds(n: int) -> None:
    """No judgment at all (an API call; the builds refuse it): every item unjudged, none above, below or apart,
    and no error (the group search had no pivot to start from)."""
    empty = np.zeros((0, 4), dtype=int)
    masks = score_bounds(empty, np.zeros(0, dtype=int), np.zeros(0, dtype=int), None, n)
    assert masks["never"].all() and masks["never"].size == n
    assert not (masks["always_best"].any() or masks["always_worst"].any() or masks["outside_main"].any())
