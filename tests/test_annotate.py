"""Comparative annotation round trip: design -> forms for annotators -> their answers -> judgments -> dataset."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fifty_shades_of_bias as spec
from fsb._io import InputError
from fsb.annotate import export_forms, import_judgments, make_tuples
from fsb.dataset import build_dataset
from tests._support import make_raw, write_csv


def fsb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fsb", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def study(tmp_path: Path) -> dict[str, Path]:
    gens, _ = make_raw(tmp_path / "raw", n=40)
    design = tmp_path / "design.csv"
    make_tuples(str(gens), design, seed=1)
    forms = tmp_path / "forms.csv"
    export_forms(design, gens, forms, seed=2)
    return {"gens": gens, "design": design, "forms": forms, "dir": tmp_path}


def test_forms_show_each_tuple_with_its_sentences(study: dict[str, Path]) -> None:
    forms = pd.read_csv(study["forms"])
    design = pd.read_csv(study["design"])
    assert list(forms.columns) == ["tuple_id", "Item1", "Item2", "Item3", "Item4", "Text1", "Text2", "Text3", "Text4"]
    assert len(forms) == 80
    items = ["Item1", "Item2", "Item3", "Item4"]
    assert (np.sort(forms[items].to_numpy(), axis=1) == np.sort(design[items].to_numpy(), axis=1)).all()
    assert (forms[items].to_numpy() != design[items].to_numpy()).any(), "display order is shuffled"
    assert all(forms.loc[i, "Text1"] == f"generated sentence number {forms.loc[i, 'Item1']}, with a comma" for i in range(10))


def test_answers_round_trip_into_a_dataset_with_annotators(study: dict[str, Path]) -> None:
    forms = pd.read_csv(study["forms"])
    rows = []
    for annotator in ("ann-a", "ann-b"):
        for _, f in forms.iterrows():
            shown = [int(f[f"Item{j}"]) for j in range(1, 5)]
            rows.append([int(f["tuple_id"]), shown.index(max(shown)) + 1, shown.index(min(shown)) + 1, annotator])
    responses = write_csv(study["dir"] / "answers.csv", ["tuple_id", "best", "worst", "annotator"], rows)
    out = study["dir"] / "judgments.csv"
    proc = fsb("annotate", "import", str(responses), "--tuples", str(study["forms"]), "--out", str(out), "--positions")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["judgments"] == 160 and summary["tuples_judged"] == 80
    judged = pd.read_csv(out)
    assert list(judged.columns) == ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator"]
    assert (judged["BestItem"] == judged[["Item1", "Item2", "Item3", "Item4"]].max(axis=1)).all()
    built = build_dataset(study["gens"], out, study["dir"] / "ds", record=False)
    assert built.stats["n_annotations"] == 160
    ann = spec.load("annotations", source=str(study["dir"] / "ds"))[spec.SPLIT]
    assert set(ann["annotator"]) == {"ann-a", "ann-b"}
    assert ann[0]["items"] == forms.loc[0, ["Item1", "Item2", "Item3", "Item4"]].tolist(), "the order annotators saw"
    scores = spec.load(source=str(study["dir"] / "ds"))[spec.SPLIT]
    assert scores[39]["id"] == 40 and scores[39]["score"] == 1.0, "a perfectly consistent judge: the top item always best"


@pytest.mark.parametrize(
    ("row", "field", "words"),
    [
        (["999", "1", "2", "x"], "tuple_id", "no tuple 999"),
        (["0", "1", "1", "x"], "worst", "best and worst are the same item"),
        (["0", "7", "1", "x"], "best", "position 7 is outside 1..4"),
        (["0", "1", "two", "x"], "worst", "not an integer"),
    ],
)
def test_bad_answers_are_refused(study: dict[str, Path], row: list[str], field: str, words: str) -> None:
    responses = write_csv(study["dir"] / "answers.csv", ["tuple_id", "best", "worst", "annotator"], [["1", "1", "2", "x"], row])
    out = study["dir"] / "judgments.csv"
    with pytest.raises(InputError) as err:
        import_judgments(responses, study["forms"], out, positions=True)
    assert (err.value.line, err.value.field) == (3, field) and words in err.value.message
    assert not out.exists(), "nothing is written when an answer is refused"


def test_one_annotator_twice_on_a_tuple_is_refused(study: dict[str, Path]) -> None:
    forms = pd.read_csv(study["forms"])
    a, b = int(forms.loc[0, "Item1"]), int(forms.loc[0, "Item2"])
    responses = write_csv(study["dir"] / "r.csv", ["tuple_id", "best", "worst", "annotator"], [[0, a, b, "x"], [0, b, a, "x"]])
    with pytest.raises(InputError, match=r"'x' already judged tuple 0 \(line 2\)"):
        import_judgments(responses, study["forms"], study["dir"] / "j.csv")
