"""Which dataset is read: one order (explicit, $FSB_DATASET, ./fifty_shades_of_bias, the last build) for
`fifty_shades_of_bias.locate()`/`load()`, `datasets.load_dataset("fifty_shades_of_bias")` and the lm-eval
task, so one name never means two datasets; and each reader can say which one (path and fingerprint)."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

import fifty_shades_of_bias as spec
from fsb.data.dataset import build_dataset
from fsb.evaluate.results import harness_utils
from tests._support import make_raw


@pytest.fixture
def two_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """./fifty_shades_of_bias in the working folder (200 sentences) and a last build elsewhere (24)."""
    g, a = make_raw(tmp_path / "raw-a", n=200, seed=5)
    here = tmp_path / "work" / spec.NAME
    build_dataset(g, a, here, record=False)
    g, a = make_raw(tmp_path / "raw-b", n=24, seed=2)
    elsewhere = tmp_path / "elsewhere" / "build"
    build_dataset(g, a, elsewhere)  # recorded as the last build
    monkeypatch.chdir(here.parent)
    return here, elsewhere


def test_the_local_folder_comes_before_the_last_build_everywhere(two_builds: tuple[Path, Path]) -> None:
    here, elsewhere = two_builds
    assert spec.last_build() == elsewhere.resolve()
    assert spec.locate() == str(here.resolve())
    assert spec.load()[spec.SPLIT].num_rows == 200
    assert datasets.load_dataset(spec.NAME)[spec.SPLIT].num_rows == 200, "datasets itself reads the same folder"
    task = harness_utils().load()
    assert task.fsb_source["path"] == str(here.resolve())
    assert task.fsb_source["fingerprint"] == json.loads((here / "stats.json").read_text())["fingerprint"]


def test_explicit_then_environment_first_and_the_last_build_last(two_builds: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    here, elsewhere = two_builds
    assert spec.locate(str(elsewhere)) == str(elsewhere.resolve())
    monkeypatch.setenv("FSB_DATASET", str(elsewhere))
    assert spec.locate() == str(elsewhere.resolve())
    assert spec.locate(str(here)) == str(here.resolve()), "an explicit source beats $FSB_DATASET"
    monkeypatch.delenv("FSB_DATASET")
    monkeypatch.chdir(here.parent.parent)  # no ./fifty_shades_of_bias here
    assert spec.locate() == str(elsewhere.resolve())


def test_provenance_names_the_folder_and_its_content(two_builds: tuple[Path, Path]) -> None:
    here, _ = two_builds
    info = spec.provenance(spec.locate())
    recorded = json.loads((here / "stats.json").read_text())["fingerprint"]
    assert info == {"path": str(here.resolve()), "fingerprint": recorded, "fingerprint_from": "data files"}
    assert spec.describe(info) == f"{here.resolve()} (fingerprint {recorded[:16]})"
    (parquet,) = (here / "data" / "default").glob("*.parquet")
    parquet.write_bytes(parquet.read_bytes() + b"\0")  # changed after the build: the fingerprint says so
    assert spec.provenance(str(here))["fingerprint"] != recorded
