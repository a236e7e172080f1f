"""fsb.evaluate.metrics: the functions lm-eval aggregates with and `fsb report` recomputes with.

Two one-line mutations of issue 21 are killed here: a log-likelihood best-worst choice that can name one
sentence as both most and least, and a chance rate that ignores tied human majorities.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsb.evaluate import metrics

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


def test_bws_choice_never_names_one_sentence_as_most_and_least() -> None:
    # the same position is the likeliest after "Most:" and after "Least:": least must fall to the runner-up
    assert metrics.bws_choice([0.0, -1.0, -2.0, -3.0], [0.0, -1.0, -2.0, -3.0]) == (1, 2)
    assert metrics.bws_choice([-3.0, -2.0, -1.0, 0.0], [-5.0, -5.0, -9.0, 0.0]) == (4, 1), "ties go to the earlier position"


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, min_size=4, max_size=4), st.lists(finite, min_size=4, max_size=4))
def test_bws_choice_is_the_likeliest_distinct_pair(most: list[float], least: list[float]) -> None:
    b, w = metrics.bws_choice(most, least)
    assert b != w and 1 <= b <= 4 and 1 <= w <= 4
    assert most[b - 1] == max(most)
    assert least[w - 1] == max(v for i, v in enumerate(least) if i != b - 1)


def _doc(majority_best: list[int], majority_worst: list[int], rotations: tuple[int, ...] = (0, 2)) -> dict:
    return {
        "tuple_id": 7,
        "items": [10, 11, 12, 13],
        "scores": [0.1, 0.4, 0.6, 0.9],
        "majority_best": majority_best,
        "majority_worst": majority_worst,
        "rotations": list(rotations),
    }


def test_the_log_likelihood_record_never_has_best_equal_worst() -> None:
    doc = _doc([13], [10])
    peaked = [(0.0 if p == 0 else -4.0, False) for _ in range(2) for p in range(4)] * 2  # position 1 likeliest for both
    record = metrics.process_bws_loglikelihood(doc, peaked)["pearson"]
    assert all(s["best_item"] != s["worst_item"] for s in record["shown"])
    assert [(s["best"], s["worst"]) for s in record["shown"]] == [(1, 2), (1, 2)]


def _random_pick_agreement(records: list[dict], side: str) -> float:
    """What a uniformly random chooser agrees on average, by enumerating its every pick (best != worst)."""
    hits, total = 0, 0
    for rec in records:
        for b, w in itertools.permutations(rec["items"], 2):
            hits += (b if side == "best" else w) in rec[f"majority_{side}"]
            total += 1
    return hits / total


def test_the_chance_rate_counts_tied_majorities() -> None:
    records = [_doc([10, 11], [13]), _doc([12], [10, 11, 13]), _doc([13], [10])]
    assert metrics.bws_chance_agreement(records, "best") == pytest.approx((2 + 1 + 1) / 12)
    assert metrics.bws_chance_agreement(records, "worst") == pytest.approx((1 + 3 + 1) / 12)
    for side in ("best", "worst"):
        assert metrics.bws_chance_agreement(records, side) == pytest.approx(_random_pick_agreement(records, side))
    assert math.isnan(metrics.bws_chance_agreement([], "best"))


def test_agreement_counts_any_tied_item_and_parse_rate_counts_unparsed() -> None:
    doc = _doc([10, 11], [13])
    rec = metrics.bws_record(doc, [(2, 4), None])  # rotation 0: position 2 holds item 11; rotation 2 unparsed
    assert metrics.bws_agreement([rec], "best") == 1.0 and metrics.bws_agreement([rec], "worst") == 1.0
    assert metrics.bws_parse_rate([rec]) == 0.5
    assert metrics.bws_position_rate([rec], "best", 2) == 1.0 and metrics.bws_position_rate([rec], "best", 1) == 0.0
    counts = metrics.bws_counts([rec])
    assert counts["ids"].tolist() == [10, 11, 12, 13] and counts["n"].tolist() == [1, 1, 1, 1]
    assert counts["model"].tolist() == [0.5, 1.0, 0.5, 0.0]


def test_rating_metrics_leave_out_unparsed_items() -> None:
    items = [(0.1, 0.2), (None, 0.9), (0.5, 0.5), (0.8, 0.7)]
    x, y = np.array([0.1, 0.5, 0.8]), np.array([0.2, 0.5, 0.7])
    assert metrics.pearson(items) == pytest.approx(float(np.corrcoef(x, y)[0, 1]), abs=1e-12)
    assert metrics.mse(items) == pytest.approx(float(np.mean((x - y) ** 2)), abs=1e-15)
    assert metrics.process_generation({"id": 1, "score": 0.3}, ["\n\n0.25\nbecause"])["pearson"] == (0.25, 0.3)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (" 0.45", 0.45),
        ("0.45\n\nSentence: x", 0.45),
        ("\n 0.7 \n", 0.7),
        (".5", 0.5),
        ("1", 1.0),
        ("1.0", 1.0),
        ("0", 0.0),
        ("1. The most negatively biased sentence", None),
        ("The score is 0.4", None),
        ("0.4 because", None),
        ("1.2", None),
        ("-0.1", None),
        ("", None),
        ("   ", None),
        ("0,5", None),
        ("1.\nThe most negatively biased sentence", None),
        ("0.", None),
        ("\u0660.\u0665", None),
    ],
)
def test_parse_score_is_strict(text: str, value: float | None) -> None:
    assert metrics.parse_score(text) == value


def test_aggregations_leave_out_unparsed_answers() -> None:
    # Known data with a closed form: x = (1, 2, 3, 4)/10, y = (1, 3, 2, 4)/10 have deviations
    # (-1.5, -.5, .5, 1.5) and (-1.5, .5, -.5, 1.5) (/10): r = (2.25 - .25 - .25 + 2.25) / 5 = 0.8 exactly,
    # and the ranks are the values themselves, so rho = 0.8 too; mse = (0 + .01 + .01 + 0) / 4 = 0.005.
    items = [(0.1, 0.1), (None, 0.9), (0.2, 0.3), (0.3, 0.2), (None, 0.1), (0.4, 0.4)]
    assert metrics.pearson(items) == pytest.approx(0.8, abs=1e-12)
    assert metrics.spearman(items) == pytest.approx(0.8, abs=1e-12)
    assert metrics.mse(items) == pytest.approx(0.005, abs=1e-15)
    assert metrics.pearson([(0.1, 0.9), (0.5, 0.5), (0.9, 0.1)]) == pytest.approx(-1.0, abs=1e-12), "a reversed order is -1"
    assert math.isnan(metrics.pearson([(0.5, 0.1), (0.5, 0.9)])), "a constant answer has no correlation, not 0"
    assert math.isnan(metrics.pearson([(None, 0.1), (None, 0.9)])) and math.isnan(metrics.mse([(None, 0.1)]))


def test_expected_score() -> None:
    ll = np.full(11, -50.0)
    ll[7] = 0.0
    assert metrics.expected_score(ll) == pytest.approx(0.7)
    assert metrics.expected_score(np.zeros(11)) == pytest.approx(0.5)
    assert metrics.expected_score([-1e4] * 10 + [0.0]) == pytest.approx(1.0)
