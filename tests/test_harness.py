"""The lm-eval task's own logic (harness/utils.py) and its metric plumbing, with models whose answers are known."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM

import fifty_shades_of_bias as spec
from fsb.evaluate import run_eval
from fsb.report import harness_utils, load_run, summarize

U = harness_utils()


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
    assert U.parse_score(text) == value


def test_fewshot_sets_two_per_bin_disjoint_deterministic() -> None:
    rng = np.random.default_rng(0)
    scores = np.r_[rng.random(200), [1.0, 1.0]]
    sets = U.fewshot_sets(scores)
    assert len(sets) == 5
    for s in sets:
        assert len(s) == 8
        assert np.bincount(U.fewshot_bin(scores[s]), minlength=4).tolist() == [2, 2, 2, 2]
    flat = np.concatenate(sets)
    assert len(set(flat.tolist())) == 40, "the 5 sets are disjoint"
    assert all(np.array_equal(a, b) for a, b in zip(sets, U.fewshot_sets(scores)))
    assert not all(np.array_equal(a, b) for a, b in zip(sets, U.fewshot_sets(scores, seed=7)))
    assert U.fewshot_bin(np.array([1.0]))[0] == 3, "1.0 belongs to the top bin"
    # With few items in the top bin, those at exactly 1.0 must be eligible (the upstream `< end` test excluded them).
    few = np.r_[np.linspace(0.0, 0.74, 100), np.full(10, 1.0)]
    top = np.concatenate(U.fewshot_sets(few))
    assert (few[top] == 1.0).sum() == 10


def test_fewshot_sets_refuse_a_thin_bin() -> None:
    with pytest.raises(ValueError, match="bin 3 holds 3"):
        U.fewshot_sets(np.r_[np.linspace(0, 0.7, 100), [0.8, 0.9, 1.0]])


def test_load_gives_the_same_test_sentences_to_every_variant(release_dataset: Path) -> None:
    loads = [U.load(fewshot_set=k, fsb_dataset=str(release_dataset)) for k in range(5)]
    zero = U.load(fewshot_set=None, fsb_dataset=str(release_dataset))
    test_ids = loads[0]["test"]["id"]
    assert len(test_ids) == 960
    assert all(d["test"]["id"] == test_ids for d in loads) and zero["test"]["id"] == test_ids
    assert "fewshot" not in zero
    shots = [set(d["fewshot"]["id"]) for d in loads]
    assert all(len(s) == 8 for s in shots)
    assert not set().union(*shots) & set(test_ids), "no sentence is scored with itself among its examples"
    sample = U.load(fewshot_set=0, fsb_dataset=str(release_dataset), fsb_per_bin=6)
    assert len(sample["test"]) == 24
    assert np.bincount(U.fewshot_bin(np.asarray(sample["test"]["score"])), minlength=4).tolist() == [6, 6, 6, 6]
    assert U.load(fewshot_set=3, fsb_dataset=str(release_dataset), fsb_per_bin=6)["test"]["id"] == sample["test"]["id"]
    # extra keyword arguments (lm-eval passes model args and the task's metadata) are accepted
    assert len(U.load(fewshot_set=1, fsb_dataset=str(release_dataset), pretrained="x", version=1.0)["fewshot"]) == 8


def test_load_without_any_dataset_says_how_to_get_one() -> None:
    with pytest.raises(spec.DatasetNotFound, match=r"fsb build.*FSB_DATASET"):
        U.load(fewshot_set=0)


def test_aggregations_leave_out_unparsed_answers() -> None:
    items = [(0.1, 0.2), (None, 0.9), (0.5, 0.4), (0.9, 0.8), (None, 0.1)]
    p, g = [0.1, 0.5, 0.9], [0.2, 0.4, 0.8]
    assert U.pearson(items) == pytest.approx(scipy.stats.pearsonr(p, g)[0])
    assert U.spearman(items) == pytest.approx(1.0)
    assert U.mse(items) == pytest.approx(np.mean((np.array(p) - g) ** 2))
    assert math.isnan(U.pearson([(0.5, 0.1), (0.5, 0.9)])), "a constant answer has no correlation, not 0"
    assert math.isnan(U.pearson([(None, 0.1), (None, 0.9)])) and math.isnan(U.mse([(None, 0.1)]))


@pytest.mark.parametrize(
    ("score", "choice"),
    [(0.0, "0.0"), (0.04, "0.0"), (0.05, "0.1"), (0.25, "0.3"), (0.35, "0.4"), (0.45, "0.5"), (7 / 20, "0.4"), (1.0, "1.0")],
)
def test_nearest_tenth_rounds_halves_up(score: float, choice: str) -> None:
    assert U.CHOICES[U.nearest_tenth({"score": score})] == choice


def test_harness_bins_agree_with_the_build(release_dataset: Path) -> None:
    """The harness bins with float scores (it must stay self-contained); the build bins exactly from
    integer counts. On the release (62 sentences sit exactly on 0.25, 0.5 or 0.75) they must agree."""
    import json

    rows = spec.load(source=str(release_dataset))[spec.SPLIT]
    stats = json.loads((release_dataset / "stats.json").read_text())
    assert np.bincount(U.fewshot_bin(np.asarray(rows["score"])), minlength=4).tolist() == stats["fewshot_bins"]["counts"]
    assert [U.fewshot_bin(np.array([x]))[0] for x in (0.2499, 0.25, 0.5, 0.75, 1.0)] == [0, 1, 2, 3, 3]
    assert all(U.fewshot_bin(np.array([x]))[0] == spec.equispaced_bin(x) for x in np.linspace(0, 1, 401))


def test_expected_score() -> None:
    ll = np.full(11, -50.0)
    ll[7] = 0.0
    assert U.expected_score(ll) == pytest.approx(0.7)
    assert U.expected_score(np.zeros(11)) == pytest.approx(0.5)
    assert U.expected_score([-1e4] * 10 + [0.0]) == pytest.approx(1.0)


# --- metric plumbing end to end, with lm-eval models whose answers are known ---------------------


class OracleLM(LM):
    """Answers each sentence's human score (read from the dataset by its text); every `garble`-th
    sentence gets an unparseable answer. For log-likelihoods, peaks sharply at the nearest tenth."""

    def __init__(self, dataset: Path, garble: int = 0) -> None:
        super().__init__()
        rows = spec.load(source=str(dataset))[spec.SPLIT]
        self.score = dict(zip(rows["text"], rows["score"]))
        self.garble = garble
        self.seen = 0

    def _gold(self, context: str) -> float:
        text = re.findall(r"Sentence: (.*)\nScore:", context)[-1]
        return self.score[text]

    def generate_until(self, requests: list[Instance]) -> list[str]:
        out = []
        for req in requests:
            self.seen += 1
            gold = self._gold(req.args[0])
            out.append("1. The most biased" if self.garble and self.seen % self.garble == 0 else f" {gold:.6f}")
        return out

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        out = []
        for req in requests:
            context, continuation = req.args
            gold = self._gold(context)
            out.append((-1000.0 * (float(continuation) - gold) ** 2, False))
        return out

    def loglikelihood_rolling(self, requests: list[Instance]) -> list[float]:
        raise NotImplementedError


def _samples_check(run: Any) -> None:
    """Every leaf task's pearson, spearman and mse equal scipy's values recomputed from the logged samples."""
    for name, s in run.tasks.items():
        got = run.results["results"][name]
        ok = s.parsed
        if ok.sum() >= 2 and np.ptp(s.preds[ok]) > 0:
            assert got["pearson,none"] == pytest.approx(scipy.stats.pearsonr(s.preds[ok], s.golds[ok])[0], abs=1e-12)
            assert got["spearman,none"] == pytest.approx(scipy.stats.spearmanr(s.preds[ok], s.golds[ok])[0], abs=1e-12)
        else:
            assert math.isnan(got["pearson,none"])
        if ok.any():
            assert got["mse,none"] == pytest.approx(float(np.mean((s.preds[ok] - s.golds[ok]) ** 2)), abs=1e-12)


def test_an_oracle_scores_perfectly(release_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    results = run_eval(OracleLM(release_dataset), tasks=["fsb", "fsb_ll"], per_bin=3, dataset=str(release_dataset), output_path=out)
    for group in ("fsb", "fsb_ll"):
        assert results["results"][group]["pearson,none"] > 0.99
    assert results["results"]["fsb"]["pearson,none"] == pytest.approx(1.0, abs=1e-9)
    assert results["results"]["fsb"]["spearman,none"] == pytest.approx(1.0, abs=1e-9)
    assert results["results"]["fsb"]["mse,none"] == pytest.approx(0.0, abs=1e-11)
    assert results["results"]["fsb"]["parse_rate,none"] == 1.0
    # fsb_ll: the expected score is the nearest tenth, so the error is at most 0.05 per sentence
    assert results["results"]["fsb_ll"]["mse,none"] < 0.05**2
    run = load_run(out)
    _samples_check(run)
    summary = summarize(run, n_boot=50)
    assert summary["fsb"]["values"]["pearson"] == pytest.approx(results["results"]["fsb"]["pearson,none"])
    assert summary["fsb"]["sentences"] == 12 and summary["fsb"]["variants"] == 5


def test_unparseable_answers_count_against_parse_rate_only(release_dataset: Path, tmp_path: Path) -> None:
    results = run_eval(
        OracleLM(release_dataset, garble=3), tasks=["fsb_set2"], per_bin=6, dataset=str(release_dataset), output_path=tmp_path
    )
    r = results["results"]["fsb_set2"]
    assert r["parse_rate,none"] == pytest.approx(16 / 24)
    assert r["pearson,none"] == pytest.approx(1.0, abs=1e-9) and r["mse,none"] == pytest.approx(0.0, abs=1e-11)
    run = load_run(tmp_path)
    assert run.tasks["fsb_set2"].parsed.sum() == 16
    _samples_check(run)
