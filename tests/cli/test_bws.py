"""The bws stage's commands in process: `fsb tuples --extend --invalid`, `fsb reliability` on too few items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsb.bws.tuples import read_design
from fsb.cli.app import main
from tests._support import make_raw

_ROWS = [
    "1,2,3,4,1,4",
    "1,1,5,6,5,6",  # line 3: a tuple repeating an item
    "5,6,7,8,5,8",
    "9,10,11,12,9,9",  # line 5: best = worst
    "1,5,9,12,12,1",
    "2,6,10,3,2,10",
    "3,7,11,4,7,4",
    "4,8,12,2,8,2",
]


def _study(folder: Path) -> tuple[Path, Path]:
    judgments = folder / "judgments.csv"
    judgments.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\n" + "\n".join(_ROWS) + "\n")
    new = folder / "new.txt"
    new.write_text("\n".join(str(i) for i in range(101, 109)) + "\n")
    return judgments, new


def test_tuples_extend_refuses_quality_control_rows_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    judgments, new = _study(tmp_path)
    out = tmp_path / "ext.csv"
    assert main(["tuples", str(new), "--extend", str(judgments), "--appearances", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "line 3" in err and "--invalid" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("policy", ["count", "drop"])
def test_tuples_extend_passes_invalid_and_says_what_it_let_through(tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str) -> None:
    judgments, new = _study(tmp_path)
    out = tmp_path / f"{policy}.csv"
    argv = ["tuples", str(new), "--extend", str(judgments), "--appearances", "2", "--out", str(out), "--invalid", policy]
    assert main(argv) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["existing_irregular"] and result["existing_irregular"] in captured.err
    assert ("counted" in captured.err) == (policy == "count")
    assert set(read_design(out).drop(columns="tuple_id").to_numpy().ravel().tolist()) >= set(range(101, 109))


def test_tuples_invalid_choices_are_the_shared_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["tuples", "10", "--out", "x.csv", "--invalid", "ignore"])
    assert e.value.code == 2
    assert "'refuse', 'count', 'drop'" in capsys.readouterr().err


def test_reliability_on_one_row_says_undefined_once_per_figure_without_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One judgment row: no split has 2 items in both halves, so every figure is undefined; the text says so
    once per figure (split-half r, full-panel reliability, noise ceiling), never "nan" nor a square root of a
    negative; --json carries the reason beside the NaN figures. Exit 0, as for any other figures."""
    one = tmp_path / "one.csv"
    one.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\n1,2,3,4,1,4\n")
    assert main(["reliability", str(one)]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out.lower() and "square root" not in out
    undefined = [line for line in out.splitlines() if "undefined" in line]
    assert len(undefined) == 3 and all("too few items (4 items in 1 judgment row)" in line for line in undefined)
    assert [line.split(":")[0].strip() for line in undefined] == [
        "split-half r (two half-size panels, uncorrected)",
        "full-panel reliability, Spearman-Brown 2r/(1+r)",
        "noise ceiling, sqrt(2r/(1+r))",
    ]
    assert main(["reliability", str(one), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["undefined"].startswith("too few items (4 items") and result["pearson"]["mean"] != result["pearson"]["mean"]


def test_reliability_defined_prints_no_undefined_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, judgments = make_raw(tmp_path, n=40)
    assert main(["reliability", str(judgments), "--trials", "10"]) == 0
    out = capsys.readouterr().out
    assert "undefined" not in out and "Pearson 0." in out
