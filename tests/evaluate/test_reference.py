"""The human reference figures on the release, checked against values computed here independently from
the released judgments (plain Python over the CSV: its own split, counting and Pearson), not through
fsb's code: split-half r on the sentences actually scored, Spearman-Brown, and the noise ceiling."""

from __future__ import annotations

import csv
import math
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from fsb.data.reference import human_reference, noise_ceiling, spearman_brown
from fsb.evaluate.results import dataset_table


def _judgments(release: Path) -> dict[tuple[int, ...], list[tuple[tuple[int, ...], int, int]]]:
    """Judgments grouped by tuple (the set of its 4 items), each (items as shown, best, worst)."""
    groups: dict[tuple[int, ...], list[tuple[tuple[int, ...], int, int]]] = defaultdict(list)
    with open(release / "FSB" / "fsb-tuples-annotations.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            items = tuple(int(row[f"Item{k}"]) for k in range(1, 5))
            groups[tuple(sorted(items))].append((items, int(row["BestItem"]), int(row["WorstItem"])))
    return groups


def _pearson(x: list[float], y: list[float]) -> float:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy)


def _independent_split_half(groups: dict, subset: set[int], trials: int, seed: int) -> float:
    """Mean over trials of Pearson r between the counting scores (best - worst) / appearances of two
    random halves of each tuple's judgments (floor(n/2) + a coin for odd n to half 1), over `subset`."""
    rng = random.Random(seed)
    rs = []
    for _ in range(trials):
        tallies = [defaultdict(lambda: [0, 0, 0]), defaultdict(lambda: [0, 0, 0])]
        for judged in groups.values():
            order = judged[:]
            rng.shuffle(order)
            k = len(order) // 2 + (1 if len(order) % 2 and rng.random() < 0.5 else 0)
            for pos, (items, best, worst) in enumerate(order):
                t = tallies[0 if pos < k else 1]
                for i in items:
                    t[i][2] += 1
                t[best][0] += 1
                t[worst][1] += 1
        ids = sorted(i for i in subset if tallies[0][i][2] and tallies[1][i][2])
        s1 = [(tallies[0][i][0] - tallies[0][i][1]) / tallies[0][i][2] for i in ids]
        s2 = [(tallies[1][i][0] - tallies[1][i][1]) / tallies[1][i][2] for i in ids]
        rs.append(_pearson(s1, s2))
    return sum(rs) / len(rs)


def test_formulas_on_known_values() -> None:
    assert spearman_brown(0.5) == pytest.approx(2 / 3)
    assert spearman_brown(0.872) == pytest.approx(1.744 / 1.872)
    assert spearman_brown(0.6, factor=3) == pytest.approx(1.8 / 2.2)
    assert noise_ceiling(0.81) == pytest.approx(0.9)


def test_reference_figures_on_the_release_match_an_independent_computation(release: Path, release_dataset: Path) -> None:
    groups = _judgments(release)
    table = dataset_table(str(release_dataset))
    scored = table.ids[table.scored]
    assert scored.size == 960
    # a narrow middle band of scores: a much lower split-half r, so correlating over the wrong sentences shows
    band = table.ids[table.scored & (table.scores >= 0.3) & (table.scores < 0.7)]
    for ids, tol in ((scored, 0.004), (band, 0.015)):
        mine = _independent_split_half(groups, set(ids.tolist()), trials=100, seed=7)
        got = human_reference(str(release_dataset), ids, trials=100, seed=0)
        p = got["pearson"]
        assert got["sentences"] == ids.size
        assert p["split_half"] == pytest.approx(mine, abs=tol)
        assert p["full_panel_reliability"] == pytest.approx(2 * mine / (1 + mine), abs=tol)
        assert p["noise_ceiling"] == pytest.approx(math.sqrt(2 * mine / (1 + mine)), abs=tol)
        if ids is band:
            assert mine < 0.75, "the band is a real restriction of range"
            assert abs(p["split_half"] - 0.872) > 0.1, "computed on the sentences given, not on all 1000"
        else:
            assert 0.85 < mine < 0.89 and p["full_panel_reliability"] > 0.92 and p["noise_ceiling"] > 0.96
    assert np.isfinite(got["spearman"]["noise_ceiling"])


def test_placed_split_half_quotes_table_2_only_for_the_release_and_names_an_undefined_ceiling() -> None:
    from fsb.data.reference import placed_split_half

    shr = {"pearson": {"mean": -0.02, "sd": 0.02}, "spearman": {"mean": 0.5, "sd": 0.01}, "trials": 10, "seed": 0}
    other, release = placed_split_half(shr, release=False), placed_split_half(shr, release=True)
    assert not any("Table 2" in line for line in other) and sum("the paper's Table 2" in line for line in release) == 1
    assert other[-1].endswith("Pearson undefined (a reliability below 0 has no square root), Spearman 0.8165")


def test_spearman_brown_is_nan_where_undefined() -> None:
    """r = -1 (two halves in perfect disagreement, seen on tiny studies) has no full-panel reliability:
    NaN, not a ZeroDivisionError; the noise ceiling of NaN is NaN."""
    import math

    from fsb.data.reference import noise_ceiling, spearman_brown

    assert math.isnan(spearman_brown(-1.0)) and math.isnan(spearman_brown(float("nan")))
    assert math.isnan(noise_ceiling(spearman_brown(-1.0)))
    assert spearman_brown(0.5) == 2 * 0.5 / 1.5 and math.isclose(spearman_brown(0.5, factor=3), 0.75)
