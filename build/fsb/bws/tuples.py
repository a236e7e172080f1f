"""A study's tuple design (`fsb tuples`): 2N k-tuples from the items with the at-most-2-shared guarantee
(`fsb.bws.designs`), each tuple's items put in a seeded, position-balanced order, written as the design
CSV that annotators' forms, Label Studio and the scorers read back (`read_design`)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fsb import bws
from fsb.core.readers import InputError
from fsb.core.seals import recorded_write
from fsb.tables.items import read_items

__all__ = [
    "DESIGN_KIND",
    "MAX_ITEMS",
    "balance_greedy",
    "balance_positions",
    "euler_split",
    "make_tuples",
    "position_report",
    "read_design",
]

# What the one-shot output is called in a refusal ("PATH: exists and is not KIND unchanged: WHY; ...").
DESIGN_KIND = "a design from `fsb tuples`"

MAX_ITEMS = 2**21  # bws.bws_design codes 3-subsets of item indices in 63 bits


def _item_labels(items: str | int) -> np.ndarray:
    """Item labels: 1..N for a number, else the ids of an item list or generations file (sorted)."""
    text = str(items)
    if text.startswith(("-", "+")) and text[1:].isascii() and text[1:].isdigit() and not Path(text).exists():
        raise InputError(text, f"a design needs from 1 to {MAX_ITEMS - 1} items (a count, or an item list file), got {text}")
    if text.isascii() and text.isdigit():
        n = int(text)
        if not 1 <= n < MAX_ITEMS:
            raise InputError(text, f"a design needs from 1 to {MAX_ITEMS - 1} items (tuples are coded in 63 bits), got {n}")
        return np.arange(1, n + 1)
    return np.sort(read_items(text).ids)


def _regular_graph(t: np.ndarray, n_items: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int] | None:
    """The design as a k-regular bipartite graph: (rows, cols, n_rows, n_copies), one edge per item
    occurrence first (edge i = flat position i of the design), then dummy edges; None when it cannot be made.

    Rows are tuples (degree k); each item's occurrences, in random order, are cut into copies of k (the last
    may be short) and dummy tuples fill the short copies up, so every vertex has degree k."""
    n_tuples, k = t.shape
    flat = t.ravel()
    order = _random_within(flat, rng)
    appear = np.bincount(flat, minlength=n_items)
    starts = np.cumsum(appear) - appear
    rank = np.empty(flat.size, dtype=np.int64)
    rank[order] = np.arange(flat.size) - starts[flat[order]]
    copies = -(-appear // k)
    copy = (np.cumsum(copies) - copies)[flat] + rank // k
    n_copies = int(copies.sum())
    missing = k - np.bincount(copy, minlength=n_copies)
    rounds = [np.flatnonzero(missing > s) for s in range(int(missing.max(initial=0)))]
    filler = np.concatenate(rounds) if rounds else np.zeros(0, dtype=np.int64)
    n_rows = n_tuples + filler.size // k
    if filler.size % k or n_rows != n_copies:
        return None
    rows = np.concatenate([np.repeat(np.arange(n_tuples), k), n_tuples + np.arange(filler.size) // k])
    cols = np.concatenate([copy, filler])
    return rows, cols, n_rows, n_copies


def _random_within(key: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """An order sorting `key`, random within equal keys: one sort on key * 2^20 + a random 20-bit number
    (a two-key sort when the keys are too large for that)."""
    key = np.asarray(key, dtype=np.int64)
    if key.size and int(key.min()) >= 0 and int(key.max()) < 2**42:
        return np.argsort((key << 20) | rng.integers(0, 2**20, size=key.size))
    return np.lexsort((rng.random(key.size), key))


def _pairs_within(vertex: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """An involution on edges pairing, at each vertex (every degree even), its edges two by two at random."""
    order = _random_within(vertex, rng)
    partner = np.empty(vertex.size, dtype=np.int64)
    partner[order[0::2]], partner[order[1::2]] = order[1::2], order[0::2]
    return partner


def euler_split(left: np.ndarray, right: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Colour the edges of a bipartite multigraph whose degrees are all even 0/1 so that every vertex
    gets half of its edges in each colour (Euler partition; Gabow 1976, "Using Euler partitions to edge
    color bipartite multigraphs").

    Edges are paired at random at each vertex (`pL` on the left, `pR` on the right); the pairs chain the
    edges into closed trails that alternate right and left pairs, so every trail has even length and
    colouring it alternately gives paired edges different colours. The alternation classes are the
    orbits of pL∘pR; each orbit is named by its smallest edge (pointer doubling, O(E log E), no Python
    loop over edges), and an edge takes colour 0 when its orbit's name is below that of pR(edge)'s."""
    p_left, p_right = _pairs_within(left, rng), _pairs_within(right, rng)
    step = p_left[p_right]
    name = np.arange(left.size, dtype=np.int64)
    while True:  # name = min over the next 2^i edges of the orbit; unchanged by a doubling = the orbit's min
        nxt = np.minimum(name, name[step])
        if np.array_equal(nxt, name):
            break
        name, step = nxt, step[step]
    return (name > name[p_right]).astype(np.int8)


