"""Adaptive rounds (issue 30): the planner keeps the whole study's at-most-2-shared guarantee, balances
positions within the round, is deterministic for a seed, refuses impossible budgets in one line, plans
bound and never-judged items first, and its tuples carry more information than random ones (the
information itself: test_information)."""

from __future__ import annotations

import re
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fsb import bws
from fsb.bws import adaptive, information
from fsb.bws.tuples import read_design
from fsb.core.errors import FsbError


def _study(n: int, appearances: int = 4, seed: int = 0, per_tuple: int = 3):
    """A judged study: a design over n items, per_tuple MaxDiff judgments of each tuple (utility = item code / n)."""
    design = bws.bws_design(n, 4, appearances, seed=seed)
    rng = np.random.default_rng(seed)
    ti = np.repeat(np.arange(len(design)), per_tuple)
    u = 3.0 * np.arange(n) / n
    rows = design[ti]
    x = u[rows]
    b = np.argmax(x + rng.gumbel(size=x.shape), axis=1)
    y = -x + rng.gumbel(size=x.shape)
    y[np.arange(len(b)), b] = -np.inf
    w = np.argmax(y, axis=1)
    return design, rows[np.arange(len(b)), b], rows[np.arange(len(b)), w], ti


def _max_shared(tuples: np.ndarray, first_new: int) -> int:
    """Brute force: the most items a tuple from index first_new on shares with any other tuple."""
    sets = [set(r) for r in tuples.tolist()]
    return max(len(sets[i] & sets[j]) for i in range(first_new, len(sets)) for j in range(len(sets)) if i != j)


def test_no_new_tuple_shares_three_items_with_any_tuple_of_the_whole_study() -> None:
    """A dense study (14 items: 364 3-subsets, 56 taken by the existing 14 tuples): a planner that checked
    only the new tuples among themselves, or only the existing ones, would share 3 items somewhere here."""
    design, best, worst, ti = _study(14)
    codes, report = adaptive.plan_round(design, best, worst, ti, 14, 30, seed=3)
    assert codes.shape == (30, 4)
    assert (np.sort(codes, axis=1)[:, 1:] != np.sort(codes, axis=1)[:, :-1]).all()  # no item twice in a tuple
    assert _max_shared(np.concatenate([design, codes]), len(design)) <= 2
    assert report["max_shared_items_new_with_study"] <= 2


def test_positions_are_balanced_within_the_round() -> None:
    design, best, worst, ti = _study(40)
    codes, report = adaptive.plan_round(design, best, worst, ti, 40, 24, seed=1)
    counts = np.stack([np.bincount(codes[:, p], minlength=40) for p in range(4)], axis=1)
    shown = counts.sum(axis=1) > 0
    spread = counts[shown].max(axis=1) - counts[shown].min(axis=1)
    assert spread.max() <= 1  # each item in each position floor or ceil of its appearances / 4
    assert report["positions"]["items_spread_max"] == int(spread.max())
    assert (np.diff(codes, axis=1) > 0).all(axis=1).sum() < len(codes)  # not left in sorted order


def test_deterministic_for_a_seed_and_seeded() -> None:
    design, best, worst, ti = _study(40)
    a, ra = adaptive.plan_round(design, best, worst, ti, 40, 20, seed=7)
    b, rb = adaptive.plan_round(design, best, worst, ti, 40, 20, seed=7)
    c, _ = adaptive.plan_round(design, best, worst, ti, 40, 20, seed=8)
    assert np.array_equal(a, b) and ra == rb
    assert not np.array_equal(a, c)


@pytest.mark.parametrize(
    ("budget", "words"),
    [(0, "at least 1 new tuple"), (-3, "at least 1 new tuple"), (400, "ask for at most"), (10**6, "plan at most 1,344")],
)
def test_an_impossible_budget_is_refused_in_one_line(budget: int, words: str) -> None:
    design, best, worst, ti = _study(14)
    with pytest.raises(FsbError) as e:
        adaptive.plan_round(design, best, worst, ti, 14, budget)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_the_counting_bound_is_exact_at_the_edge() -> None:
    """14 items hold 364 3-subsets; the study takes some: one tuple more than the free subsets allow is
    refused, and the largest budget the message offers is planned (or refused for the search, never
    silently short)."""
    design, best, worst, ti = _study(14)
    taken = len({c for r in design.tolist() for c in combinations(sorted(r), 3)})
    most = (364 - taken) // 4
    with pytest.raises(FsbError, match=f"ask for at most {most}"):
        adaptive.plan_round(design, best, worst, ti, 14, most + 1)
    try:
        codes, _ = adaptive.plan_round(design, best, worst, ti, 14, most)
    except FsbError as e:
        message = str(e)
    else:
        message = "this search found only"
        assert len(codes) == most and _max_shared(np.concatenate([design, codes]), len(design)) <= 2
    assert "this search found only" in message


