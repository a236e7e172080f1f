"""Which items' scores are bounds rather than estimates, per item and by reason (`score_bounds`), as the
`bound` column that every score file and dataset build carries (`bound_column`), and the sentence that
counts them (`bound_sentence`).

Why a column and not only a note: an item chosen best in every judgment that showed it has counting score
1 (the top of the scale) and a MaxDiff likelihood that grows without bound as its utility goes to +inf,
so the fitted value is the ridge's, not the data's; its counting bootstrap interval has width 0. Both
are lower bounds on how extreme the item is, not estimates. An item outside the largest connected part
of the design (items linked when they share a judged tuple) was compared only with items of its own
part: the logit fixes utilities only up to a shift per part, so its MaxDiff score shares no scale with
the others, and its counting score ranks it only against its own few partners. Hollis (2018, Behav.
Res. Methods 50) and Marley and Louviere (2005) for the model; the rule is the likelihood's own: the
maximum-likelihood estimate of a connected part exists iff its "beats" graph (best beats the other k - 1
items of a judgment, those beat worst) is strongly connected (Ford 1957; Hunter 2004, Ann. Statist. 32,
condition A). Never chosen worst and never best is necessary, not sufficient: two items each best in most
judgments and never losing to an item outside the pair run to +inf together. So best-always means the
item's group (its strongly connected component of the beats graph) lies above its part's largest group:
it beats that group through a chain of wins and never loses to it (in a part with no unique largest
group: no other group ever beats it); worst-always the same below. For a group of one: e.g. chosen best
(worst) in every judgment that showed it. A part that is one group has neither (`_beyond`).

Only numpy on the usual path: the parts are found by `components`, the groups by forward-backward
reachability (no scipy import on the counting path, which needs none otherwise; scipy's strong components
only for what that leaves: many groups or a chain-like design).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fsb.bws.counting import BWSCounts, count_best_worst

__all__ = ["BOUND_VALUES", "bound_column", "bound_counts", "bound_sentence", "components", "score_bounds"]

# the bound column's values, one per reason (several reasons of one item are joined by "+"); "" = an estimate
BOUND_VALUES = {"always_best": "best-always", "always_worst": "worst-always", "outside_main": "disconnected", "never": "unjudged"}


def score_bounds(
    design: NDArray[np.integer],
    best: NDArray[np.integer],
    worst: NDArray[np.integer],
    tuple_index: NDArray[np.integer] | None,
    n_items: int,
    counts: BWSCounts | None = None,
) -> dict[str, NDArray[np.bool_]]:
    """Items whose score is a bound rather than an estimate, by reason (boolean masks over items).

    Parameters
    ----------
    design : (T, k) items of each tuple (or of each judgment, with `tuple_index` None).
    best, worst : (M,) items chosen best and worst in judgment j.
    tuple_index : (M,) the design row judgment j saw; None when row j of `design` is judgment j.
    n_items : number of items (codes 0..n_items-1).
    counts : these judgments' tallies when the caller has them (`fsb.bws.count_best_worst`): not counted again.

    Returns
    -------
    dict of (n_items,) bool
        never: shown in no judgment (only the planner, `fsb.bws.adaptive`, meets such items). always_best /
        always_worst: the item's group (strongly connected component of the beats graph) lies above (below)
        its part's largest group, or, in a part without a unique largest group, no other group beats (is
        beaten by) it (`_beyond`); e.g. chosen best (worst) in every judgment that showed it, decided on
        judgments, not on slots (an item twice in a row is still best in it). outside_main: judged, but not
        in the largest connected part of the item-tuple graph of judged tuples (the part holding the most
        judged items; with two or more tied, no part shares a scale and every judged item is outside), or
        in a group with no chain of wins to or from its part's largest group.
    """
    design = np.asarray(design)
    ti = None if tuple_index is None else np.asarray(tuple_index, dtype=np.int64)
    judged = design if ti is None else design[np.unique(ti)]
    if counts is None:
        counts = count_best_worst(design, best, worst, n_items, tuple_index)
    shown = counts.appearances
    label = components(judged, n_items)
    sizes = np.bincount(label[shown > 0], minlength=n_items)
    main = shown > 0
    largest = sizes.max(initial=0)
    if main.any():  # a unique largest part, or none: tied parts share no scale, whichever way their ids are spelled
        main &= (label == np.argmax(sizes)) if np.count_nonzero(sizes == largest) == 1 else False
    rows = design if ti is None else design[ti]
    above, below, apart = _beyond(rows, np.asarray(best), np.asarray(worst), label, n_items)
    return {
        "never": shown == 0,
        "always_best": above,
        "always_worst": below,
        "outside_main": (shown > 0) & (~main | apart),
    }


PEEL_ITERATIONS = 64  # reachability sweeps before the beats graph goes to scipy's strong components whole
SMALL_REST = 512  # items outside the pivot's group solved group by group here; more go to scipy


def _beyond(
    rows: NDArray[np.integer], best: NDArray[np.integer], worst: NDArray[np.integer], part: NDArray[np.intp], n_items: int
) -> tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_]]:
    """(above, below, apart): items whose utility runs to +inf (-inf) against their part's largest group as the
    ridge goes to 0, and items of groups on no path to or from it.

    The beats graph has an arc best -> x and x -> worst for every item x of each judgment (`rows[j]`, best[j],
    worst[j]). Its strongly connected components are the groups (items that beat each other round, through
    others); the MaxDiff (and Bradley-Terry) maximum-likelihood estimate of a connected part exists iff the
    part is one group (Ford 1957; Hunter 2004, Ann. Statist. 32, condition A). Otherwise the differences
    within a group stay finite and those between groups joined by a path run to infinity, so the part's
    largest group (ties: every tied one) is its scale: a group with a path to it and none back (it never
    loses to the items below it) is above, one reached from it and with no path back is below, one with no
    path either way shares no scale with it (apart; above too if no arc enters its group, below if none leaves).
    In a part with no unique largest group, a group no arc enters is above, one no arc leaves below. An item
    chosen best in every judgment that showed it is a group of one with no arc in: above.

    The pivot's group by forward-backward reachability (sweeps over the judgments, numpy only: the counting
    path imports no scipy), the pivot the most shown item; the few items outside it (perfect items, small
    parts) by `_small_groups`; scipy's strong components when they are many or the sweeps do not settle."""
    appear = np.bincount(rows.ravel(), minlength=n_items)
    shown = appear > 0
    if not shown.any():  # no judgment: nothing above, below or apart
        return shown, shown.copy(), shown.copy()
    pivot = int(np.argmax(appear))
    forward = _reach(rows, best, worst, _one(pivot, n_items), forward=True)
    backward = None if forward is None else _reach(rows, best, worst, _one(pivot, n_items), forward=False)
    if backward is None:  # the sweeps did not settle: a long chain-like design
        group = _scipy_groups(rows, best, worst, n_items)
    else:
        group = np.where(forward & backward, 0, -1)
        rest = np.flatnonzero(shown & (group < 0))
        if rest.size > SMALL_REST:
            group = _scipy_groups(rows, best, worst, n_items)
        elif rest.size:  # the few items outside the pivot's group: their arcs among themselves, relabelled 0..r-1
            local = np.full(n_items, -1, dtype=np.intp)
            local[rest] = np.arange(rest.size)
            some = np.count_nonzero(local[rows] >= 0, axis=1) >= 2
            r, b, w = local[rows[some]], local[best[some]], local[worst[some]]
            src = np.concatenate([np.repeat(b, r.shape[1]), r.ravel()])
            dst = np.concatenate([r.ravel(), np.repeat(w, r.shape[1])])
            ok = (src >= 0) & (dst >= 0) & (src != dst)
            group[rest] = 1 + _small_groups(src[ok], dst[ok], rest.size)
    group = np.where(shown, group, -1)
    size = np.bincount(group[shown], minlength=n_items)
    top = np.zeros(n_items, dtype=np.int64)
    np.maximum.at(top, part[shown], size[group[shown]])
    at_top = shown & (size[np.maximum(group, 0)] == top[part])
    first = np.unique(group[at_top], return_index=True)[1]  # one item per group of largest size: their parts
    tops = np.bincount(part[at_top][first], minlength=n_items)
    ref = at_top & (tops[part] == 1)
    pivot_part = part[pivot]
    if backward is not None and 2 * np.count_nonzero(forward & backward) > np.count_nonzero(shown & (part == pivot_part)):
        # the pivot's group holds most of its part: the largest there, its reach already known; the other parts swept alone
        other = part[best] != pivot_part
        up_o = _reach(rows[other], best[other], worst[other], ref & (part != pivot_part), forward=False)
        down_o = _reach(rows[other], best[other], worst[other], ref & (part != pivot_part), forward=True)
        up = None if up_o is None else np.where(part == pivot_part, backward, up_o)
        down = None if down_o is None else np.where(part == pivot_part, forward, down_o)
    else:
        up, down = _reach(rows, best, worst, ref, forward=False), _reach(rows, best, worst, ref, forward=True)
    if up is None or down is None:
        up, down = _scipy_reach(rows, best, worst, ref, False), _scipy_reach(rows, best, worst, ref, True)
    above, below = shown & up & ~down, shown & down & ~up
    no_ref = shown & (tops[part] != 1)  # no unique largest group (so two or more): one no arc enters (leaves) is above (below)
    apart = shown & ~no_ref & ~up & ~down  # on no path to or from the scale; also above (below) if no arc enters (leaves) it
    if (loose := no_ref | apart).any():
        entered, left = _crossed(rows, best, worst, group)
        above |= loose & ~entered[group]
        below |= loose & ~left[group]
    return above, below, apart


