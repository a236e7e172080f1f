"""`fsb baseline --json` in process: the summary (name, out, provenance and its figures) as JSON on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsb.cli.app import main
from fsb.data.dataset import build_dataset
from tests._support import make_raw


def test_baseline_json_prints_the_summary_as_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gens, ann = make_raw(tmp_path / "raw", n=120)
    dataset = build_dataset(gens, ann, tmp_path / "fifty_shades_of_bias", record=False).out
    out = tmp_path / "mean.csv"
    assert main(["baseline", "mean", "--dataset", str(dataset), "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["name"] == "mean" and printed["out"] == str(out) and printed["provenance"] == f"{out}.json"
    assert printed["sentences"] == 120 and printed["baseline"] == "mean"
    assert out.is_file() and Path(printed["provenance"]).is_file()
