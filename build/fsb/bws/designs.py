"""Best-worst tuple designs: 2N k-tuples from N items, each item in the same number of tuples, no two
tuples sharing more than 2 items (checked and reported, unlike the reference tool), and their report.

References
----------
Louviere, Flynn and Marley (2015), *Best-Worst Scaling: Theory, Methods and Applications*.
Orme (2009), "MaxDiff analysis: simple counting, individual-level logit, and HB", Sawtooth Software.
Kiritchenko and Mohammad (2016, 2017), "Capturing reliable fine-grained sentiment associations by
crowdsourcing and best-worst scaling" (NAACL 2016) and "Best-worst scaling more reliable than rating
scales" (ACL 2017); their Perl scripts are the reference implementation of the design and of the
split-half reliability procedure reproduced here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "MAX_SEARCH_STEPS",
    "MAX_TUPLES",
    "appearance_bound",
    "bws_design",
    "design_report",
    "design_size_problem",
    "try_swap",
]

_DENSE_ITEMS = 2000  # designs over at most this many items are repaired by exact local search
MAX_SEARCH_STEPS = 1_000_000  # a design search gives up after this many swaps (about a minute), never runs unbounded
MAX_TUPLES = 10_000_000  # the largest design fsb makes (a million 4-tuples is already far past any annotation budget)
SUGGEST_SECONDS = 0.3  # a refused design looks this long for a smaller --k that the search meets, to suggest it


def _combination_codes(sorted_rows: NDArray[np.int64], r: int, base: int) -> NDArray[np.int64]:
    """Integer codes of every r-subset of each (sorted) row: sum_j row[c_j] * base^(r-1-j)."""
    from itertools import combinations

    k = sorted_rows.shape[1]
    cols = list(combinations(range(k), r))
    codes = np.zeros((sorted_rows.shape[0], len(cols)), dtype=np.int64)
    for ci, comb in enumerate(cols):
        for j in comb:
            codes[:, ci] = codes[:, ci] * base + sorted_rows[:, j]
    return codes


def _later_repeats(codes: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Per row: does it hold a code that another row (or column) holds too? Of each group of equal codes
    all but one are flagged (which one is kept is fixed by the sort, deterministic): the repair swaps the
    flagged rows, so one is enough. An unstable sort: several times faster than a stable one here."""
    flat = codes.ravel()
    order = np.argsort(flat)
    s = flat[order]
    rep = np.zeros(flat.size, dtype=bool)
    rep[order[1:][s[1:] == s[:-1]]] = True
    return rep.reshape(codes.shape).any(axis=1)


def _violations(tuples: NDArray[np.int64], n_items: int, check_pairs: bool) -> NDArray[np.bool_]:
    s = np.sort(tuples, axis=1)
    bad = (s[:, 1:] == s[:, :-1]).any(axis=1)
    if s.shape[1] >= 3:
        bad |= _later_repeats(_combination_codes(s, 3, n_items))
    if check_pairs:
        bad |= _later_repeats(_combination_codes(s, 2, n_items))
    return bad


def _repair_sparse(
    design: NDArray[np.int64], n_items: int, rng: np.random.Generator, unique_pairs: bool, max_rounds: int, deadline: float
) -> bool:
    """Large designs: violations are rare, so swap every offending tuple at random and re-check, vectorised.
    Gives up at `deadline` (time.monotonic) too: the same swaps as without one, up to then."""
    n_tuples, k = design.shape
    check_pairs = unique_pairs
    for round_ in range(max_rounds):
        if time.monotonic() > deadline:
            return False
        bad = np.flatnonzero(_violations(design, n_items, check_pairs))
        if bad.size == 0:
            return True
        if check_pairs and round_ >= max_rounds // 2:
            check_pairs = False  # pairs cannot all be unique here: keep the hard guarantees only
            continue
        partners = rng.integers(0, n_tuples, size=bad.size)
        pos_a = rng.integers(0, k, size=bad.size)
        pos_b = rng.integers(0, k, size=bad.size)
        for t, u, i, j in zip(bad, partners, pos_a, pos_b):
            design[t, i], design[u, j] = design[u, j], design[t, i]
    return False