def _crossed(rows, best, worst, group) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Per group (index -1: the unjudged): whether an arc enters it from another group, and whether one leaves it."""
    entered, left = np.zeros(group.size + 1, dtype=bool), np.zeros(group.size + 1, dtype=bool)
    gb, gr, gw = group[best], group[rows], group[worst]
    cross = gr != gb[:, None]  # best -> x
    entered[gr[cross]] = True
    left[gb[cross.any(axis=1)]] = True
    cross = gr != gw[:, None]  # x -> worst
    left[gr[cross]] = True
    entered[gw[cross.any(axis=1)]] = True
    return entered, left


def _one(item: int, n: int) -> NDArray[np.bool_]:
    mask = np.zeros(n, dtype=bool)
    mask[item] = True
    return mask


def _small_groups(src: NDArray[np.intp], dst: NDArray[np.intp], n: int) -> NDArray[np.intp]:
    """Strong components of a small graph (arcs src -> dst over nodes 0..n-1), one forward-backward pivot at a time."""
    group = np.full(n, -1, dtype=np.intp)
    for pivot in range(n):
        if group[pivot] >= 0:
            continue
        free = group < 0
        sets = []
        for a, z in ((src, dst), (dst, src)):
            seen = np.zeros(n, dtype=bool)
            seen[pivot] = True
            arcs = free[a] & free[z]
            a, z = a[arcs], z[arcs]
            while True:
                more = seen.copy()
                more[z[seen[a]]] = True
                if (more == seen).all():
                    break
                seen = more
            sets.append(seen)
        group[sets[0] & sets[1]] = pivot
    return group


def _reach(rows, best, worst, start: NDArray[np.bool_], *, forward: bool) -> NDArray[np.bool_] | None:
    """Items that the `start` items reach (forward) or that reach one of them, by the beats arcs: one sweep over
    the judgments a step, a judgment dropped once all its items are reached (it can add none); None after
    `PEEL_ITERATIONS` sweeps without settling."""
    seen = start.copy()
    count = int(np.count_nonzero(seen))
    for _ in range(PEEL_ITERATIONS):
        in_row = seen[rows]
        done = np.logical_and.reduce(in_row, axis=1)
        if np.count_nonzero(done) > done.size // 4:
            rows, best, worst, in_row = rows[~done], best[~done], worst[~done], in_row[~done]
        any_in = np.logical_or.reduce(in_row, axis=1)
        if forward:  # arcs best -> x and x -> worst
            seen[rows[seen[best]]] = True
            seen[worst[any_in]] = True
        else:
            seen[best[any_in]] = True
            seen[rows[seen[worst]]] = True
        now = int(np.count_nonzero(seen))
        if now == count:
            return seen
        count = now
    return None


def _arcs(rows, best, worst) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    k = rows.shape[1]
    return np.concatenate([np.repeat(best, k), rows.ravel()]), np.concatenate([rows.ravel(), np.repeat(worst, k)])


def _scipy_reach(rows, best, worst, start: NDArray[np.bool_], forward: bool) -> NDArray[np.bool_]:
    """`_reach` by scipy's breadth-first search from a virtual node joined to the `start` items."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order

    n = start.size
    src, dst = _arcs(rows, best, worst)
    if not forward:
        src, dst = dst, src
    src = np.concatenate([src, np.full(int(start.sum()), n)])
    dst = np.concatenate([dst, np.flatnonzero(start)])
    graph = sp.coo_matrix((np.ones(src.size, dtype=np.int8), (src, dst)), shape=(n + 1, n + 1)).tocsr()
    seen = np.zeros(n + 1, dtype=bool)
    seen[breadth_first_order(graph, n, directed=True, return_predecessors=False)] = True
    return seen[:n]


