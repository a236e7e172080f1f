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
Res. Methods 50) and Marley and Louviere (2005) for the model; the rule is the likelihood's own: a
maximum-likelihood estimate exists for an item only when it was neither always chosen best nor always
chosen worst, and lies on the common scale only in the connected part.

Only numpy: the components are found by `components` (no scipy import on the counting path, which needs
none otherwise: at 1e5 items and 6e5 judgments, 0.04 s of CPU against 0.6 s with scipy's import and graph).
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
        never: shown in no judgment. always_best / always_worst: chosen best (worst) in every judgment
        that showed them. outside_main: judged, but not in the largest connected part of the item-tuple
        graph of judged tuples (the part holding the most judged items; ties: the part holding the lowest
        item code). The same keys and rule as `fsb.bws.adaptive.score_bounds` (which uses scipy's components).
    """
    design = np.asarray(design)
    judged = design if tuple_index is None else design[np.unique(np.asarray(tuple_index, dtype=np.int64))]
    if counts is None:
        counts = count_best_worst(design, best, worst, n_items, tuple_index)
    shown, nb, nw = counts.appearances, counts.best, counts.worst
    label = components(judged, n_items)
    main = shown > 0
    if main.any():
        main &= label == np.argmax(np.bincount(label[main]))
    return {
        "never": shown == 0,
        "always_best": (shown > 0) & (nb == shown),
        "always_worst": (shown > 0) & (nw == shown),
        "outside_main": (shown > 0) & ~main,
    }


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
    `BOUND_VALUES` joined by "+" in the order best-always, worst-always, disconnected, unjudged."""
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
    (the `bound` column: ...)."), or "" when there are none; `explain` False drops the parenthesis' meanings."""
    total = counts.get("total", 0)
    if not total:
        return ""
    one = noun[:-1] if noun.endswith("s") else noun
    parts = ", ".join(f"{counts[name]} {name}" for name in BOUND_VALUES.values() if counts.get(name))  # fixed order
    verb = f"1 {one} is a bound, not an estimate" if total == 1 else f"{total} {noun} are bounds, not estimates"
    if not explain:
        return f"{verb}: {parts} (their bound column)"
    return (
        f"{verb}: {parts} (the `bound` column: best-always/worst-always = chosen "
        "best/worst in every judgment that showed it, so its score is the end of the scale or the prior's, not the data's; "
        "disconnected = outside the design's largest connected part, so its score shares no scale with the rest)."
    )