def _repair_dense(design: NDArray[np.int64], rng: np.random.Generator, unique_pairs: bool, max_steps: int, deadline: float) -> bool:
    """Small designs: local search with exact subset counts. A swap between a conflicting tuple and a
    random one is kept when it does not raise the cost (a repeated 3-subset costs 1000, a repeated
    pair 1 while `unique_pairs`); pairs are given up when they cannot all be unique. Gives up at
    `deadline` (time.monotonic) too: the same swaps as without one, up to then."""
    from collections import Counter
    from itertools import combinations

    rows = [sorted(r) for r in design.tolist()]
    k = len(rows[0])
    triples: Counter[tuple[int, ...]] = Counter()
    pairs: Counter[tuple[int, ...]] = Counter()
    weight = {"pairs": 1 if unique_pairs else 0}

    def subsets(row: list[int]) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        return list(combinations(row, 3)), list(combinations(row, 2))

    def cost(row: list[int]) -> int:
        if len(set(row)) < k:
            return 10**6
        tri, pa = subsets(row)
        return 1000 * sum(triples[s] - 1 for s in tri) + weight["pairs"] * sum(pairs[s] - 1 for s in pa)

    def move(row: list[int], sign: int) -> None:
        tri, pa = subsets(row)
        for s in tri:
            triples[s] += sign
        for s in pa:
            pairs[s] += sign

    for row in rows:
        move(row, +1)
    hot = [t for t, row in enumerate(rows) if cost(row) > 0]
    for step in range(max_steps):
        if step % 512 == 0 and time.monotonic() > deadline:
            return False
        if unique_pairs and weight["pairs"] and step == max_steps // 2:
            weight["pairs"] = 0
            hot = [t for t, row in enumerate(rows) if cost(row) > 0]
        if not hot:
            design[:] = np.array(rows)
            return True
        pick = int(rng.integers(len(hot)))
        t = hot[pick]
        if cost(rows[t]) == 0:
            hot[pick] = hot[-1]
            hot.pop()
            continue
        u = int(rng.integers(len(rows)))
        if u == t:
            continue
        i, j = int(rng.integers(k)), int(rng.integers(k))
        old_t, old_u = rows[t], rows[u]
        new_t = sorted([*old_t[:i], old_u[j], *old_t[i + 1 :]])
        new_u = sorted([*old_u[:j], old_t[i], *old_u[j + 1 :]])
        if try_swap(rows, t, u, new_t, new_u, cost, move):
            hot.append(u)
    return False


