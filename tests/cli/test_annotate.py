"""`fsb annotate export` in process: the forms are the data (a file), its "wrote N forms" commentary goes to
stderr, and `--json` prints the summary as data on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fsb.cli.app import main

ITEMS = "id,text\n1,one\n2,two\n3,three\n4,four\n5,five\n6,six\n"
DESIGN = "tuple_id,Item1,Item2,Item3,Item4\n0,1,2,3,4\n1,5,6,1,2\n2,3,4,5,6\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "items.csv").write_text(ITEMS)
    (tmp_path / "design.csv").write_text(DESIGN)
    return tmp_path / "design.csv", tmp_path / "items.csv"


def test_export_commentary_is_on_stderr_and_stdout_stays_empty(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    design, items = files
    out = design.parent / "forms.csv"
    assert main(["annotate", "export", str(design), "--items", str(items), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"wrote 3 annotation forms -> {out}" in captured.err
    assert len(pd.read_csv(out)) == 3


def test_export_json_prints_the_summary_as_data(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    design, items = files
    out = design.parent / "forms.csv"
    assert main(["annotate", "export", str(design), "--items", str(items), "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"forms": 3, "out": str(out), "instructions": None}
    assert "wrote" not in captured.err
