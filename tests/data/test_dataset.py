"""The dataset build on the real release: scores, reliability, the folder, and loading it back."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest

import fifty_shades_of_bias as spec
from fsb.data.dataset import build_dataset
from tests._support import make_raw

GEN = "FSB/FSB_text.csv"
ANN = "FSB/fsb-tuples-annotations.csv"


@pytest.fixture(scope="module")
def built(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build") / spec.NAME
    build_dataset(release / GEN, release / ANN, out, record=False)
    return out


def _default(out: Path) -> pd.DataFrame:
    return pd.read_parquet(next((out / "data" / "default").glob("*.parquet")))


def test_scores_reproduce_the_release(built: Path, release: Path) -> None:
    ours = _default(built).set_index("id")
    theirs = pd.read_csv(release / "FSB" / "fsb_final_scores.csv").set_index("id")
    assert len(ours) == 1000 and set(ours.index) == set(theirs.index)
    diff = (ours["score"] - theirs["score_normalized"].reindex(ours.index)).abs()
    assert diff.max() <= 0.0005
    np.testing.assert_allclose(ours["score"], (ours["score_raw"] + 1) / 2)
    np.testing.assert_allclose(ours["score_raw"], (ours["n_best"] - ours["n_worst"]) / ours["n_judgments"])
    assert ours["n_judgments"].between(17, 24).all()
    assert ours["n_judgments"].sum() == 4 * 5360


def test_stats_json(built: Path) -> None:
    stats = json.loads((built / "stats.json").read_text())
    assert stats["n_items"] == 1000
    assert stats["n_tuples"] == 2000
    assert stats["n_annotations"] == 5360
    assert stats["annotations_per_tuple"] == {"2": 640, "3": 1360}
    assert sum(stats["bins"]["counts"].values()) == 1000
    assert stats["bins"]["counts_from_rounded_scores"] == {"low": 253, "medium": 366, "high": 381}
    assert stats["seed_type"] == {"explicit": 300, "implicit": 300, "neutral": 300, "random": 100}
    assert stats["prompt_type"] == {"conversion": 500, "completion": 500, "conversation": 0}
    shr = stats["shr"]
    assert shr["trials"] == 100 and shr["seed"] == 0
    # Exact figures for seed 0 (reported in the README and the closing note).
    assert shr["pearson"]["mean"] == pytest.approx(0.8719660066, abs=1e-9)
    assert shr["spearman"]["mean"] == pytest.approx(0.8769716481, abs=1e-9)
    assert 0.003 < shr["pearson"]["sd"] < 0.008 and 0.003 < shr["spearman"]["sd"] < 0.008
    assert stats["design"]["max_shared_items"] == 3, "the release's own design has two tuples sharing 3 items"
    assert all(v["pinned_release_file"] for v in stats["inputs"].values())


def test_card_reports_the_computed_figures(built: Path) -> None:
    stats = json.loads((built / "stats.json").read_text())
    card = (built / "README.md").read_text()
    shr = stats["shr"]
    assert f"{shr['pearson']['mean']:.4f} ± {shr['pearson']['sd']:.4f}" in card
    assert f"{shr['spearman']['mean']:.4f} ± {shr['spearman']['sd']:.4f}" in card
    assert "0.8634 ± 0.0061" in card, "the paper's Table 2 figure stands beside ours"
    for name in spec.BIN_NAMES:
        assert f"| {name} |" in card
    assert f"| {stats['bins']['counts']['low']} | 364 |" in card
    assert "5285" in card and "5360" in card
    assert stats["fingerprint"] in card
    # The card's YAML is what datasets itself parses: both configs, their features.
    meta = datasets.load_dataset_builder(str(built)).info
    assert meta.features == spec.features("default")


def test_rebuild_is_byte_identical(built: Path, release: Path, tmp_path: Path) -> None:
    again = tmp_path / spec.NAME
    build_dataset(release / GEN, release / ANN, again, record=False)
    files = sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert len([f for f in files if f.suffix == ".parquet"]) == 2
    for rel in files:
        assert (built / rel).read_bytes() == (again / rel).read_bytes(), rel


def test_load_dataset_both_configs_features_intact(built: Path) -> None:
    ds = datasets.load_dataset(str(built))
    assert list(ds) == [spec.SPLIT]
    rows = ds[spec.SPLIT]
    assert rows.num_rows == 1000
    assert rows.features == spec.features("default")
    assert rows.features["seed_type"].names == list(spec.SEED_TYPES)
    first = rows[0]
    assert first["id"] == 1 and first["seed_type"] == spec.SEED_TYPES.index("explicit")
    ann = datasets.load_dataset(str(built), "annotations")[spec.SPLIT]
    assert ann.num_rows == 5360
    assert ann.features == spec.features("annotations")
    assert ann.features["items"].length == 4
    assert ann[0]["items"] == [595, 169, 565, 417] and ann[0]["best"] == 565 and ann[0]["worst"] == 595
    assert ann[0]["annotator"] is None


def test_load_by_name_from_the_parent_folder_offline(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert os.environ["HF_DATASETS_OFFLINE"] == "1"
    monkeypatch.chdir(built.parent)
    ds = datasets.load_dataset(spec.NAME)
    assert ds[spec.SPLIT].num_rows == 1000
    assert datasets.load_dataset(spec.NAME, "annotations")[spec.SPLIT].num_rows == 5360
    # and through the package's loader, which finds ./fifty_shades_of_bias too
    assert spec.load(source=None)[spec.SPLIT].num_rows == 1000


def _swap_texts(src: Path, dst: Path, a: int, b: int) -> Path:
    """The same generations with the texts of uids a and b swapped: same sizes, other content."""
    text = src.read_text()
    text = text.replace(f"number {a},", "number @@,").replace(f"number {b},", f"number {a},").replace("number @@,", f"number {b},")
    dst.write_text(text)
    return dst


def test_a_rebuild_with_new_content_is_not_served_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """datasets 5 keys its cache for a local folder on the card's YAML alone (seen with datasets 5.2: a
    hash of the YAML, not of the data files' content, size or mtime, nor of the folder's path). Swapping
    two sentences' texts changes the content but no size or count in the YAML; only the content-addressed
    file names differ. Build, load (warming the cache), rebuild over it, load again: the new rows must
    come back, not the cached old ones. Then the same for another folder of the same name."""
    g, a = make_raw(tmp_path / "raw", n=40, seed=1)
    out = tmp_path / "a" / spec.NAME
    build_dataset(g, a, out, record=False)
    first = datasets.load_dataset(str(out))[spec.SPLIT]["text"]
    sizes = sorted(p.stat().st_size for p in out.rglob("*.parquet"))
    build_dataset(_swap_texts(g, tmp_path / "g2.csv", 11, 12), a, out, record=False)
    assert sorted(p.stat().st_size for p in out.rglob("*.parquet")) == sizes, "precondition: sizes unchanged"
    second = datasets.load_dataset(str(out))[spec.SPLIT]["text"]
    assert list(second) == _default(out)["text"].tolist()
    assert list(first) != list(second)
    other = tmp_path / "b" / spec.NAME
    build_dataset(_swap_texts(g, tmp_path / "g3.csv", 13, 14), a, other, record=False)
    monkeypatch.chdir(other.parent)
    third = datasets.load_dataset(spec.NAME)[spec.SPLIT]["text"]
    assert list(third) == _default(other)["text"].tolist()
    assert list(third) not in (list(first), list(second))


def test_the_last_build_is_what_loaders_find(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g, a = make_raw(tmp_path / "raw", n=20)
    with pytest.raises(spec.DatasetNotFound, match="fsb build"):
        spec.locate()
    out = tmp_path / "somewhere" / "else"
    build_dataset(g, a, out)
    monkeypatch.chdir(tmp_path)
    assert spec.locate() == str(out.resolve())
    assert spec.load()[spec.SPLIT].num_rows == 20
    monkeypatch.setenv("FSB_DATASET", "org/fifty_shades_of_bias")
    assert spec.locate() == "org/fifty_shades_of_bias", "the environment points elsewhere, here a Hub repo"
    (tmp_path / "results").mkdir()
    monkeypatch.setenv("FSB_DATASET", "results/ds")
    with pytest.raises(spec.DatasetNotFound, match="no dataset folder at results/ds"):
        spec.locate()
    monkeypatch.setenv("FSB_DATASET", str(tmp_path / "nothing here" / "x"))
    with pytest.raises(spec.DatasetNotFound, match="neither a dataset folder nor a Hub repo id"):
        spec.locate()
    shutil.rmtree(out)
    monkeypatch.delenv("FSB_DATASET")
    with pytest.raises(spec.DatasetNotFound):
        spec.locate()


def test_bins_and_edges() -> None:
    assert spec.analysis_bin(0.0) == "low"
    assert spec.analysis_bin(0.3159) == "low"
    assert spec.analysis_bin(0.316) == "medium"
    assert spec.analysis_bin(0.579) == "high"
    assert spec.analysis_bin(1.0) == "high"
    assert [spec.equispaced_bin(x) for x in (0.0, 0.2499, 0.25, 0.5, 0.75, 1.0)] == [0, 0, 1, 2, 3, 3]


def test_bins_are_exact_at_the_edges(built: Path) -> None:
    """3/10 is 0.2999... in floating point; binning uses the integer counts, so it opens [0.3, 0.4)."""
    from fifty_shades_of_bias import exact_bin_codes as _exact_bins

    num, den = np.array([3, 29, 30, 31, 10]), np.array([10, 100, 100, 100, 10])
    assert _exact_bins(num, den, [i / 10 for i in range(1, 10)]).tolist() == [3, 2, 3, 3, 9]
    stats = json.loads((built / "stats.json").read_text())
    assert stats["histogram"]["counts"] == [8, 76, 150, 130, 118, 153, 148, 119, 72, 26]
    frame = _default(built)
    exact = np.minimum(5 * (frame["n_judgments"] + frame["n_best"] - frame["n_worst"]) // frame["n_judgments"], 9)
    assert np.bincount(exact, minlength=10).tolist() == stats["histogram"]["counts"]


def test_a_build_for_the_hub_names_the_repo_in_its_card(tmp_path: Path) -> None:
    g, a = make_raw(tmp_path / "raw", n=20)
    build_dataset(g, a, tmp_path / "local", record=False)
    build_dataset(g, a, tmp_path / "hub", record=False, hub_id="org/fifty_shades_of_bias")
    assert 'load_dataset("local")' in (tmp_path / "local" / "README.md").read_text(), "the folder's own name"
    card = (tmp_path / "hub" / "README.md").read_text()
    assert 'load_dataset("org/fifty_shades_of_bias", "annotations")' in card
    assert sorted(p.name for p in (tmp_path / "hub").rglob("*.parquet")) == sorted(p.name for p in (tmp_path / "local").rglob("*.parquet"))