def _balance_by_euler_splits(t: np.ndarray, n_items: int, rng: np.random.Generator) -> np.ndarray | None:
    """Exact position balance for tuples of a power-of-two size k: the k-regular graph of `_regular_graph`
    is split log2(k) times into halves of equal degree (`euler_split`); after the last split every colour
    is a perfect matching, and matching p puts its items in position p. Linear-logarithmic in the design
    size (2e6 tuples in seconds, where one Hopcroft-Karp matching takes minutes); None when it does not apply."""
    k = t.shape[1]
    if k < 2 or k & (k - 1):
        return None
    graph = _regular_graph(t, n_items, rng)
    if graph is None:
        return None
    rows, cols = graph[0], graph[1]
    colour = np.zeros(rows.size, dtype=np.int64)
    for _ in range(k.bit_length() - 1):  # colour classes so far are (vertex, colour) groups of even degree
        colour = 2 * colour + euler_split(rows * k + colour, cols * k + colour, rng)
    position = rng.permutation(k)[colour[: t.size]]
    out = np.empty_like(t)
    out[np.arange(t.size) // k, position] = t.ravel()
    return out


def _balance_by_matchings(t: np.ndarray, n_items: int, rng: np.random.Generator) -> np.ndarray | None:
    """Exact position balance for any tuple size by edge colouring, or None when the construction does not apply.

    By König's theorem the k-regular graph of `_regular_graph` splits into k perfect matchings, found one
    after another (Hopcroft-Karp, scipy: O(E sqrt(V)) each, so minutes at 2e6 tuples); matching p puts its
    items in position p. Each tuple gets every position once and each item every position floor(a/k) or
    ceil(a/k) times (a = its appearances)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    k = t.shape[1]
    graph = _regular_graph(t, n_items, rng)
    if graph is None:
        return None
    rows, cols, n_rows, n_copies = graph
    flat = t.ravel()
    rows, cols = rng.permutation(n_rows)[rows], rng.permutation(n_copies)[cols]  # the matchings' randomness
    key = rows * n_copies + cols
    by_key = np.argsort(key)
    sorted_key = key[by_key]
    if (sorted_key[1:] == sorted_key[:-1]).any():  # a dummy tuple meeting one copy twice: not a simple graph
        return None
    alive = np.ones(key.size, dtype=bool)
    position = np.empty(flat.size, dtype=np.int64)
    for p in rng.permutation(k):
        graph_p = csr_matrix((np.ones(int(alive.sum()), dtype=np.int8), (rows[alive], cols[alive])), shape=(n_rows, n_copies))
        match = maximum_bipartite_matching(graph_p, perm_type="column")
        if (match < 0).any():
            return None
        edge = by_key[np.searchsorted(sorted_key, np.arange(n_rows) * n_copies + match)]
        alive[edge] = False
        position[edge[edge < flat.size]] = p
    out = np.empty_like(t)
    out[np.arange(flat.size) // k, position] = flat
    return out


def balance_greedy(t: np.ndarray, n_items: int, rng: np.random.Generator, passes: int = 3) -> np.ndarray:
    """Approximate balance: each tuple in turn takes the arrangement minimising sum over its items of
    count[item, position], then `passes - 1` re-assignments of each tuple given all the others. The
    fallback of `balance_positions` when neither exact construction applies.

    Parameters
    ----------
    t
        The design, one row per tuple of item codes in 0..n_items-1.
    n_items
        Number of items.
    rng
        Random generator (visiting order and tie-breaking).
    passes
        Passes over the tuples (the first places, the others re-place).

    Returns
    -------
    np.ndarray
        The same rows, each with its items reordered; positions spread about evenly (not exactly).
    """
    n_tuples, k = t.shape
    perms = np.array(list(itertools.permutations(range(k)))) if k <= 6 else None
    counts = np.zeros((n_items, k), dtype=np.int64)
    pos_of = np.tile(np.arange(k), (n_tuples, 1))
    cols = np.arange(k)
    for p in range(passes):
        for r in rng.permutation(n_tuples):
            row = t[r]
            if p:
                counts[row, pos_of[r]] -= 1
            if perms is None:  # large tuples: a random order, no search
                chosen = rng.permutation(k)
            else:
                chosen = perms[int(np.argmin(counts[row][cols, perms].sum(axis=1) + 0.5 * rng.random(len(perms))))]
            pos_of[r] = chosen
            counts[row, chosen] += 1
    out = np.empty_like(t)
    np.put_along_axis(out, pos_of, t, axis=1)
    return out


def balance_positions(design: np.ndarray, n_items: int, seed: int = 0) -> np.ndarray:
    """The same tuples with each one's items reordered so that every item sits in every position equally
    often (floor or ceil of appearances / k): position effects then cancel out of its score. Seeded.

    Exact by edge colouring: Euler splits for tuple sizes 2, 4, 8, ... (`_balance_by_euler_splits`, a few
    seconds at 2e6 tuples), else perfect matchings (`_balance_by_matchings`); a greedy local search where
    neither construction applies. Rows keep their order and their sets of items.
    """
    t = np.asarray(design, dtype=np.int64)
    rng = np.random.default_rng(seed)
    if t.size == 0:
        return t.copy()
    for exact_method in (_balance_by_euler_splits, _balance_by_matchings):
        exact = exact_method(t, n_items, rng)
        if exact is not None:
            return exact
    return balance_greedy(t, n_items, rng)


def position_report(design: np.ndarray, n_items: int, items: np.ndarray | None = None) -> dict[str, Any]:
    """How evenly items are spread over the positions of their tuples: per item and position the number
    of tuples showing the item there; `items_balanced` counts items whose counts differ by at most 1
    across positions (the best possible when appearances is not a multiple of the tuple size). The item
    figures are over the items the boolean mask `items` marks (default: all), `items` says how many."""
    t = np.asarray(design, dtype=np.int64)
    k = t.shape[1]
    counts = np.stack([np.bincount(t[:, p], minlength=n_items) for p in range(k)], axis=1)
    per_position = counts.sum(axis=0)
    if items is not None:
        counts = counts[np.asarray(items, dtype=bool)]
    spread = counts.max(axis=1) - counts.min(axis=1) if counts.size else np.zeros(0, dtype=np.int64)
    return {
        "items": int(counts.shape[0]),
        "per_item_per_position_min": int(counts.min()) if counts.size else 0,
        "per_item_per_position_max": int(counts.max()) if counts.size else 0,
        "items_balanced": int((spread <= 1).sum()),
        "items_spread_max": int(spread.max(initial=0)),
        "ascending_tuples": int((np.diff(t, axis=1) > 0).all(axis=1).sum()),
        "expected_per_item_per_position": round(float(counts.sum(axis=1).mean() / k), 4) if counts.size else 0.0,
        "tuples_per_position": int(per_position[0]) if per_position.size else 0,
    }


def make_tuples(
    items: str | int,
    out: str | os.PathLike[str],
    tuple_size: int = 4,
    appearances: int = 8,
    seed: int = 0,
    force: bool = False,
) -> dict[str, Any]:
    """Write a design CSV (tuple_id, Item1..ItemK) for the items and return its independent check.

    `items` is a number N (items 1..N), an item list (one id a line, or a CSV with an id column) or a
    generations file. Within each tuple the items are in a seeded random, position-balanced order: the
    order annotators are shown (`fsb annotate export` keeps it); the check reports the balance. An existing
    `out` is replaced only if fsb wrote it and nobody changed it since (`recorded_write`), or with `force`.
    """
    labels = _item_labels(items)
    try:
        design = bws.bws_design(labels.size, tuple_size=tuple_size, appearances=appearances, seed=seed)
    except (ValueError, RuntimeError) as e:  # an impossible request: say so as bad input, not a traceback
        raise InputError(str(items), str(e)) from None
    design = balance_positions(design, labels.size, seed=seed)
    frame = pd.DataFrame(labels[design], columns=[f"Item{j + 1}" for j in range(tuple_size)])
    frame.insert(0, "tuple_id", np.arange(len(frame)))
    recorded_write(out, frame.to_csv(index=False, lineterminator="\n"), force=force, kind=DESIGN_KIND)
    report = {**bws.design_report(design, labels.size), "positions": position_report(design, labels.size)}
    return {**report, "seed": seed, "out": str(Path(out))}


def read_design(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Tuples (tuple_id, Item1..ItemK) from a design CSV (`fsb tuples`) or exported forms, validated.

    Item labels are integers when every one is, else opaque strings; tuple_id must be an integer."""
    from fsb.tables.csvrows import INT64_MAX, canonical_id, id_problem, read_csv_table, require_columns

    table = read_csv_table(path)
    k = 0
    while f"Item{k + 1}" in table.frame.columns:
        k += 1
    require_columns(table, ["tuple_id", "Item1", "Item2"])
    frame = table.frame
    item_cols = [f"Item{j + 1}" for j in range(k)]
    for i, tid in enumerate(frame["tuple_id"]):
        if problem := id_problem(tid.strip(), INT64_MAX):
            raise table.fail(i, "tuple_id", problem)
    for col in item_cols:
        bad = np.flatnonzero(frame[col].str.strip() == "")
        if bad.size:
            raise table.fail(int(bad[0]), col, "empty item")
    labels = frame[item_cols].apply(lambda c: c.str.strip())
    integer = all(id_problem(v, INT64_MAX) is None and canonical_id(v) for c in item_cols for v in labels[c])
    design = pd.concat([frame["tuple_id"].astype(np.int64), labels.astype(np.int64) if integer else labels], axis=1)
    values = design[item_cols].to_numpy()
    for j in range(1, k):
        rep = np.flatnonzero((values[:, j : j + 1] == values[:, :j]).any(axis=1))
        if rep.size:
            raise table.fail(int(rep[0]), item_cols[j], f"the tuple repeats item {values[rep[0], j]!r}")
    dup = np.flatnonzero(design["tuple_id"].duplicated().to_numpy())
    if dup.size:
        raise table.fail(int(dup[0]), "tuple_id", f"duplicate tuple_id {design['tuple_id'].iloc[dup[0]]}")
    design.attrs["line_of"] = table.line_of
    return design
