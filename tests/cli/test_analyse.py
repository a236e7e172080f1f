"""`fsb analyse --json` in process: the numbers of analysis.json (plus out) as JSON on stdout, the same
numbers the folder holds; the text summary otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsb.cli.app import main
from fsb.data.dataset import build_dataset
from tests._support import make_raw


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("analyse")
    gens, ann = make_raw(root / "raw", n=24)
    return build_dataset(gens, ann, root / "fifty_shades_of_bias", record=False).out


def test_analyse_json_is_analysis_json(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "analysis"
    assert main(["analyse", str(dataset), "--out", str(out), "--min-count", "1", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed.pop("out") == str(out)
    assert printed == json.loads((out / "analysis.json").read_text(encoding="utf-8"))
    assert printed["n_sentences"] == 24


def test_analyse_text_summary_without_json(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "analysis"
    assert main(["analyse", str(dataset), "--out", str(out), "--min-count", "1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("analysed 24 sentences from ") and "histogram (bins of 0.1)" in text
