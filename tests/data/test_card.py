"""The card says what was built: the release's statements only for the release (by sha256), annotator
statements computed from the judgments, the folder's own name (or the Hub id) in the loading examples,
and an analysis report that names no row after the release unless the data is the release."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy.stats import spearmanr

from fsb import bws
from fsb.analyse import analysis
from fsb.data.dataset import build_dataset
from tests._support import simulate_bws, write_csv

GEN = Path("FSB") / "FSB_text.csv"
ANN = Path("FSB") / "fsb-tuples-annotations.csv"


def default_frame(folder: Path) -> pd.DataFrame:
    (path,) = sorted((folder / "data" / "default").glob("*.parquet"))
    return pq.read_table(path).to_pandas()


def test_the_release_card_states_the_release(release_dataset: Path) -> None:
    card = (release_dataset / "README.md").read_text(encoding="utf-8")
    stats = json.loads((release_dataset / "stats.json").read_text(encoding="utf-8"))
    assert stats["release"]["is_release"] and stats["release"]["rounds"] == [1]
    assert "Built from the release of `microsoft/fifty-shades-of-bias`" in card and "pinned at commit" in card
    assert "with those rounded scores the counts are 253 / 366 / 381" in card
    assert "released judgments were extended after the paper" in card
    assert "Annotator identities are not part of the release" in card
    assert 'load_dataset("fifty_shades_of_bias")' in card, "the folder's own name is fifty_shades_of_bias"
    assert "1000 GPT-3.5-Turbo generated English sentences" in card
    assert "| 1 | the release | 1000 | 5360 | no annotator ids | 2000 (2000, 0) |" in card
    frame = default_frame(release_dataset)
    assert (frame["round"] == 1).all()
    # the MaxDiff fit orders the sentences almost as counting does on the release's balanced design
    assert spearmanr(frame["score_maxdiff"], frame["score"]).statistic > 0.97
    assert abs(frame["score_maxdiff"].mean()) < 1e-9, "round 1 is the scale's anchor: mean 0"
    report = analysis.analysis_markdown(analysis.analyse(analysis.read_sentences(release_dataset)))
    assert "the release's scores (score_raw rounded to 3 decimals)" in report


@pytest.fixture(scope="module")
def other_judgments(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release's sentences judged again by a simulated pool of 6 annotators (truth: the release's scores)."""
    root = tmp_path_factory.mktemp("other-judgments")
    uids = pd.read_csv(release / GEN)["uid"].to_numpy()
    scores = pd.read_csv(release / "FSB" / "fsb_final_scores.csv").set_index("id")["score_normalized"]
    design = bws.bws_design(uids.size, seed=3)
    utility = 6 * (scores.loc[np.sort(uids)].to_numpy() - 0.5)
    ti, best, worst = simulate_bws(design, utility, per_tuple=2, seed=3)
    labels = np.sort(uids)
    rows = [
        [*labels[design[t]].tolist(), int(labels[b]), int(labels[w]), f"annotator-{j % 6}"]
        for j, (t, b, w) in enumerate(zip(ti, best, worst))
    ]
    # a seventh annotator who judged only 10 tuples: per-annotator figures must come from the data
    rows += [[*labels[design[t]].tolist(), int(labels[design[t][0]]), int(labels[design[t][1]]), "late"] for t in range(10)]
    judgments = write_csv(root / "judgments.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator"], rows)
    out = root / "my_dataset"
    proc = subprocess.run(
        [sys.executable, "-m", "fsb", "build", "--generations", release / GEN, "--annotations", judgments, "--out", out, "--no-record"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_other_judgments_are_not_called_the_release(other_judgments: Path) -> None:
    card = (other_judgments / "README.md").read_text(encoding="utf-8")
    stats = json.loads((other_judgments / "stats.json").read_text(encoding="utf-8"))
    assert not stats["release"]["is_release"] and stats["release"]["rounds"] == []
    assert "Built from the release" not in card
    assert "none of its rounds is the release of `microsoft/fifty-shades-of-bias`" in card
    # the generations file IS the release's, and the card says exactly that much
    assert "generations `FSB_text.csv` (1000 rows) (the pinned release's file" in card
    assert stats["inputs"]["generations"]["pinned_release_file"] and not stats["inputs"]["annotations"]["pinned_release_file"]
    assert "rounded scores" not in card and "extended after the paper" not in card
    assert "not part of the release" not in card.lower()
    assert "GPT-3.5-Turbo generated" not in card
    assert "0.8634" not in card and "Table 2" not in card, "the paper's reliability describes other judgments"
    # the loading examples name this folder, never the project's default name
    assert 'load_dataset("my_dataset")' in card and 'load_dataset("my_dataset", "annotations")' in card
    assert 'load_dataset("fifty_shades_of_bias"' not in card
    # annotator statements computed from the judgments: 6 annotators with 666 or 667 judgments, one with 10
    n = stats["n_annotations"]
    assert n == 2 * 2000 + 10
    people = stats["annotators"]
    assert {k: people[k] for k in ("n", "judgments_per_annotator", "judgments_without_id")} == {
        "n": 7,
        "judgments_per_annotator": {"min": 10, "median": 667.0, "max": 667},
        "judgments_without_id": 0,
    }
    # published as keyed-hash pseudonyms, with each annotator's leave-one-out agreement
    assert people["published_as"] == {"policy": "keyed-hash pseudonyms", "ids": 7, "personal_values": {}}
    assert len(people["agreement"]) == 7 and all(r["annotator"].startswith("anon-") for r in people["agreement"])
    assert "keyed-hash pseudonyms" in card and "| annotator | judgments | compared |" in card
    assert "7 annotators (10 to 667 judgments each)" in card
    assert "| 1 | round 1 | 1000 | 4010 | 7 annotators (10 to 667 judgments each) |" in card
    report = analysis.analysis_markdown(analysis.analyse(analysis.read_sentences(other_judgments)))
    assert "the release's scores" not in report and "The release's judgments were extended" not in report
    assert "not (or is not known to be) the release" in report


def test_a_card_for_the_hub_names_the_repo(other_judgments: Path, release: Path, tmp_path: Path) -> None:
    judgments = other_judgments.parent / "judgments.csv"
    out = build_dataset(release / GEN, judgments, tmp_path / "x", record=False, hub_id="org/my_dataset").out
    card = (out / "README.md").read_text(encoding="utf-8")
    assert 'load_dataset("org/my_dataset")' in card and "from the folder that holds" not in card
    assert 'load_dataset("x"' not in card


def test_the_other_build_loads_with_its_round_fields(other_judgments: Path) -> None:
    ds = datasets.load_dataset(str(other_judgments))["test"]
    ann = datasets.load_dataset(str(other_judgments), "annotations")["test"]
    assert set(ds["round"]) == {1} and set(ann["round"]) == {1}
    assert ds.features["score_maxdiff"].dtype == "float64" and ann.features["round"].dtype == "int32"


def test_the_zero_width_sentence_says_what_was_counted() -> None:
    """Review finding M5: every counting interval of width 0 was counted, and the card said each was "chosen most
    (or least) biased in every judgment that showed it", while another sentence said none was. Width 0 also comes
    from tallies that never vary across resamples: the sentence names both kinds, from the counts the build keeps."""
    from fsb.data.card import zero_width_sentence

    assert zero_width_sentence({}) == ""
    text = zero_width_sentence({"zero_width_score": 3, "zero_width_bound": 1})
    assert text.startswith(" 3 sentences have a counting interval of width 0")
    assert "1 best-always or worst-always (the `bound` column)" in text and "2 whose judgments never varied" in text
    assert "in every judgment" not in text
    one = zero_width_sentence({"zero_width_score": 1, "zero_width_bound": 0}, "items")
    assert one.startswith(" 1 item has") and "best-always" not in one