def test_no_judgments_is_refused() -> None:
    with pytest.raises(FsbError, match="no judgments yet"):
        adaptive.plan_round(np.zeros((0, 4), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 10, 2)


def test_bound_and_never_judged_items_are_the_most_uncertain_and_planned_first() -> None:
    """Items 36..39 are never judged, item 35 is chosen best in every judgment showing it: all five get the
    largest planning variance (a planner reading the ridge-limited fit would call item 35 certain), and a
    round of 3 tuples (12 places for 40 items) holds every one of them."""
    design, best, worst, ti = _study(40)
    keep = ~np.isin(design, [36, 37, 38, 39]).any(axis=1)
    old = np.flatnonzero(keep)
    design = design[keep]
    sel = np.isin(ti, old)
    ti = np.searchsorted(old, ti[sel])
    best, worst = best[sel].copy(), worst[sel].copy()
    shows = (design[ti] == 35).any(axis=1)
    best[shows] = 35
    worst[shows & (worst == 35)] = design[ti[shows & (worst == 35)]][:, 0]
    worst = np.where((worst == best), np.where(design[ti][:, 1] != best, design[ti][:, 1], design[ti][:, 2]), worst)
    bounds = adaptive.score_bounds(design, best, worst, ti, 40)
    assert bounds["never"].sum() == 4 and bounds["always_best"][35] and bounds["always_best"].sum() == 1
    _, v, bound, s2 = adaptive.item_uncertainty(design, best, worst, ti, 40)
    assert set(np.flatnonzero(bound)) == {35, 36, 37, 38, 39}
    assert np.all(v[bound] == s2) and v[~bound].max() < s2
    codes, report = adaptive.plan_round(design, best, worst, ti, 40, 3, seed=0)
    assert {35, 36, 37, 38, 39} <= set(codes.ravel().tolist())
    assert report["bound_items_in_round"] == 5


def test_the_planned_round_carries_more_information_than_random_tuples() -> None:
    """On a study whose utilities spread over 3 logit units, the planned tuples (a quarter of them random by
    design) carry clearly more Fisher information at the truth than the fixed design's random tuples: a
    rule that ignored the scores, or chose the widest tuples, fails here."""
    n = 200
    design, best, worst, ti = _study(n, appearances=4, per_tuple=3)
    truth = 3.0 * np.arange(n) / n  # the utilities `_study` judged with
    codes, _ = adaptive.plan_round(design, best, worst, ti, n, 100, seed=0)
    planned = information.mean_information(truth, codes)
    fixed = information.mean_information(truth, bws.bws_design(n, 4, 2, seed=7))
    assert planned > 1.05 * fixed  # 1.28 against 1.18 (the most any tuple can carry: 1.42)


def test_plan_next_round_reads_files_and_plans_items_never_judged(tmp_path: Path) -> None:
    """The judgments file holds items 1..20; the item list adds 21..24, never judged: the round (labels, not
    codes) holds them, and a judged label missing from the item list is refused in one line."""
    design, best, worst, ti = _study(20)
    rows = design[ti] + 1
    lines = ["Item1,Item2,Item3,Item4,BestItem,WorstItem"]
    lines += [",".join(map(str, [*r, b + 1, w + 1])) for r, b, w in zip(rows.tolist(), best.tolist(), worst.tolist())]
    judgments = tmp_path / "judgments.csv"
    judgments.write_text("\n".join(lines) + "\n")
    items = tmp_path / "items.txt"
    items.write_text("\n".join(str(i) for i in range(1, 25)) + "\n")
    tuples, report = adaptive.plan_next_round(judgments, items, 6, seed=2)
    assert tuples.shape == (6, 4) and {21, 22, 23, 24} <= set(tuples.ravel().tolist())
    assert tuples.min() >= 1 and tuples.max() <= 24
    assert report["first_tuple_id"] == len(design) and report["bound_items"]["never"] == 4
    assert (
        any("--method maxdiff" in c for c in report["caveats"])
        and any("85%" in c for c in report["caveats"])
        and any("reads low" in c for c in report["caveats"])
    )
    frame = pd.DataFrame(tuples, columns=[f"Item{j + 1}" for j in range(4)])
    frame.insert(0, "tuple_id", report["first_tuple_id"] + np.arange(len(frame)))
    frame.to_csv(tmp_path / "next.csv", index=False)
    assert read_design(tmp_path / "next.csv")["tuple_id"].tolist() == list(range(len(design), len(design) + 6))  # the design layout
    with pytest.raises(FsbError, match="cannot take --invalid count"):
        adaptive.plan_next_round(judgments, items, 6, invalid="count")
    short = tmp_path / "short.txt"
    short.write_text("\n".join(str(i) for i in range(2, 25)) + "\n")
    with pytest.raises(FsbError, match="not in") as e:
        adaptive.plan_next_round(judgments, short, 6)
    assert "\n" not in str(e.value)


def test_next_round_ids_start_after_the_designs_and_pending_tuples_keep_the_rule(tmp_path: Path) -> None:
    """A1: a design of 30 tuples over 15 items, only its first 20 judged. New ids start at 30, not at 20
    (the 20 distinct tuples judged: ids 20..29 would name two tuples), and no new tuple shares 3 items with
    a pending tuple (dense: 15 items hold 455 3-subsets, the 30 tuples take 120)."""
    n = 15
    design = bws.bws_design(n, 4, 8, seed=1)
    assert len(design) == 30
    frame = pd.DataFrame(design + 1, columns=[f"Item{j + 1}" for j in range(4)])
    frame.insert(0, "tuple_id", np.arange(30))
    frame.to_csv(tmp_path / "round1.csv", index=False)
    rng = np.random.default_rng(0)
    rows = design[np.repeat(np.arange(20), 2)]  # tuples 0..19 judged twice each, 20..29 pending
    b = rows[np.arange(len(rows)), rng.integers(0, 4, len(rows))]
    w = np.where(rows[:, 0] != b, rows[:, 0], rows[:, 1])
    lines = ["Item1,Item2,Item3,Item4,BestItem,WorstItem"] + [",".join(map(str, [*r + 1, x + 1, y + 1])) for r, x, y in zip(rows, b, w)]
    (tmp_path / "j.csv").write_text("\n".join(lines) + "\n")
    tuples, report = adaptive.plan_next_round(tmp_path / "j.csv", None, 20, seed=0, designs=[tmp_path / "round1.csv"])
    assert report["first_tuple_id"] == 30 and report["pending_tuples"] == 10
    assert "tuple ids up to 29" in report["tuple_ids_seen"] and "10 of their tuples not judged yet" in report["tuple_ids_seen"]
    assert _max_shared(np.concatenate([design + 1, tuples]), len(design)) <= 2
    assert report["max_shared_items_new_with_study"] <= 2
    _, alone = adaptive.plan_next_round(tmp_path / "j.csv", None, 20, seed=0)
    assert alone["first_tuple_id"] == 20 and "no design file given" in alone["tuple_ids_seen"]
    other = tmp_path / "other.csv"
    other.write_text("tuple_id,Item1,Item2,Item3,Item4\n0,1,2,3,99\n")
    with pytest.raises(FsbError, match="99 is in a tuple but not in"):
        adaptive.plan_next_round(tmp_path / "j.csv", _items(tmp_path, n), 4, designs=[other])


def _items(folder: Path, n: int) -> Path:
    path = folder / "items.txt"
    path.write_text("\n".join(str(i) for i in range(1, n + 1)) + "\n")
    return path


def test_a_short_search_suggests_a_count_that_works() -> None:
    """A4: 20 items, 245 tuples asked: the search finds 169, but asking for 169 found only 158 (and so on):
    the refusal now suggests a count and says whether it was checked; the count it suggests is planned
    (same seed) or, when only estimated, the message says so."""
    design, best, worst, ti = _study(20)
    with pytest.raises(FsbError) as e:
        adaptive.plan_round(design, best, worst, ti, 20, 245, seed=0)
    message = str(e.value)
    assert message.startswith("this search found only") and "\n" not in message
    checked = re.search(r"ask for at most (\d+) \(a search for \1 with this seed succeeds\)", message)
    estimate = re.search(r"ask for about (\d+) \(80% of that, an estimate, not checked\)", message)
    assert checked or estimate, message
    count = int((checked or estimate).group(1))
    codes, _ = adaptive.plan_round(design, best, worst, ti, 20, count, seed=0)
    assert len(codes) == count and _max_shared(np.concatenate([design, codes]), len(design)) <= 2


def test_a_huge_round_is_refused_at_once_and_a_long_one_shows_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """A5: 3,000,000 tuples over 1,100 items passed the counting bound and ran for minutes with no output.
    Beyond the planner's candidates (4 passes x 24 per item) it is now refused before any fit; a planned
    round calls `progress` with counts that rise to the budget (every PROGRESS_SECONDS: 0 here)."""
    design, best, worst, ti = _study(1100, appearances=2, per_tuple=1)
    with pytest.raises(FsbError, match="more than the 105,600 candidates") as e:
        adaptive.plan_round(design, best, worst, ti, 1100, 3_000_000)
    assert "plan at most 105,600" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.setattr(adaptive, "PROGRESS_SECONDS", 0.0)
    small, b, w, t = _study(40)
    lines: list[str] = []
    codes, _ = adaptive.plan_round(small, b, w, t, 40, 20, seed=0, progress=lines.append)
    assert lines[-1] == "planning: 20 tuples chosen; balancing positions and checking the study's guarantees"
    counts = [int(re.match(r"planning: (\d+) of 20 tuples chosen", line).group(1)) for line in lines[:-1]]
    assert counts and counts == sorted(counts) and counts[-1] <= 20 and len(codes) == 20


def test_the_full_covariance_bridges_two_groups_tied_by_one_tuple() -> None:
    """Two groups of 20 items, each well judged within itself, tied by a single tuple, all utilities level:
    every item's own variance is about the same, so the variances-alone gain cannot tell a tuple inside a
    group from one across them; the difference between the groups is barely known, and the full-covariance
    gain (what plan_round uses up to FULL_ITEMS items) more than triples for the tuple across them."""
    half = bws.bws_design(20, 4, 8, seed=0)
    design = np.concatenate([half, half + 20, [[0, 1, 20, 21]]])
    ti = np.repeat(np.arange(len(design)), 3)
    u = np.zeros(40)
    cov = adaptive.study_covariance(design, ti, u, np.zeros(40, bool), 1.0, 40)
    cand = np.array([[2, 3, 4, 5], [2, 3, 22, 23]])  # inside group A; across the groups
    j = information.tuple_information(u[cand])
    full = information.covariance_gain(cov, cov @ (cov - cov.mean(axis=0, keepdims=True)), cand, j, 3.0)
    alone = information.variance_drop(np.diag(cov)[cand], j, 3.0)[0]
    assert full[1] > 3 * full[0] and abs(alone[1] - alone[0]) < 0.01 * alone[0]
    chosen, v = adaptive.choose_tuples(cand, u, np.diag(cov), 1, 3.0, set(), info=j, cov=cov.copy())
    assert chosen == [[2, 3, 22, 23]] and (v <= np.diag(cov) + 1e-12).all() and (v[[2, 3, 22, 23]] < np.diag(cov)[[2, 3, 22, 23]]).all()


def test_plan_round_says_which_criterion_it_used() -> None:
    design, best, worst, ti = _study(40)
    _, full = adaptive.plan_round(design, best, worst, ti, 40, 10, seed=0)
    _, alone = adaptive.plan_round(design, best, worst, ti, 40, 10, seed=0, full_items=39)
    assert full["criterion"].startswith("summed centred posterior variance")
    assert alone["criterion"] == "summed variance of each tuple's items (over 39 items)"


@pytest.mark.parametrize("full_items", [adaptive.FULL_ITEMS, 0])
def test_pending_tuples_count_as_judgments_to_come(full_items: int) -> None:
    """20 of a design's 200 tuples judged, 180 pending (`--design`): 122 items not judged yet, but every one is in
    pending tuples that will be judged. The round is planned for the study as it will be, so it does not spend
    itself on those items as if nobody would ever see them (before: 69 of its 100 items, now about 12 of 90)."""
    n = 200
    design = bws.bws_design(n, 4, 4, seed=0)
    rng = np.random.default_rng(0)
    u = rng.normal(0.0, 1.5, n)
    judged, ti = design[:20], np.repeat(np.arange(20), 3)
    x = u[judged[ti]]
    b = np.argmax(x + rng.gumbel(size=x.shape), axis=1)
    y = -x + rng.gumbel(size=x.shape)
    y[np.arange(len(b)), b] = -np.inf
    rows = judged[ti]
    best, worst = rows[np.arange(len(b)), b], rows[np.arange(len(b)), np.argmax(y, axis=1)]
    never = np.setdiff1d(np.arange(n), judged.ravel())
    codes, report = adaptive.plan_round(judged, best, worst, ti, n, 25, seed=0, pending=design[20:], full_items=full_items)
    items = np.unique(codes)
    assert report["pending_tuples"] == 180 and np.isin(items, never).sum() < len(items) / 3


def test_a_study_with_no_room_for_a_tuple_says_so_without_suggesting_a_count() -> None:
    """5 items, one judged tuple {1,2,3,4}: every other 4-tuple shares 3 items with it. The refusal said "ask for
    about 1", the count that had just failed."""
    design = np.array([[0, 1, 2, 3]])
    with pytest.raises(FsbError) as err:
        adaptive.plan_round(design, np.array([0]), np.array([3]), np.array([0]), 5, 1, seed=0)
    message = str(err.value)
    assert "found no new 4-tuple" in message and "add items" in message and "ask for" not in message and "\n" not in message


def test_pending_tuples_above_full_items_need_no_n_by_n_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above FULL_ITEMS the rule exists to avoid N x N matrices; pending tuples were added through the dense
    information matrix (74.5 GiB at 100,000 items). Their diagonal now comes tuple by tuple, the same numbers."""
    design, best, worst, ti = _study(40)
    pending = bws.bws_design(40, 4, 2, seed=5)
    expected, _ = adaptive.plan_round(design, best, worst, ti, 40, 10, seed=0, pending=pending, full_items=0)

    def dense(*args, **kwargs):
        raise AssertionError("an N x N information matrix on the variances-alone path")

    monkeypatch.setattr(adaptive, "information_matrix", dense)
    codes, report = adaptive.plan_round(design, best, worst, ti, 40, 10, seed=0, pending=pending, full_items=0)
    assert report["criterion"].startswith("summed variance of each") and np.array_equal(codes, expected)


def test_a_pending_tuple_already_judged_is_one_tuple_of_the_study() -> None:
    """plan_round(pending=...) with a tuple the study has judged (or one listed twice): it was counted as a second
    tuple, and the report then said two tuples of the study share 4 items."""
    design, best, worst, ti = _study(40)
    pending = np.concatenate([design[:1][:, ::-1], bws.bws_design(40, 4, 1, seed=9)[:2], bws.bws_design(40, 4, 1, seed=9)[:1]])
    _, report = adaptive.plan_round(design, best, worst, ti, 40, 5, seed=0, pending=pending)
    assert report["pending_tuples"] == len(
        {tuple(r) for r in np.sort(pending[1:], axis=1).tolist()} - {tuple(r) for r in np.sort(design, axis=1).tolist()}
    )
    assert report["max_shared_items_study"] <= 2


def test_the_counting_refusal_suggests_no_count_when_no_tuple_fits() -> None:
    """5 items, tuples {0,1,2,3}, {0,1,2,4}, {0,1,3,4} judged: 1 free 3-subset, a tuple needs 4. The refusal said
    "1 new 4-tuples ... ask for at most 0"."""
    design = np.array([[0, 1, 2, 3], [0, 1, 2, 4], [0, 1, 3, 4]])
    with pytest.raises(FsbError) as err:
        adaptive.plan_round(design, np.array([0, 0, 0]), np.array([3, 4, 4]), np.arange(3), 5, 1, seed=0)
    message = str(err.value)
    assert message.startswith("no new 4-tuple fits") and "add items" in message and "at most 0" not in message


def test_the_reports_caveats_are_a_copy() -> None:
    design, best, worst, ti = _study(40)
    _, first = adaptive.plan_round(design, best, worst, ti, 40, 5, seed=0)
    first["caveats"].append("changed by a caller")
    _, second = adaptive.plan_round(design, best, worst, ti, 40, 5, seed=0)
    assert "changed by a caller" not in second["caveats"] and second["caveats"] == adaptive.CAVEATS
