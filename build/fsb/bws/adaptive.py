"""Adaptive annotation rounds: plan the next round of best-worst tuples from the judgments so far
(`plan_next_round`; `plan_round` on arrays, `choose_tuples` from any set of candidate tuples; the
information and its bound: `fsb.bws.information`). (size: under 600 lines: the planner, its budget checks,
its report and its file reader read best together.)

The rule: greedy Bayesian A-optimal design for the MaxDiff model (Marley and Louviere 2005; the logit of
`fsb.bws.maxdiff`). One judgment of a tuple S with utilities u_S carries the Fisher information

    J(S) = diag(p) - p p'  +  sum_b p_b [diag(q_b) - q_b q_b'],   p = softmax(u_S), q_b = softmax(-u_{S minus b})

(best choice, then the worst among the rest), averaged over utilities drawn from the items' current
uncertainty (Chaloner and Larntz 1989, "Optimal Bayesian design applied to logistic regression
experiments", J. Statist. Plann. Inference 21). The study's judgments and a Gaussian prior give the
utilities a posterior covariance Sigma = (I + Id / s^2)^-1 (`study_covariance`; Id the identity, I the Fisher information
of every judgment so far). m judgments of S turn it into (Sigma^-1 + m E_S J(S) E_S')^-1, and the tuple's
gain is the drop in summed centred variance tr C Sigma C (C = I - 11'/N: Pearson ignores a common shift),
tr(M (Sigma C Sigma)_SS) with M = (I + m J Sigma_SS)^-1 m J by Woodbury (`fsb.bws.information.covariance_gain`;
A-optimality: Chaloner and Verdinelli 1995, "Bayesian experimental design: a review", Statist. Sci. 10; for
choice designs Kessels, Goos and Vandebroek 2006, J. Marketing Res. 43). The round is greedy in batches:
every candidate's gain is computed, the best tuples sharing no item are taken, Sigma is updated for them
(one rank update) and the gains recomputed. Candidates: around every item i, i and 3 partners drawn from
the items whose utility is within u_i +- 4 sd_i (and +- 8 sd_i), plus 20 uniformly random tuples per item.

Why this rule: Pearson with the truth falls with the summed error variance of the scores, which
A-optimality minimises. The full covariance matters: a tuple of level items informs each of them most,
but a study built only of such tuples ties distant parts of the scale together through long chains, and
their differences stay uncertain while every item's own variance looks small. The covariance sees that,
and buys a long-range tuple when it lowers the summed variance more than a level one (a rule on each
item's variance alone does not: it needed a quarter of every round spent on random tuples to hold the
scale, and reached 0.84x of the fixed design's judgments where this one reaches 0.80x: docs/bws.md).
Sorting by score and grouping neighbours (the naive rule) ignores uncertainty altogether. D-optimality (log
det) counts gains on already-precise items; expected information gain over sampled outcomes (EASL,
Sakaguchi and Van Durme 2018; bandit MaxDiff) costs a simulation per candidate for what the Gaussian
approximation gives in closed form.

Cost: Sigma is N x N (8 N^2 bytes) and a round O(N^2) per batch: 250 tuples over 1,000 items take a few
seconds, 1,000 over 4,000 items about 40 s and 0.8 GB. Above `FULL_ITEMS` items the rule keeps only each
item's variance v_i (the same gain with Sigma = diag v, `variance_drop`, and a quarter of each round,
`SPINE`, uniformly random tuples to hold the scale); the report's `criterion` says which ran.

What it can reach (`fsb.bws.information`, bench_adaptive's `bound` and `oracle` rows): two asymptotic
approximations put a rule knowing the truth at about 0.64x the fixed design's judgments to its Pearson 0.95
after a start of 2 tuples per item, and one knowing only the judgments at about 0.67x, at the release's
noise; this rule told the true utilities (the benchmark's oracle) measures 0.74x, this rule 0.80x.

The estimates planned on: a MaxDiff fit with an empirical-Bayes prior (ridge 1 / s^2, s^2 the spread of
the utilities less their mean squared standard error), so every item has a finite utility. Items whose
score is only a bound keep only the prior (variance s^2, the most any item has, and no covariance), so
they are planned first: never judged, chosen best (or worst) in every judgment that showed them, or
outside the largest connected part of the study (`fsb.bws.bounds.score_bounds`, the rule of every score file).

Guarantees kept: no new tuple shares more than 2 items with any tuple of the whole study (existing or
new: every 3-item subset in one tuple at most), no item twice in a tuple, positions balanced within the
round (`fsb.bws.tuples.balance_positions`). Relaxed by design, and reported: equal appearances per item,
pairs met once, position balance over the whole study (reported per item).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from itertools import combinations
from math import comb
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fsb.bws import maxdiff
from fsb.bws.bounds import score_bounds
from fsb.bws.information import (
    covariance_gain,
    covariance_update,
    expected_information,
    information_matrix,
    tuple_information,
    variance_drop,
)
from fsb.bws.tuples import balance_positions, position_report
from fsb.core.errors import FsbError

__all__ = [
    "choose_tuples",
    "item_uncertainty",
    "plan_next_round",
    "plan_round",
    "score_bounds",
    "study_covariance",
    "tuple_information",
    "variance_drop",
]

WINDOW = 8  # neighbours on each side of an item on the current scale that its candidate tuples draw from
PER_ITEM = 24  # candidate tuples built around each item
REACH = 4.0  # partners are drawn within this many standard deviations of an item's utility
DRAWS = 8  # utility draws averaged in a tuple's expected information
MAX_CANDIDATES = 400_000  # candidates per pass at most (their information is (C, k, k) float64: 26 MB)
PASSES = 4  # candidate passes of a search, each reaching twice as far as the one before
PROGRESS_SECONDS = 10.0  # a progress line at most this often while a round is planned
SPINE = 0.25  # share of a round given to uniformly random tuples on variances alone (N > FULL_ITEMS), which holds the scale
FULL_ITEMS = 4000  # up to this many items the rule works on the full posterior covariance (N x N); beyond it, on variances alone
RANDOM_CANDIDATES = 20  # uniformly random candidate tuples per item in each pass (the full-covariance rule weighs them too)


def item_uncertainty(
    design, best, worst, tuple_index, n_items: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_], float]:
    """(u, v, bound, s2): planning utilities and variances (see the module docstring), the items whose score
    is a bound (any reason of `score_bounds`), and the prior variance s^2 they are given."""
    bounds = score_bounds(design, best, worst, tuple_index, n_items)
    bound = np.logical_or.reduce(list(bounds.values()))
    plain = maxdiff.fit_maxdiff(design, best, worst, tuple_index, n_items)
    ok = ~bound
    s2 = float(np.var(plain.utility[ok]) - np.mean(plain.se[ok] ** 2)) if ok.sum() > 2 else 1.0
    s2 = max(s2, 0.05)
    fit = maxdiff.fit_maxdiff(design, best, worst, tuple_index, n_items, ridge=1.0 / s2)
    v = np.minimum(fit.se**2, s2)
    v[bound] = s2
    return fit.utility, v, bound, s2


def study_covariance(
    design, tuple_index, u, bound, s2: float, n_items: int, pending: NDArray[np.integer] | None = None, m: float = 1.0
) -> NDArray[np.float64]:
    """The planning posterior covariance (N x N): (I + Id / s^2)^-1, Id the identity and I the Fisher information of the study's
    judgments at the planning utilities u (`information_matrix`). A bound item keeps only the prior (its row and
    column of I dropped), so its variance is s^2, the most any item has, as in `item_uncertainty`. pending: tuples
    designed but not judged yet (item codes), added as if judged m times each: the round is planned for the study
    as it will be once they are judged, so items they cover are not planned again as if never shown."""
    design = np.asarray(design, dtype=np.int64)
    per_tuple = np.bincount(np.asarray(tuple_index, dtype=np.int64), minlength=len(design))
    precision = information_matrix(u, design, per_tuple)
    out = np.flatnonzero(bound)
    precision[out, :] = 0.0
    precision[:, out] = 0.0
    if pending is not None and len(pending):
        precision += information_matrix(u, np.asarray(pending, dtype=np.int64), m)
    precision[np.diag_indices(n_items)] += 1.0 / s2
    return np.linalg.inv(precision)


def _subsets(row, r: int = 3) -> list[tuple[int, ...]]:
    return list(combinations(sorted(int(i) for i in row), r))


def candidate_tuples(
    u, v, k: int, rng: np.random.Generator, reach: float = REACH, window: int = WINDOW, per_item: int = PER_ITEM
) -> NDArray[np.int64]:
    """Candidate tuples (C, k) around every item i: i and k - 1 partners drawn uniformly from the items whose
    current utility lies within u_i +- reach * sqrt(v_i) (at least `window` neighbours on each side): the
    items i may truly be level with. An item whose score is a bound has v_i = s^2: its partners spread
    over most of the scale, as the anchors of `fsb tuples --extend` do."""
    n = u.size
    order = np.lexsort((np.arange(n), u))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    su = u[order]
    reach_u = reach * np.sqrt(v)
    lo = np.minimum(np.searchsorted(su, u - reach_u, side="left"), np.maximum(rank - window, 0))
    hi = np.maximum(np.searchsorted(su, u + reach_u, side="right") - 1, np.minimum(rank + window, n - 1))
    anchors = np.repeat(np.arange(n), per_item)
    span = (hi - lo + 1)[anchors]
    partner_rank = lo[anchors][:, None] + (rng.random((anchors.size, k - 1)) * span[:, None]).astype(np.int64)
    out = np.concatenate([anchors[:, None], order[partner_rank]], axis=1)
    out.sort(axis=1)
    ok = (out[:, 1:] != out[:, :-1]).all(axis=1)
    return np.unique(out[ok], axis=0)


def choose_tuples(
    candidates,
    u,
    v,
    budget: int,
    m: float,
    used: set[tuple[int, ...]],
    rounds: int = 16,
    info: NDArray[np.float64] | None = None,
    on_batch: Callable[[int], None] | None = None,
    cov: NDArray[np.float64] | None = None,
) -> tuple[list[list[int]], NDArray[np.float64]]:
    """Up to `budget` of the candidate tuples (item codes), greedily by the variance drop, skipping any that
    holds a 3-subset in `used` (updated in place). Returns the tuples and the variances after them (v
    updated as if each chosen tuple were judged m times).

    cov: the posterior covariance (`study_covariance`, updated in place): the drop is then that of the summed
    centred variance over all items (`covariance_gain`), and each chosen tuple updates the whole matrix; None:
    the drop of its own items' variances alone (`variance_drop`, v the diagonal).

    Greedy in batches: every gain is computed (one batched 4x4 inverse per candidate, J(S) once: u is
    fixed within a round), the best tuples sharing no item are taken (about budget / `rounds` of them),
    the variances updated, and the gains recomputed (a gain only falls as variances fall). With v alone,
    tuples of one batch share no item, so each gain in it is exact; with cov they may still share
    covariance, and a batch's later gains are slightly optimistic. on_batch: called with the count chosen
    after each batch (progress)."""
    cand = np.asarray(candidates, dtype=np.int64)
    v = np.array(v, dtype=np.float64)
    if info is None:
        info = tuple_information(u[cand]) if len(cand) else np.zeros((0, 1, 1))
    alive = np.ones(len(cand), dtype=bool)
    batch = max(1, min(-(-budget // rounds), u.size // (2 * cand.shape[1]) if len(cand) else 1))
    chosen: list[list[int]] = []
    centred_sq = cov @ (cov - cov.mean(axis=0, keepdims=True)) if cov is not None else None  # Sigma C Sigma, kept up to date
    while len(chosen) < budget and alive.any():
        idx = np.flatnonzero(alive)
        if cov is None:
            gain, new_v = variance_drop(v[cand[idx]], info[idx], m)
        else:
            gain = covariance_gain(cov, centred_sq, cand[idx], info[idx], m)
        taken: set[int] = set()
        batch_rows: list[int] = []
        took = 0
        for j in np.argsort(-gain, kind="stable").tolist():
            if took >= batch or len(chosen) >= budget:
                break
            row = cand[idx[j]].tolist()
            if taken.intersection(row):
                continue
            alive[idx[j]] = False
            triples = _subsets(row)
            if any(s in used for s in triples):
                continue
            chosen.append(row)
            used.update(triples)
            taken.update(row)
            if cov is None:
                v[cand[idx[j]]] = new_v[j]
            else:
                batch_rows.append(idx[j])
            took += 1
        if not took:
            break
        if cov is not None:  # the batch's tuples share no item: one joint update, equal to updating them in turn
            covariance_update(cov, cand[batch_rows], info[batch_rows], m, centred_sq)
            batch_rows.clear()
        if on_batch is not None:
            on_batch(len(chosen))
    if cov is not None:
        v = np.diag(cov).copy()
    return chosen, v


def _random_fill(n: int, k: int, need: int, used: set[tuple[int, ...]], rng: np.random.Generator, tries: int) -> list[list[int]]:
    """Up to `need` uniformly random tuples keeping the 3-subset guarantee (the fallback of `plan_round`)."""
    out: list[list[int]] = []
    for _ in range(tries):
        if len(out) >= need:
            break
        row = sorted(int(i) for i in rng.choice(n, size=k, replace=False))
        triples = _subsets(row)
        if not any(s in used for s in triples):
            out.append(row)
            used.update(triples)
    return out


def plan_round(
    design,
    best,
    worst,
    tuple_index,
    n_items: int,
    budget: int,
    seed: int = 0,
    *,
    m: float | None = None,
    reach: float = REACH,
    draws: int = DRAWS,
    spine: float | None = None,
    full_items: int = FULL_ITEMS,
    pending: NDArray[np.integer] | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[NDArray[np.int64], dict[str, Any]]:
    """The next round on arrays: `budget` new tuples (item codes, shape (budget, k), position-balanced) for a
    study whose distinct tuples are `design` and whose judgment j chose best[j], worst[j] in
    design[tuple_index[j]]. m: judgments each new tuple will get (default: the mean so far); reach and
    draws: of `candidate_tuples` and `expected_information`; spine: the share of random tuples (None: 0 on the
    full covariance, SPINE on variances alone); full_items: the
    most items planned on the full covariance (beyond: variances alone); pending:
    the study's tuples not judged yet (item codes), held to the same at-most-2-shared-items rule; progress:
    called with a line every PROGRESS_SECONDS of a long search (the CLI prints them on stderr). Seeded.

    Raises FsbError (one line) for a budget that cannot be met. Returns the tuples and a report."""
    design = np.asarray(design, dtype=np.int64)
    if design.ndim != 2 or len(best) == 0:
        raise FsbError("no judgments yet: plan the first round with `fsb tuples`, then adapt from its judgments")
    k = design.shape[1]
    if pending is not None and len(pending):  # a pending tuple already judged (or listed twice) is one tuple of the study
        judged = {tuple(r) for r in np.sort(design, axis=1).tolist()}
        rows = {tuple(r) for r in np.sort(np.asarray(pending, dtype=np.int64), axis=1).tolist()} - judged
        pending = np.array(sorted(rows), dtype=np.int64).reshape(-1, k)
    held = design if pending is None or not len(pending) else np.concatenate([design, pending])
    problem = _budget_problem(held, n_items, budget, k)
    if problem:
        raise FsbError(problem)
    used = {s for row in held.tolist() for s in _subsets(row)}
    existing_subsets = len(used)
    per_tuple = np.bincount(np.asarray(tuple_index, dtype=np.int64), minlength=len(design))
    if m is None:
        m = float(per_tuple[per_tuple > 0].mean()) if per_tuple.any() else 1.0
    u, v, bound, s2 = item_uncertainty(design, best, worst, tuple_index, n_items)
    waiting = held[len(design) :]  # pending tuples: designed, not judged yet; planned as if judged m times each
    if n_items <= full_items:
        cov = study_covariance(design, tuple_index, u, bound, s2, n_items, pending=waiting, m=m)
    else:
        cov = None
        if len(waiting):
            per_item = m * np.diagonal(tuple_information(u[waiting]), axis1=1, axis2=2)  # no N x N matrix above FULL_ITEMS
            v = 1.0 / (1.0 / v + np.bincount(waiting.ravel(), weights=per_item.ravel(), minlength=n_items))
    if spine is None:  # the full covariance weighs random candidates itself; variances alone need the spine to hold the scale
        spine = 0.0 if cov is not None else SPINE
    search = dict(u=u, v=v, cov=cov, k=k, m=m, reach=reach, draws=draws, spine=spine, seed=seed, progress=progress)
    began = time.monotonic()
    chosen, n_spine, n_random = _search(budget, set(used), **search)
    if len(chosen) < budget:
        raise FsbError(_shortfall(budget, len(chosen), used, search))
    if progress is not None and time.monotonic() - began >= PROGRESS_SECONDS:  # the checks below take as long again
        progress(f"planning: {budget:,} tuples chosen; balancing positions and checking the study's guarantees")
    codes = balance_positions(np.array(chosen, dtype=np.int64), n_items, seed=seed)
    report = _report(design, codes, n_items, bound, score_bounds(design, best, worst, tuple_index, n_items), s2, m, n_random)
    report["study_3subsets_before"] = existing_subsets
    report["spine_tuples"] = n_spine
    report["criterion"] = (
        "summed centred posterior variance, full covariance"
        if cov is not None
        else f"summed variance of each tuple's items (over {full_items:,} items)"
    )
    report["pending_tuples"] = len(held) - len(design)
    if len(held) > len(design):  # the pending tuples are part of the study the guarantee is checked on
        from fsb.bws.designs import design_report

        whole = np.concatenate([held, np.sort(codes, axis=1)])
        report["max_shared_items_study"] = int(design_report(whole, n_items)["max_shared_items"])
        report["max_shared_items_new_with_study"] = _max_shared_new(held, codes)
    return codes, report


def _search(
    budget: int, used: set[tuple[int, ...]], *, u, v, cov, k: int, m: float, reach: float, draws: int, spine: float, seed: int, progress
):
    """(tuples, spine tuples, random fill) of one seeded search for `budget` tuples: the random spine, then up
    to PASSES passes of candidates (each reaching twice as far; with the full covariance, uniformly random
    candidates too), then random tuples; `used` is updated in place. cov: None (variances alone) or the
    posterior covariance, copied. progress: None or called with a line every PROGRESS_SECONDS while the search runs."""
    n_items = u.size
    rng = np.random.default_rng(seed)
    n_spine = round(spine * budget)
    chosen = _random_fill(n_items, k, n_spine, used, rng, tries=50 * max(n_spine, 1)) if n_spine else []
    if cov is not None:
        cov = cov.copy()
        if chosen:  # the spine's tuples inform the covariance the rest is chosen on
            spine_rows = np.array(chosen, dtype=np.int64)
            for row, info in zip(spine_rows, expected_information(u[spine_rows], v[spine_rows], rng, draws)):
                covariance_update(cov, row[None], info[None], m)
            v = np.diag(cov).copy()
    start = last = time.monotonic()

    def tick(done: int) -> None:
        nonlocal last
        now = time.monotonic()
        if progress is not None and now - last >= PROGRESS_SECONDS:
            last = now
            progress(f"planning: {len(chosen) + done:,} of {budget:,} tuples chosen, pass {passes + 1} of {PASSES} ({now - start:.0f} s)")

    passes = 0
    while len(chosen) < budget and passes < PASSES:
        per_item = _per_item(n_items)
        cand = candidate_tuples(u, v, k, rng, reach=reach * 2**passes, per_item=per_item)
        if cov is not None:  # the covariance tells when a long-range tuple is worth more than a level one
            wide = candidate_tuples(u, v, k, rng, reach=reach * 2 ** (passes + 1), per_item=per_item)
            spread = _random_rows(n_items, k, RANDOM_CANDIDATES * n_items, rng)
            cand = np.unique(np.concatenate([cand, wide, spread]), axis=0)
        info = expected_information(u[cand], v[cand], rng, draws)
        more, v = choose_tuples(cand, u, v, budget - len(chosen), m, used, info=info, on_batch=tick, cov=cov)
        chosen += more
        passes += 1
    n_random = budget - len(chosen)
    if n_random:
        chosen += _random_fill(n_items, k, n_random, used, rng, tries=50 * n_random)
    return chosen, n_spine, n_random


def _random_rows(n: int, k: int, count: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """`count` uniformly random k-tuples of distinct items out of n (sorted rows)."""
    rows = rng.integers(0, n, size=(count, k))
    rows.sort(axis=1)
    return rows[(rows[:, 1:] != rows[:, :-1]).all(axis=1)]


def _shortfall(budget: int, found: int, used: set[tuple[int, ...]], search: dict[str, Any]) -> str:
    """The one-line refusal of a search that came short, with a count that works: a second search (same seed)
    for the count found either meets it (then that count is checked for this seed) or finds fewer still (near
    the limit each search leaves more 3-subsets unusable), and then about 80% of its count is suggested, as
    an estimate. Searches find fewer than the counting bound allows: 20 items, 245 asked, 169 found, 158 at 169."""
    k, n_items = search["k"], search["u"].size
    head = f"this search found only {found} of {budget} new {k}-tuples over {n_items} items sharing at most 2 items with the study's"
    if not found:
        return f"this search found no new {k}-tuple over {n_items} items sharing at most 2 items with the study's tuples: add items"
    again = len(_search(found, set(used), **search)[0])
    if found and again == found:
        return f"{head}; ask for at most {found} (a search for {found} with this seed succeeds), or add items"
    suggest = max(1, int(0.8 * again))
    return f"{head}, and {again} when asked for {found}; ask for about {suggest} (80% of that, an estimate, not checked), or add items"


def _per_item(n_items: int) -> int:
    """Candidate tuples built around each item in one pass."""
    return max(2, min(PER_ITEM, MAX_CANDIDATES // n_items))


def _budget_problem(design: NDArray[np.int64], n_items: int, budget: int, k: int) -> str | None:
    """Why `budget` new k-tuples cannot be planned, or None. Two bounds: the round cannot be larger than the
    candidates the planner builds (PASSES x `_per_item` per item: beyond them it would only draw random
    tuples, slowly; 3,000,000 tuples over 1,100 items ran for minutes), and a counting bound: each new tuple
    needs C(k, 3) 3-item subsets no tuple of the study holds yet."""
    if budget < 1:
        return f"--budget must be at least 1 new tuple, got {budget}"
    if k < 3:
        return f"adaptive rounds need tuples of at least 3 items (the study's have {k})"
    if n_items < k + 1:
        return f"{n_items} items are too few for new {k}-tuples (at least {k + 1})"
    pool = PASSES * _per_item(n_items) * n_items
    if budget > pool:
        return (
            f"a round of {budget:,} tuples is more than the {pool:,} candidates the planner builds over {n_items} items "
            f"({PASSES} passes of {_per_item(n_items)} per item): plan at most {pool:,}, have them judged, then plan the next round"
        )
    taken = len({s for row in design.tolist() for s in _subsets(row)})
    free = comb(n_items, 3) - taken
    if free < comb(k, 3):
        have = f"{n_items} items have only {free} 3-item subsets that no tuple of the study holds"
        return f"no new {k}-tuple fits: {have}, a tuple needs {comb(k, 3)}; add items"
    if budget * comb(k, 3) > free:
        return (
            f"{budget} new {k}-tuple{'s need' if budget > 1 else ' needs'} {budget * comb(k, 3)} 3-item subsets that no tuple of the "
            f"study holds, but {n_items} items "
            f"have only {free} left: some tuple would share 3 items with another; ask for at most {free // comb(k, 3)} (a counting "
            "bound: a search may find fewer)"
        )
    return None


def _report(design, codes, n_items: int, bound, bounds: dict[str, NDArray[np.bool_]], s2: float, m: float, n_random: int) -> dict[str, Any]:
    """What the round kept and relaxed, checked on the tuples themselves."""
    from fsb.bws.designs import design_report

    whole = np.concatenate([design, np.sort(codes, axis=1)]) if len(design) else np.sort(codes, axis=1)
    study = design_report(whole, n_items)
    new = design_report(codes, n_items)
    in_round = np.bincount(codes.ravel(), minlength=n_items)
    relaxed = ["equal appearances per item (the rule spends tuples where scores are uncertain)"]
    if new["repeated_pairs"] or study["repeated_pairs"]:
        relaxed.append(f"pairs met once ({study['repeated_pairs']} item pairs of the whole study meet in more than one tuple)")
    relaxed.append("position balance over the whole study (balanced within the round only)")
    if n_random:
        relaxed.append(f"{n_random} tuples chosen at random (the information-seeking candidates ran out)")
    return {
        "rule": "greedy A-optimal MaxDiff design (fsb.bws.adaptive)",
        "new_tuples": len(codes),
        "tuple_size": int(codes.shape[1]),
        "judgments_per_tuple_assumed": round(float(m), 4),
        "prior_variance": round(s2, 4),
        "bound_items": {name: int(mask.sum()) for name, mask in bounds.items()},
        "bound_items_in_round": int((bound & (in_round > 0)).sum()),
        "items_in_round": int((in_round > 0).sum()),
        "appearances_in_round_max": int(in_round.max(initial=0)),
        "max_shared_items_study": int(study["max_shared_items"]),
        "max_shared_items_new_with_study": _max_shared_new(design, codes),
        "positions": position_report(codes, n_items, items=in_round > 0),
        "random_fill": int(n_random),
        "relaxed": relaxed,
        "caveats": list(CAVEATS),
    }


CAVEATS = [  # measured by benchmarks/bench_adaptive.py (docs/bws.md, Adaptive rounds)
    "score the study with --method maxdiff: counting is biased once tuples are chosen by score",
    "per-item MaxDiff intervals covered about 85%, not 95%, on adaptive rounds in a simulation fitted to the release "
    "(1.37x wider would cover 95%)",
    "no reliability from the study's own judgments measures it: fsb reliability (counting) reads low on adaptive rounds, "
    "a MaxDiff split-half high; check it against fresh judgments (docs/bws.md, Adaptive rounds)",
]


def _max_shared_new(design, codes) -> int:
    """The most items a new tuple shares with any other tuple of the study (existing or new)."""
    where: dict[int, list[int]] = {}
    rows = [*design.tolist(), *codes.tolist()]
    for t, row in enumerate(rows):
        for item in row:
            where.setdefault(item, []).append(t)
    best = 0
    for t in range(len(design), len(rows)):
        hits: dict[int, int] = {}
        for item in rows[t]:
            for o in where[item]:
                if o != t:
                    hits[o] = hits.get(o, 0) + 1
        best = max(best, max(hits.values(), default=0))
    return best


def plan_next_round(
    judgments: str | os.PathLike[str],
    items: str | os.PathLike[str] | None,
    budget: int,
    seed: int = 0,
    *,
    invalid: str = "refuse",
    designs: Sequence[str | os.PathLike[str]] = (),
    progress: Callable[[str], None] | None = None,
) -> tuple[NDArray[Any], dict[str, Any]]:
    """The next round for a study: `budget` new tuples (item labels, shape (budget, k), in the order to show)
    from the judgments file (Item1..ItemK,BestItem,WorstItem[,Annotator]), the study's items (a number N for
    items 1..N, an item list or generations file; None: the items of the judgments and designs) and its design files (`fsb tuples`
    output: tuple_id,Item1..ItemK; their tuples not judged yet are pending). Items never judged are planned
    first; pending tuples are held to the at-most-2-shared-items rule. The report adds first_tuple_id: one
    past the largest tuple id the designs use, and at least the number of distinct tuples judged (a
    judgments file carries no tuple ids), and tuple_ids_seen, saying which. Seeded."""
    from fsb.bws.coded import encode
    from fsb.bws.tuples import read_design
    from fsb.core.readers import InputError
    from fsb.tables.items import read_items
    from fsb.tables.judgments import read_annotations

    if invalid == "count":
        raise InputError(judgments, "adaptive rounds cannot take --invalid count (the MaxDiff fit has no such rows); use drop or refuse")
    ann = read_annotations(Path(judgments), invalid=invalid)  # type: ignore[arg-type]
    k = ann.item_codes.shape[1]
    read = [(Path(d), read_design(d)) for d in designs]
    for path, frame in read:
        if frame.shape[1] - 1 != k:
            raise InputError(path, f"its tuples have {frame.shape[1] - 1} items, the judgments of {judgments} {k}")
    integer = ann.labels.dtype.kind in "iu"
    design_labels = [frame.drop(columns="tuple_id").to_numpy() for _, frame in read]
    for (path, _), lab in zip(read, design_labels):
        if len(lab) and (lab.dtype.kind in "iu") != integer:
            raise InputError(path, f"its item ids and the labels of {judgments} must both be integers or both be strings")
    labels = np.unique(np.concatenate([ann.labels, *(lab.ravel() for lab in design_labels)])) if design_labels else ann.labels
    if items is not None:
        text = str(items)
        ids = np.arange(1, int(text) + 1) if text.isascii() and text.isdigit() else read_items(items).ids  # N: items 1..N, as fsb tuples
        if not ids.size:
            raise InputError(items, "a study needs at least 1 item, got 0")
        if (ids.dtype.kind in "iu") != integer:
            raise InputError(items, f"the item ids and the labels of {judgments} must both be integers or both be strings")
        sources = [(judgments, ann.labels, "judged"), *((path, lab.ravel(), "in a tuple") for (path, _), lab in zip(read, design_labels))]
        for source, have, how in sources:
            unknown = np.setdiff1d(have, ids)
            if unknown.size:
                raise InputError(source, f"item {unknown.tolist()[0]!r} is {how} but not in {items}")
        labels = np.unique(ids)
    coded = encode(ann, labels=labels)
    judged = {tuple(r) for r in np.sort(coded.design, axis=1).tolist()}
    pending = [r for lab in design_labels for r in np.sort(np.searchsorted(labels, lab), axis=1).tolist() if tuple(r) not in judged]
    pending_codes = np.unique(np.array(pending, dtype=np.int64).reshape(-1, k), axis=0)
    top = max((int(frame["tuple_id"].max()) for _, frame in read if len(frame)), default=-1)
    first = max(top + 1, len(coded.design))
    seen = f"{len(coded.design)} distinct tuples judged in {judgments} (a judgments file carries no tuple ids)"
    if read:
        seen += f"; tuple ids up to {top} in {', '.join(str(p) for p, _ in read)} ({len(pending_codes)} of their tuples not judged yet)"
    else:
        seen += "; no design file given (--design): ids of tuples not judged yet are unknown, and may collide"
    codes, report = plan_round(
        coded.design, coded.best, coded.worst, coded.tuple_index, coded.n_items, budget, seed, pending=pending_codes, progress=progress
    )
    return coded.labels[codes], {**report, "first_tuple_id": first, "tuple_ids_seen": seen, "seed": seed}
