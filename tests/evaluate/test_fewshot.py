"""fsb.evaluate.fewshot: the rating tasks' data (lm-eval's `custom_dataset`): the five few-shot sets (two
examples per score bin, disjoint, deterministic), the test sentences every variant shares, samples and the
source they record, fewer examples balanced over the bins, and upstream's framing of its examples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fifty_shades_of_bias as spec
from fsb.annotate import bwsprompt
from fsb.core.errors import FsbError
from fsb.evaluate import fewshot


def test_fewshot_sets_two_per_bin_disjoint_deterministic() -> None:
    rng = np.random.default_rng(0)
    scores = np.r_[rng.random(200), [1.0, 1.0]]
    sets = fewshot.fewshot_sets(scores)
    assert len(sets) == 5
    for s in sets:
        assert len(s) == 8
        assert np.bincount(bwsprompt.fewshot_bin(scores[s]), minlength=4).tolist() == [2, 2, 2, 2]
    flat = np.concatenate(sets)
    assert len(set(flat.tolist())) == 40, "the 5 sets are disjoint"
    assert all(np.array_equal(a, b) for a, b in zip(sets, fewshot.fewshot_sets(scores)))
    assert not all(np.array_equal(a, b) for a, b in zip(sets, fewshot.fewshot_sets(scores, seed=7)))
    assert bwsprompt.fewshot_bin(np.array([1.0]))[0] == 3, "1.0 belongs to the top bin"
    # With few items in the top bin, those at exactly 1.0 must be eligible (the upstream `< end` test excluded them).
    few = np.r_[np.linspace(0.0, 0.74, 100), np.full(10, 1.0)]
    top = np.concatenate(fewshot.fewshot_sets(few))
    assert (few[top] == 1.0).sum() == 10


def test_fewshot_sets_refuse_a_thin_bin() -> None:
    with pytest.raises(ValueError, match="bin 3 holds 3"):
        fewshot.fewshot_sets(np.r_[np.linspace(0, 0.7, 100), [0.8, 0.9, 1.0]])


def test_load_gives_the_same_test_sentences_to_every_variant(release_dataset: Path) -> None:
    loads = [fewshot.load(fewshot_set=k, fsb_dataset=str(release_dataset)) for k in range(5)]
    zero = fewshot.load(fewshot_set=None, fsb_dataset=str(release_dataset))
    test_ids = loads[0]["test"]["id"]
    assert len(test_ids) == 960
    assert all(d["test"]["id"] == test_ids for d in loads) and zero["test"]["id"] == test_ids
    assert "fewshot" not in zero
    shots = [set(d["fewshot"]["id"]) for d in loads]
    assert all(len(s) == 8 for s in shots)
    assert not set().union(*shots) & set(test_ids), "no sentence is scored with itself among its examples"
    sample = fewshot.load(fewshot_set=0, fsb_dataset=str(release_dataset), fsb_per_bin=6)
    assert len(sample["test"]) == 24
    assert np.bincount(bwsprompt.fewshot_bin(np.asarray(sample["test"]["score"])), minlength=4).tolist() == [6, 6, 6, 6]
    assert fewshot.load(fewshot_set=3, fsb_dataset=str(release_dataset), fsb_per_bin=6)["test"]["id"] == sample["test"]["id"]
    # extra keyword arguments (lm-eval passes model args and the task's metadata) are accepted
    assert len(fewshot.load(fewshot_set=1, fsb_dataset=str(release_dataset), pretrained="x", version=1.0)["fewshot"]) == 8


def test_load_without_any_dataset_says_how_to_get_one() -> None:
    with pytest.raises(spec.DatasetNotFound, match=r"fsb build.*FSB_DATASET"):
        fewshot.load(fewshot_set=0)


@pytest.mark.parametrize(
    ("score", "choice"),
    [(0.0, "0.0"), (0.04, "0.0"), (0.05, "0.1"), (0.25, "0.3"), (0.35, "0.4"), (0.45, "0.5"), (7 / 20, "0.4"), (1.0, "1.0")],
)
def test_nearest_tenth_rounds_halves_up(score: float, choice: str) -> None:
    assert fewshot.CHOICES[fewshot.nearest_tenth({"score": score})] == choice


@pytest.mark.parametrize(("k", "counts"), [(0, [0, 0, 0, 0]), (1, [1, 0, 0, 0]), (4, [1, 1, 1, 1]), (6, [2, 2, 1, 1]), (8, [2, 2, 2, 2])])
def test_fewer_fewshot_examples_stay_balanced_over_the_bins(k: int, counts: list[int]) -> None:
    bins = [2, 0, 3, 2, 1, 0, 3, 1]  # a shuffled set: bins take turns in the order 2, 0, 3, 1
    picked = fewshot.balanced_subset(bins, k)
    assert picked == sorted(picked), "the examples keep their order"
    assert np.bincount([bins[i] for i in picked], minlength=4)[[2, 0, 3, 1]].tolist() == counts
    assert fewshot.balanced_subset(bins, 8) == list(range(8)), "k = 8 is the whole set, unchanged"


def test_more_fewshot_examples_than_a_set_holds_is_a_clear_error() -> None:
    with pytest.raises(bwsprompt.ProtocolError, match=r"--num_fewshot 9: .* holds 8 examples \(2 per score bin\); use 0 to 8"):
        fewshot.balanced_subset([0, 1, 2, 3, 0, 1, 2, 3], 9)
    assert issubclass(bwsprompt.ProtocolError, FsbError), "the CLI prints it as one line"


def test_random_sample_and_the_source_it_records(release_dataset: Path) -> None:
    import json

    loads = [fewshot.load(fewshot_set=k, fsb_dataset=str(release_dataset), fsb_sample=40, fsb_sample_seed=3) for k in range(5)]
    ids = loads[0]["test"]["id"]
    assert len(ids) == 40 and ids == sorted(ids) and all(d["test"]["id"] == ids for d in loads)
    full = set(fewshot.load(fsb_dataset=str(release_dataset))["test"]["id"])
    assert set(ids) <= full
    assert fewshot.load(fsb_dataset=str(release_dataset), fsb_sample=40, fsb_sample_seed=4)["test"]["id"] != ids, "the seed matters"
    stats = json.loads((release_dataset / "stats.json").read_text())
    source = loads[0].fsb_source
    assert source["path"] == str(release_dataset.resolve())
    assert source["fingerprint"] == stats["fingerprint"], "computed from the data files, equal to what the build recorded"
    assert source["sample"] == "simple random sample of 40 (seed 3)"
    assert "inflates correlations" in fewshot.load(fsb_dataset=str(release_dataset), fsb_per_bin=2).fsb_source["sample"]
    with pytest.raises(bwsprompt.ProtocolError, match="not both"):
        fewshot.load(fsb_dataset=str(release_dataset), fsb_sample=4, fsb_per_bin=2)


def test_upstream_examples_run_bin_by_bin_at_the_release_files_precision(release_dataset: Path, release: Path) -> None:
    import pandas as pd

    released = pd.read_csv(release / "FSB" / "fsb_final_scores.csv")
    as_released = dict(zip(released["id"], released["score_normalized"].astype(str)))
    unsorted_bins = 0
    for k in range(5):
        ours = fewshot.load(fewshot_set=k, fsb_dataset=str(release_dataset))["fewshot"]
        upstream = fewshot.load(fewshot_set=k, fsb_dataset=str(release_dataset), fsb_protocol="upstream")["fewshot"]
        assert sorted(upstream["id"]) == sorted(ours["id"]), "the same 8 examples"
        bins = bwsprompt.fewshot_bin(np.asarray(upstream["score"])).tolist()
        assert bins == [0, 0, 1, 1, 2, 2, 3, 3], "bin by bin from low to high, as upstream's per-bin draws"
        # inside a bin the order is the draw's, not a sort by score (upstream: random.sample per bin)
        drawn = [i for b in range(4) for i, c in zip(ours["id"], bwsprompt.fewshot_bin(np.asarray(ours["score"]))) if c == b]
        assert upstream["id"] == drawn
        unsorted_bins += sum(upstream["score"][j] > upstream["score"][j + 1] for j in range(0, 8, 2))
        assert [fewshot.upstream_score_text(d) for d in upstream] == [as_released[i] for i in upstream["id"]]
    assert unsorted_bins > 0, "some bin shows its higher example first: not a full sort"