def bws_design(
    n_items: int,
    tuple_size: int = 4,
    appearances: int = 8,
    seed: int = 0,
    unique_pairs: bool = True,
    max_rounds: int = 2000,
) -> NDArray[np.int64]:
    """A BWS design: n_items * appearances / tuple_size tuples (2N for 4-tuples seen 8 times).

    Guarantees: every item appears in exactly `appearances` tuples, never twice in one tuple, and no
    two tuples share more than 2 items (no 3-subset repeats). With `unique_pairs`, it also tries to
    make every pair of items co-occur at most once, falling back to the guarantees alone when that
    is infeasible (few items). Construction: `appearances` random permutations laid end to end and
    cut into tuples, then swaps out of offending tuples until none is left (vectorised random swaps
    for large designs, where conflicts are rare; an exact local search for small, dense ones).
    """
    if tuple_size < 2:
        raise ValueError(f"a tuple holds at least 2 items (--size {tuple_size}); best-worst tuples usually hold 4")
    if appearances < 1:
        raise ValueError(f"each item must be in at least 1 tuple (--k {appearances})")
    if n_items < tuple_size + 1:
        raise ValueError(
            f"{n_items} items are too few: {tuple_size}-tuples need more than {tuple_size} items (at least {tuple_size + 1}, "
            "so that tuples can differ); use more items or a smaller --size"
        )
    if n_items >= 2**21 and tuple_size >= 3:
        raise ValueError("n_items must be below 2**21 (3-subsets are coded in 63 bits)")
    search = (n_items, tuple_size, seed, unique_pairs, max_rounds)
    if (n_items * appearances) % tuple_size:
        raise ValueError(
            f"{n_items} items in {appearances} tuples each fill {n_items * appearances} places, and that must be a multiple of "
            f"tuple_size ({tuple_size}){_advice(*search, appearances, 'change the number of items, --k or --size')}"
        )
    problem = design_size_problem(n_items, n_items * appearances // tuple_size, tuple_size, appearances)
    if problem:
        raise ValueError(problem + _advice(*search, appearances, "use more items or a smaller --k"))
    design, searched = _search(*search, appearances, deadline=math.inf)
    if design is not None:
        return design
    raise RuntimeError(
        f"no design of {tuple_size}-tuples in which no two share more than 2 items was found for {n_items} items "
        f"seen {appearances} times each within {searched}{_advice(*search, appearances, 'use more items or a smaller --k')}"
    )


def _search(
    n_items: int, tuple_size: int, seed: int, unique_pairs: bool, max_rounds: int, appearances: int, deadline: float
) -> tuple[NDArray[np.int64] | None, str]:
    """The design search of `bws_design` on a request its rules accept: (the design or None, what was searched)."""
    # Unique pairs need appearances * (k - 1) distinct partners per item; skip the attempt when impossible.
    unique_pairs = unique_pairs and appearances * (tuple_size - 1) <= n_items - 1
    rng = np.random.default_rng(seed)
    seq = np.concatenate([rng.permutation(n_items) for _ in range(appearances)])
    design = seq.reshape(-1, tuple_size).astype(np.int64)
    steps = min(max_rounds * design.shape[0], MAX_SEARCH_STEPS)
    if n_items <= _DENSE_ITEMS:
        ok = _repair_dense(design, rng, unique_pairs, max_steps=steps, deadline=deadline)
    else:
        ok = _repair_sparse(design, n_items, rng, unique_pairs, max_rounds, deadline=deadline)
    return (design if ok else None), (f"{steps} swaps" if n_items <= _DENSE_ITEMS else f"{max_rounds} rounds of swaps")


def _advice(n_items: int, tuple_size: int, seed: int, unique_pairs: bool, max_rounds: int, asked: int, fix: str) -> str:
    """The tail of a refusal: `fix` and the largest --k below `asked` (any, when none below fills whole tuples) that the
    rules accept and that the search meets with this seed, found within SUGGEST_SECONDS; or that no --k can
    work, when the counting bounds leave none. A suggestion is searched exactly as the command will search it
    (same items, size, seed and step budget, only cut short by the clock), so when it is tried it succeeds.
    Candidates are tried smallest first, doubling, then halving the gap to the first failure (one that runs
    out of time counts as failed): a larger --k that would be met may be missed, never a failing one suggested."""
    search = (n_items, tuple_size, seed, unique_pairs, max_rounds)
    bound = appearance_bound(n_items, tuple_size)
    step = tuple_size // math.gcd(n_items, tuple_size)  # --k must fill whole tuples: a multiple of this
    candidates = list(range(step, min(bound, asked - 1) + 1, step)) or list(range(step, bound + 1, step))
    if not candidates:
        return (
            f"; no --k gives a design of {n_items} items in {tuple_size}-tuples (each item can be in at most {bound}, a counting "
            "bound): use more items or a smaller --size"
        )
    deadline = time.monotonic() + SUGGEST_SECONDS
    best, failed, growing = -1, len(candidates), True  # candidates[best] met; from candidates[failed] on: not met or untried
    while best + 1 < failed and time.monotonic() < deadline:
        at = min(2 * best + 2, failed - 1) if growing else (best + failed) // 2
        if _search(*search, candidates[at], deadline=deadline)[0] is not None:
            best = at
        else:
            failed, growing = at, False
    if best < 0:
        return f"; {fix} (the counting bound is --k {bound}; no --k up to it was met within {SUGGEST_SECONDS} s)"
    return f"; {fix} (--k {candidates[best]} is met here; the counting bound is --k {bound}, which the search may not reach)"


def appearance_bound(n_items: int, tuple_size: int) -> int:
    """The most tuples an item can be in when no two tuples share more than 2 items: a bound, not a promise.

    Two counts bound it (each necessary, neither sufficient). Per item x, its tuples less x share at most one
    other item, so each other item y is with x in at most floor((n - 2) / (k - 2)) tuples, and an item's r
    tuples hold r (k - 1) <= (n - 1) floor((n - 2) / (k - 2)) places (Johnson's bound). Over pairs of tuples,
    each shares at most 2 items, so n C(r, 2) <= 2 C(b, 2) with b = n r / k tuples: r (k^2 - 2n) <= k^2 - 2k
    (which rules out 40 items in 16-tuples for every r > 1). Tuples of 2 have no 3-subset to repeat: only
    MAX_TUPLES bounds them."""
    most = MAX_TUPLES * tuple_size // n_items
    if tuple_size < 3:
        return most
    most = min(most, (n_items - 1) * ((n_items - 2) // (tuple_size - 2)) // (tuple_size - 1))
    square = tuple_size * tuple_size
    if square > 2 * n_items:
        most = min(most, (square - 2 * tuple_size) // (square - 2 * n_items))
    return most


def design_size_problem(n_items: int, n_tuples: int, tuple_size: int, appearances: int | None = None) -> str | None:
    """Why `n_tuples` tuples of `tuple_size` over `n_items` items cannot meet the guarantee that no two tuples
    share more than 2 items, or None. Each tuple holds C(size, 3) 3-item subsets and each 3-subset may be in
    one tuple only, so n_tuples * C(size, 3) <= C(n_items, 3) is necessary (a counting bound, not sufficient:
    the search near the bound may still fail); with `appearances`, also `appearance_bound`. Also refuses
    designs over MAX_TUPLES."""
    if n_tuples > MAX_TUPLES:
        return f"{n_tuples} tuples is more than the {MAX_TUPLES} fsb designs; use a smaller --k"
    if tuple_size < 3:
        return None
    need, have = n_tuples * math.comb(tuple_size, 3), math.comb(n_items, 3)
    if need <= have:
        bound = appearance_bound(n_items, tuple_size)
        if appearances is None or appearances <= bound:
            return None
        return (
            f"{n_items} items in {tuple_size}-tuples of which no two share more than 2 items can be in at most {bound} "
            f"{'tuple' if bound == 1 else 'tuples'} each (a counting bound), not {appearances}"
        )
    return (
        f"{n_tuples} tuples of {tuple_size} items hold {need} 3-item subsets, but {n_items} items have only {have}: "
        "some two tuples would share 3 items (the design lets no two share more than 2)"
    )


def design_report(tuples: ArrayLike, n_items: int | None = None) -> dict[str, Any]:
    """Check a design independently of how it was made: sizes, appearances per item, the largest
    number of items any two tuples share, and how many distinct item pairs meet in more than one tuple."""
    t = np.asarray(tuples, dtype=np.int64)
    if n_items is None:
        n_items = int(t.max(initial=-1)) + 1
    s = np.sort(t, axis=1)
    k = s.shape[1]
    appear = np.bincount(t.ravel(), minlength=n_items)
    dup_in_tuple = int((s[:, 1:] == s[:, :-1]).any(axis=1).sum())

    def repeats(r: int) -> int:
        """How many distinct r-subsets of items occur in more than one tuple."""
        if r > k:
            return 0
        _, counts = np.unique(_combination_codes(s, r, n_items).ravel(), return_counts=True)
        return int(np.count_nonzero(counts > 1))

    max_shared = 1
    for r in range(2, k + 1):
        if repeats(r):
            max_shared = r
    return {
        "n_items": int(n_items),
        "n_tuples": int(t.shape[0]),
        "tuple_size": int(k),
        "appearances_min": int(appear.min()) if appear.size else 0,
        "appearances_max": int(appear.max()) if appear.size else 0,
        "tuples_repeating_an_item": dup_in_tuple,
        "max_shared_items": max_shared,
        "repeated_pairs": repeats(2),
    }


def try_swap(
    rows: list[list[int]],
    t: int,
    u: int,
    new_t: list[int],
    new_u: list[int],
    cost: Callable[[list[int]], int],
    move: Callable[[list[int], int], None],
) -> bool:
    """One move of a design's local search: rows t and u become new_t and new_u if that does not raise
    cost(row t) + cost(row u) once `move` has updated the shared tallies; otherwise the tallies are put back."""
    old_t, old_u = rows[t], rows[u]
    before = cost(old_t) + cost(old_u)
    for row, step in ((old_t, -1), (old_u, -1), (new_t, +1), (new_u, +1)):
        move(row, step)
    if cost(new_t) + cost(new_u) <= before:
        rows[t], rows[u] = new_t, new_u
        return True
    for row, step in ((new_t, -1), (new_u, -1), (old_t, +1), (old_u, +1)):
        move(row, step)
    return False
