"""A best-worst design that adds new items to an existing study and ties them to its scale (`fsb tuples NEW --extend EXISTING`).

BWS scores are relative to the tuples an item was judged in: items judged only among themselves land on
a scale of their own. An extension therefore puts at least one existing item in every new tuple, chosen
to spread over the existing score range, so that a model-based score (the MaxDiff fit of `fsb.bws.maxdiff`,
`score_maxdiff` in the dataset) places the new items on the scale the existing ones define.

The design (for tuples of size K, every new item in k tuples, N new items):
- T = ceil(N k / (K - 1)) new tuples: each holds K - 1 new items and one existing item, except the
  T (K - 1) - N k tuples that hold K - 2 new items and two existing ones (so every new item is in
  exactly k tuples and every new tuple in at least one existing item);
- the existing items' extra load is spread evenly (each is chosen floor or ceil of its share times),
  and the ones chosen once more than others sit at evenly spaced ranks of the existing scores
  (counting scores of EXISTING when it holds judgments, else id order);
- no two tuples share more than 2 items: new tuples hold at least K - 2 >= 2 new items, which no
  existing tuple holds, so only pairs of new tuples can conflict; a local search swaps items of the same
  kind (new for new, existing for existing) until no 3-subset repeats among the new tuples (and, where
  feasible, no pair);
- within each tuple the items are put in a seeded, position-balanced order (`annotate.balance_positions`).

`check_extension` re-reads what was written and checks every one of these properties independently.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from math import comb
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fsb import bws
from fsb.bws.tuples import DESIGN_KIND, balance_positions, position_report, read_design
from fsb.core.readers import InputError
from fsb.core.seals import recorded_write
from fsb.tables.items import read_items

__all__ = ["Existing", "check_extension", "extend_design", "make_extension", "read_existing"]


@dataclass(frozen=True)
class Existing:
    """An existing study: its tuples (item labels), each item's score where judgments give one, where the
    scores came from, and the tuple_id the first new tuple gets."""

    path: Path
    tuples: np.ndarray
    labels: np.ndarray
    scores: np.ndarray | None
    score_source: str
    next_tuple_id: int
    irregular: str | None = None  # one line on the quality-control rows let through (invalid="count" or "drop")


def read_existing(path: str | os.PathLike[str], *, invalid: str = "refuse") -> Existing:
    """Read EXISTING: a judgments file or a design file.

    Parameters
    ----------
    path : judgments (Item1..ItemK,BestItem,WorstItem[,...]) or a design (tuple_id,Item1..ItemK).
    invalid : for judgments, the quality-control rows (a tuple repeating an item, best = worst), as in
        `fsb score`: "refuse" stops at the first, "count" counts them as the NRC Perl script does, "drop"
        leaves them out (of the tuples and of the scores).

    Returns
    -------
    Existing
        The distinct tuples and, for judgments, the counting scores ((B - W) / n + 1) / 2 the anchors are
        spread by (a design spreads them by id order); `irregular` says what was let through."""
    from fsb.bws.coded import encode
    from fsb.core.readers import read_input_bytes
    from fsb.tables.judgments import describe_irregular, peek_header, read_annotations

    p = Path(path)
    header = peek_header(p, read_input_bytes(p))
    if "BestItem" in header:
        ann = read_annotations(p, invalid=invalid)  # type: ignore[arg-type]
        coded = encode(ann)
        counts = bws.count_best_worst(coded.design, coded.best, coded.worst, coded.n_items, coded.tuple_index)
        source = "counting scores of the existing judgments"
        return Existing(p, coded.labels[coded.design], coded.labels, counts.score, source, len(coded.design), describe_irregular(ann))
    design = read_design(p)
    tuples = design.drop(columns="tuple_id").to_numpy()
    labels = np.unique(tuples)
    return Existing(p, tuples, labels, None, "id order (the existing file holds no judgments)", int(design["tuple_id"].max()) + 1)


def _anchor_slots(order: np.ndarray, n_slots: int) -> np.ndarray:
    """`n_slots` existing items (as indices into `order`, the items from lowest to highest score), each
    used floor or ceil of n_slots / M times; the ones used once more sit at evenly spaced ranks."""
    m = order.size
    base, extra = divmod(n_slots, m)
    chosen = np.repeat(np.arange(m), base)
    if extra:
        ranks = ((np.arange(extra) + 0.5) * m / extra).astype(np.int64)
        chosen = np.concatenate([chosen, ranks])
    return order[chosen]


def _repair(rows: list[list[int]], is_new: list[list[bool]], rng: np.random.Generator, max_steps: int) -> bool:
    """Local search on the new tuples: swap a slot of a conflicting tuple with a slot of the same kind
    in another tuple; keep the swap when the cost does not rise (an item twice in a tuple 10**6, a
    repeated 3-subset 1000, a repeated pair 1 until pairs are given up half way)."""
    triples: Counter[tuple[int, ...]] = Counter()
    pairs: Counter[tuple[int, ...]] = Counter()
    weight = {"pairs": 1}

    def cost(row: list[int]) -> int:
        s = sorted(row)
        if len(set(s)) < len(s):
            return 10**6
        return 1000 * sum(triples[c] - 1 for c in combinations(s, 3)) + weight["pairs"] * sum(pairs[c] - 1 for c in combinations(s, 2))

    def move(row: list[int], sign: int) -> None:
        s = sorted(row)
        for c in combinations(s, 3):
            triples[c] += sign
        for c in combinations(s, 2):
            pairs[c] += sign

    for row in rows:
        move(row, +1)
    hot = [t for t, row in enumerate(rows) if cost(row) > 0]
    for step in range(max_steps):
        if weight["pairs"] and step == max_steps // 2:
            weight["pairs"] = 0
            hot = [t for t, row in enumerate(rows) if cost(row) > 0]
        if not hot:
            break
        pick = int(rng.integers(len(hot)))
        t = hot[pick]
        if cost(rows[t]) == 0:
            hot[pick] = hot[-1]
            hot.pop()
            continue
        u = int(rng.integers(len(rows)))
        if u == t:
            continue
        i = int(rng.integers(len(rows[t])))
        same = [j for j in range(len(rows[u])) if is_new[u][j] == is_new[t][i]]
        if not same:
            continue
        j = same[int(rng.integers(len(same)))]
        new_t, new_u = list(rows[t]), list(rows[u])
        new_t[i], new_u[j] = rows[u][j], rows[t][i]
        if bws.try_swap(rows, t, u, new_t, new_u, cost, move):
            hot.append(u)
    return all(len(set(r)) == len(r) for r in rows) and all(c <= 1 for c in triples.values())


def _extension_size_problem(n: int, m: int, n_tuples: int, n_two_old: int, size: int) -> str | None:
    """Why the new tuples cannot keep every 3-item subset in one tuple, or None (counting bounds, necessary
    only): their 3-subsets of new items number at most C(n, 3), and the most loaded existing item's
    3-subsets with two new items at most C(n, 2)."""
    if n_tuples > bws.MAX_TUPLES:
        return f"{n_tuples} new tuples is more than the {bws.MAX_TUPLES} fsb designs; use a smaller k"
    one_old = n_tuples - n_two_old
    need = one_old * comb(size - 1, 3) + n_two_old * comb(size - 2, 3)
    if need > comb(n, 3):
        return (
            f"{n_tuples} new tuples hold {need} 3-item subsets of new items, but {n} new items have only {comb(n, 3)}: "
            "some two tuples would share 3 items; use more new items or a smaller k"
        )
    load = -(-(n_tuples + n_two_old) // max(m, 1))  # the most tuples any existing item is added to
    two = min(load, n_two_old)  # of them, at most this many hold size - 2 new items, the others size - 1
    pairs = (load - two) * comb(size - 1, 2) + two * comb(size - 2, 2)
    if pairs > comb(n, 2):
        return (
            f"an existing item joins {load} new tuples holding {pairs} pairs of new items, but {n} new items have only "
            f"{comb(n, 2)} pairs: two tuples would share 3 items; use more new items or a smaller k"
        )
    return None


def extend_design(new_ids: np.ndarray, existing: Existing, *, k: int = 8, seed: int = 0, max_steps: int | None = None) -> np.ndarray:
    """The new tuples (labels, shape (T, K)) for `new_ids` tied to `existing` (see the module docstring). Seeded."""
    size = existing.tuples.shape[1]
    n = new_ids.size
    if size < 3:
        raise ValueError(f"an extension needs tuples of at least 3 items (EXISTING has {size})")
    if n < size - 1:
        raise ValueError(f"an extension needs at least {size - 1} new items for {size}-tuples, got {n}")
    if k < 1:
        raise ValueError("k must be >= 1")
    rng = np.random.default_rng(seed)
    slots = n * k
    n_tuples = -(-slots // (size - 1))
    n_two_old = n_tuples * (size - 1) - slots  # tuples holding size - 2 new items and two existing ones
    m = existing.labels.size
    problem = _extension_size_problem(n, m, n_tuples, n_two_old, size)
    if problem:
        raise ValueError(problem)
    if existing.scores is not None:
        order = np.lexsort((np.arange(m), existing.scores))  # lowest score first, ties by id
    else:
        order = np.arange(m)  # labels are sorted: id order
    anchors = _anchor_slots(order, n_tuples + n_two_old)
    anchors = anchors[rng.permutation(anchors.size)]
    # codes: new items 0..n-1, existing items n..n+m-1
    seq = np.concatenate([rng.permutation(n) for _ in range(k)])
    rows: list[list[int]] = []
    kinds: list[list[bool]] = []
    pos = 0
    for t in range(n_tuples):
        n_new = size - 2 if t >= n_tuples - n_two_old else size - 1
        olds = [int(anchors[t]) + n] + ([int(anchors[n_tuples + (t - (n_tuples - n_two_old))]) + n] if n_new == size - 2 else [])
        rows.append([int(x) for x in seq[pos : pos + n_new]] + olds)
        kinds.append([True] * n_new + [False] * len(olds))
        pos += n_new
    steps = max_steps if max_steps is not None else min(2000 * max(n_tuples, 1), bws.MAX_SEARCH_STEPS)
    if not _repair(rows, kinds, rng, steps):
        raise RuntimeError(
            f"no extension of {n} new items in {k} tuples each with no two tuples sharing more than 2 items was found "
            f"within {steps} swaps; use more new items or a smaller k"
        )
    codes = np.array(rows, dtype=np.int64)
    codes = balance_positions(codes, n + m, seed=seed)
    all_labels = np.concatenate([new_ids.astype(existing.labels.dtype, copy=False), existing.labels])
    return all_labels[codes]


def _max_shared_with(new: np.ndarray, old: np.ndarray) -> int:
    """The largest number of items a new tuple shares with an existing tuple (0 if none)."""
    where: dict[Any, list[int]] = {}
    for t, row in enumerate(old.tolist()):
        for item in row:
            where.setdefault(item, []).append(t)
    best = 0
    for row in new.tolist():
        hits = Counter(t for item in row for t in where.get(item, ()))
        if hits:
            best = max(best, max(hits.values()))
    return best


def _quantiles(x: np.ndarray) -> list[float]:
    return [round(float(q), 4) for q in np.quantile(x, [0, 0.25, 0.5, 0.75, 1])]


def check_extension(new_tuples: np.ndarray, new_ids: np.ndarray, existing: Existing, k: int) -> dict[str, Any]:
    """Check an extension independently of how it was made: every new item in k new tuples, every new
    tuple holding >= 1 existing item, the existing items' extra load, how the chosen existing items spread
    over the existing scores, and the largest overlap of two tuples (new with new, new with existing)."""
    t = np.asarray(new_tuples)
    size = t.shape[1]
    labels, codes = np.unique(np.concatenate([t.ravel(), existing.labels]), return_inverse=True)
    coded = codes[: t.size].reshape(t.shape)
    is_new = np.isin(labels, new_ids)
    per_tuple_new = is_new[coded].sum(axis=1)
    appear = np.bincount(coded.ravel(), minlength=labels.size)
    new_appear = appear[is_new]
    existing_idx = np.searchsorted(labels, existing.labels)
    load = appear[existing_idx]
    report_new = bws.design_report(coded, labels.size)
    anchors = t[~is_new[coded]]
    out: dict[str, Any] = {
        "new_items": int(new_ids.size),
        "new_items_in_tuples": int(np.isin(new_ids, t).sum()),
        "new_tuples": int(t.shape[0]),
        "tuple_size": int(size),
        "k": int(k),
        "new_item_appearances_min": int(new_appear.min()) if new_appear.size else 0,
        "new_item_appearances_max": int(new_appear.max()) if new_appear.size else 0,
        "tuples_without_existing_item": int((per_tuple_new == size).sum()),
        "existing_items_per_new_tuple_min": int((size - per_tuple_new).min()),
        "existing_items_per_new_tuple_max": int((size - per_tuple_new).max()),
        "tuples_repeating_an_item": report_new["tuples_repeating_an_item"],
        "existing_items": int(existing.labels.size),
        "existing_items_used": int((load > 0).sum()),
        "existing_extra_load_min": int(load.min()),
        "existing_extra_load_max": int(load.max()),
        "max_shared_items_new_tuples": report_new["max_shared_items"],
        "max_shared_items_new_with_existing": _max_shared_with(t, existing.tuples),
        "existing_design_max_shared_items": bws.design_report(
            np.unique(existing.tuples, return_inverse=True)[1].reshape(existing.tuples.shape)
        )["max_shared_items"],
        "repeated_pairs_new_tuples": report_new["repeated_pairs"],
        "anchor_spread": existing.score_source,
    }
    # position balance over the items the new tuples show (new items and the existing items they use), not
    # over every existing item: the ones left out were not placed by this design
    shown = appear > 0
    out["positions"] = {
        "over": f"the {int(shown.sum())} items of the new tuples ({int((shown & is_new).sum())} new, "
        f"{int((shown & ~is_new).sum())} existing); per_item figures count only those",
        **position_report(coded, labels.size, items=shown),
    }
    out["positions_new_items"] = {"over": "the new items only", **position_report(coded, labels.size, items=shown & is_new)}
    out["max_shared_items"] = max(out["max_shared_items_new_tuples"], out["max_shared_items_new_with_existing"])
    if existing.scores is not None:
        score_of = dict(zip(existing.labels.tolist(), existing.scores.tolist()))
        anchor_scores = np.array([score_of[a] for a in anchors.tolist()])
        out["existing_score_quantiles"] = _quantiles(existing.scores)
        out["anchor_score_quantiles"] = _quantiles(anchor_scores)
    else:
        rank = {v: i for i, v in enumerate(existing.labels.tolist())}
        out["anchor_id_rank_quantiles"] = _quantiles(np.array([rank[a] / max(existing.labels.size - 1, 1) for a in anchors.tolist()]))
    return out


def make_extension(
    items: str | os.PathLike[str],
    existing: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    k: int = 8,
    seed: int = 0,
    force: bool = False,
    invalid: str = "refuse",
) -> dict[str, Any]:
    """Write the new tuples for the items of `items` tied to `existing` and return the check of what was written.

    Parameters
    ----------
    items : a generations file or item list; its ids are the new items.
    existing : the study's judgments or design.
    out : the CSV written, tuple_id,Item1..ItemK; replaced only if it is unchanged since fsb wrote it, or
        with `force`.
    k : tuples per new item.
    seed : seed of the design.
    force : replace `out` whatever it holds.
    invalid : quality-control rows of judgments in `existing` (`read_existing`; `fsb score --invalid`).

    Returns
    -------
    dict
        `check_extension` of the file read back, plus first_tuple_id, seed, out, and existing_irregular
        (the line on the quality-control rows let through, or None)."""
    found = read_items(items)
    ex = read_existing(existing, invalid=invalid)
    new_ids = found.ids
    if (new_ids.dtype.kind in "iu") != (ex.labels.dtype.kind in "iu"):
        raise InputError(items, f"the new ids and the ids of {existing} must both be integers or both be strings")
    clash = np.flatnonzero(np.isin(new_ids, ex.labels))
    if clash.size:
        i = int(clash[0])
        raise InputError(
            items, f"id {new_ids.tolist()[i]!r} is already an item of {existing}: new items need new ids", line=found.lines[i], field="id"
        )
    try:
        tuples = extend_design(new_ids, ex, k=k, seed=seed)
    except (ValueError, RuntimeError) as e:
        raise InputError(items, str(e)) from None
    size = tuples.shape[1]
    frame = pd.DataFrame(tuples, columns=[f"Item{j + 1}" for j in range(size)])
    frame.insert(0, "tuple_id", ex.next_tuple_id + np.arange(len(frame)))
    recorded_write(out, frame.to_csv(index=False, lineterminator="\n"), force=force, kind=DESIGN_KIND)
    written = read_design(out)
    check = check_extension(written.drop(columns="tuple_id").to_numpy(), new_ids, ex, k)
    return {**check, "first_tuple_id": int(ex.next_tuple_id), "seed": seed, "out": str(Path(out)), "existing_irregular": ex.irregular}