def _scipy_groups(rows, best, worst, n_items: int) -> NDArray[np.intp]:
    """The strong components of the beats graph by scipy (Pearce's algorithm), for what the sweeps leave."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    src, dst = _arcs(rows, best, worst)
    graph = sp.coo_matrix((np.ones(src.size, dtype=np.int8), (src, dst)), shape=(n_items, n_items)).tocsr()
    return connected_components(graph, directed=True, connection="strong")[1]


def components(rows: NDArray[np.integer], n_items: int) -> NDArray[np.intp]:
    """Connected components of the items, linked when they share a row: each item's label is the smallest item
    code of its component.

    Parameters
    ----------
    rows : (R, k) item codes (tuples or judgments).
    n_items : number of items; an item in no row is a component of its own.

    Returns
    -------
    (n_items,) intp
        The component's root (its smallest item). Union-find by rows, vectorised: each pass hooks every
        row's roots to the row's smallest root (np.minimum.at), then pointer jumping (label = label[label])
        until every label is a root; it stops when no row spans two roots, and a row within one root is not
        looked at again. Each pass removes at least one root while any row spans two (Shiloach and Vishkin
        1982's hook-and-jump; a random design needs about 3 passes)."""
    label = np.arange(n_items, dtype=np.intp)
    rows = np.asarray(rows)
    k = rows.shape[1]
    cols = np.ascontiguousarray(rows.T, dtype=np.intp)  # slot-major: the reductions over a row's k slots run along arrays
    while cols.shape[1]:
        roots = np.take(label, cols)
        low = np.minimum.reduce(roots, axis=0)
        spans = np.maximum.reduce(roots, axis=0) != low
        n_span = int(np.count_nonzero(spans))
        if not n_span:
            break
        if n_span < spans.size // 4:  # a row within one component stays so: only the rows still spanning two are kept
            roots, low, cols = roots[:, spans], low[spans], cols[:, spans]
        np.minimum.at(label, roots.ravel(), np.tile(low, k))
        while True:
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
    return label


def bound_column(masks: dict[str, NDArray[np.bool_]]) -> NDArray[np.str_]:
    """The `bound` column from `score_bounds`' masks: per item "" (an estimate) or its reasons'
    `BOUND_VALUES` joined by "+" in the order best-always, worst-always, disconnected, unjudged (an item in
    no judgment: only the planner's masks have one, every build and score file refuses such items)."""
    n = next(iter(masks.values())).size
    out = np.zeros(n, dtype="U1")  # "" everywhere: one character a row until an item is a bound
    hit = np.logical_or.reduce([masks[name] for name in BOUND_VALUES])
    if hit.any():
        parts = [np.where(masks[name][hit], value, "") for name, value in BOUND_VALUES.items()]
        joined = ["+".join(p for p in row if p) for row in zip(*(p.tolist() for p in parts))]
        out = out.astype(f"U{max(len(s) for s in joined)}")
        out[hit] = joined
    return out


def bound_counts(column: NDArray[np.str_]) -> dict[str, int]:
    """Items per bound value (reasons joined by "+" are counted under each), and "total": items with any."""
    values, counts = np.unique(column[column != ""], return_counts=True)
    out = dict.fromkeys(BOUND_VALUES.values(), 0)
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        for part in value.split("+"):
            out[part] += count
    return {"total": int((column != "").sum()), **{name: c for name, c in out.items() if c}}


def bound_sentence(counts: dict[str, int], noun: str = "items", *, explain: bool = True) -> str:
    """One sentence counting the bounds ("3 items are bounds, not estimates: 2 best-always, 1 disconnected
    (the `bound` column: ...)."), or "" when there are none; `explain` False drops the parenthesis' meanings.
    Each reason is counted, so when an item has two ("best-always+disconnected") the counts add up to more
    than the total and the sentence says "reasons overlap". `disconnected` is named for what it is: a score
    on a scale of its own, not a bound."""
    total = counts.get("total", 0)
    if not total:
        return ""
    one = noun[:-1] if noun.endswith("s") else noun
    parts = ", ".join(f"{counts[name]} {name}" for name in BOUND_VALUES.values() if counts.get(name))  # fixed order
    if sum(counts.get(name, 0) for name in BOUND_VALUES.values()) > total:
        parts += "; reasons overlap"
    if counts.get("disconnected"):  # not a bound: a scale of its own
        verb = f"1 {one} is not an estimate" if total == 1 else f"{total} {noun} are not estimates"
    else:
        verb = f"1 {one} is a bound, not an estimate" if total == 1 else f"{total} {noun} are bounds, not estimates"
    if not explain:
        return f"{verb}: {parts} (their bound column)"
    return (
        f"{verb}: {parts} (the `bound` column: best-always/worst-always = in a group of items that beats (loses to) "
        "the rest of its connected part and never loses to (beats) it, e.g. chosen best/worst in every judgment that showed it, "
        "so its score is at least this extreme: the end of the scale or the ridge's, not the data's; "
        "disconnected = outside the design's largest connected part, or with no chain of wins to or from it, so its score "
        "is on a scale of its own, not comparable with the rest)."
    )
