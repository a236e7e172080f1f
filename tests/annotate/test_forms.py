"""Comparative annotation round trip: design -> forms for annotators -> their answers -> judgments -> dataset."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fifty_shades_of_bias as spec
from fsb.annotate.forms import export_forms, import_judgments
from fsb.bws.tuples import make_tuples
from fsb.core.readers import InputError
from fsb.data.annotators import annotator_key, pseudonym
from fsb.data.dataset import build_dataset
from tests._support import make_raw, run_fsb, write_csv


def fsb(*args: str) -> subprocess.CompletedProcess[str]:
    return run_fsb(*args)


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
    # issue 19: each annotator reaches the dataset under its own keyed-hash pseudonym (never the id as given)
    key = annotator_key()
    assert set(ann["annotator"]) == {pseudonym("ann-a", key), pseudonym("ann-b", key)}
    kept = build_dataset(study["gens"], out, study["dir"] / "kept", record=False, keep_annotator_ids=True)
    assert set(spec.load("annotations", source=str(kept.out))[spec.SPLIT]["annotator"]) == {"ann-a", "ann-b"}, "kept as given"
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
        # the one id rule (fsb.core.tables.id_problem): ASCII digits only, as in the judgments files
        (["\u0660", "1", "2", "x"], "tuple_id", "not an integer id: '\u0660'"),
        (["+0", "1", "2", "x"], "tuple_id", "not an integer id: '+0'"),
    ],
)
def test_bad_answers_are_refused(study: dict[str, Path], row: list[str], field: str, words: str) -> None:
    responses = write_csv(study["dir"] / "answers.csv", ["tuple_id", "best", "worst", "annotator"], [["1", "1", "2", "x"], row])
    out = study["dir"] / "judgments.csv"
    with pytest.raises(InputError) as err:
        import_judgments(responses, study["forms"], out, positions=True)
    assert (err.value.line, err.value.field) == (3, field) and words in err.value.message
    assert not out.exists(), "nothing is written when an answer is refused"


def test_designs_follow_the_one_id_rule(tmp_path: Path) -> None:
    """tuple_id is an id by fsb.core.tables.id_problem (ASCII digits only); items are integers only when every label
    is a canonical id, as in the judgments reader: "007" keeps the labels opaque, so it stays "007"."""
    from fsb.bws.tuples import read_design

    header = ["tuple_id", "Item1", "Item2"]
    with pytest.raises(InputError) as err:
        read_design(write_csv(tmp_path / "d.csv", header, [["0", "1", "2"], ["\u0661", "3", "4"]]))
    assert (err.value.line, err.value.field) == (3, "tuple_id") and "not an integer id" in err.value.message
    ints = read_design(write_csv(tmp_path / "i.csv", header, [["0", "1", "2"], ["1", "3", "40"]]))
    assert ints["Item2"].tolist() == [2, 40]
    opaque = read_design(write_csv(tmp_path / "o.csv", header, [["0", "007", "7"], ["1", "3", "4"]]))
    assert opaque["Item1"].tolist() == ["007", "3"] and opaque["Item2"].tolist() == ["7", "4"]


def test_one_annotator_twice_on_a_tuple_is_refused(study: dict[str, Path]) -> None:
    forms = pd.read_csv(study["forms"])
    a, b = int(forms.loc[0, "Item1"]), int(forms.loc[0, "Item2"])
    responses = write_csv(study["dir"] / "r.csv", ["tuple_id", "best", "worst", "annotator"], [[0, a, b, "x"], [0, b, a, "x"]])
    with pytest.raises(InputError, match=r"'x' already judged tuple 0 \(line 2\)"):
        import_judgments(responses, study["forms"], study["dir"] / "j.csv")


# --- generic item lists ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "rows"),
    [
        (None, [[f"s{i:02d}"] for i in range(1, 21)]),  # one id a line, no header
        (["id", "text"], [[f"s{i:02d}", f"text {i}"] for i in range(1, 21)]),
        (["uid", "response"], [[f"s{i:02d}", f"text {i}"] for i in range(1, 21)]),
        (["item"], [[f"s{i:02d}"] for i in range(1, 21)]),
    ],
)
def test_tuples_accept_plain_item_lists(tmp_path: Path, header: list[str] | None, rows: list[list[str]]) -> None:
    path = tmp_path / "items.csv"
    path.write_text("".join(",".join(r) + "\n" for r in ([header] if header else []) + rows))
    proc = fsb("tuples", str(path), "--out", str(tmp_path / "d.csv"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["n_tuples"], report["appearances_min"], report["appearances_max"], report["max_shared_items"]) == (40, 8, 8, 2)
    design = pd.read_csv(tmp_path / "d.csv", dtype=str)
    assert set(design[["Item1", "Item2", "Item3", "Item4"]].to_numpy().ravel()) == {r[0] for r in rows}


def test_export_takes_an_id_text_list_and_refuses_one_without_texts(tmp_path: Path) -> None:
    ids = write_csv(tmp_path / "ids.txt", ["a"], [[c] for c in "bcdefghijklmnopq"])
    make_tuples(str(ids), tmp_path / "d.csv", appearances=4)
    with_text = write_csv(tmp_path / "items.csv", ["id", "text"], [[c, f"the text of {c}"] for c in "abcdefghijklmnopq"])
    assert export_forms(tmp_path / "d.csv", with_text, tmp_path / "forms.csv") == 17
    forms = pd.read_csv(tmp_path / "forms.csv")
    design = pd.read_csv(tmp_path / "d.csv")
    assert (forms[["Item1", "Item2", "Item3", "Item4"]].to_numpy() == design[["Item1", "Item2", "Item3", "Item4"]].to_numpy()).all()
    assert (forms["Text2"] == "the text of " + forms["Item2"]).all()
    with pytest.raises(InputError, match="no text column"):
        export_forms(tmp_path / "d.csv", ids, tmp_path / "f2.csv")
    short = write_csv(tmp_path / "short.csv", ["id", "text"], [[c, c] for c in "abc"])
    with pytest.raises(InputError, match=r"unknown id '.': no such item in"):
        export_forms(tmp_path / "d.csv", short, tmp_path / "f3.csv")
    numbers = write_csv(tmp_path / "n.csv", ["id", "text"], [[i, f"t{i}"] for i in range(1, 18)])
    with pytest.raises(InputError, match=r"line 2, field 'Item1': unknown id '.': no such item in .*n.csv"):
        export_forms(tmp_path / "d.csv", numbers, tmp_path / "f4.csv")


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("id,text\na,x\nb,y\na,z\n", 4, "duplicate id 'a' (first seen on line 2)"),
        ("id,text\na,x\n,y\n", 3, "empty id"),
        ("id,text\na,x\nb,\n", 3, "empty text"),
        ("a\nb\nc,d\n", 3, "several fields"),
        ("id,text\na,x,extra\n", 2, "3 fields where the header has 2"),
    ],
)
def test_bad_item_lists_are_refused_with_their_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    from fsb.tables.items import read_items

    path = tmp_path / "items.csv"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_items(path)
    assert err.value.line == line and words in err.value.message


def test_integer_ids_sort_numerically_and_match_generations(tmp_path: Path) -> None:
    from fsb.tables.items import read_items

    path = write_csv(tmp_path / "items.csv", ["id"], [[10], [9], [100]])
    items = read_items(path)
    assert items.ids.dtype == np.int64 and items.ids.tolist() == [10, 9, 100]
    gens, _ = make_raw(tmp_path / "raw", n=12)
    assert read_items(gens).ids.tolist() == list(range(1, 13)) and read_items(gens).texts is not None


# --- position balance -----------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "size", "appearances"), [(40, 4, 8), (200, 4, 8), (30, 3, 6), (25, 5, 10), (30, 4, 6), (33, 3, 5)])
def test_design_order_is_random_and_position_balanced_with_the_guarantees_kept(tmp_path: Path, n: int, size: int, appearances: int) -> None:
    report = make_tuples(n, tmp_path / "d.csv", tuple_size=size, appearances=appearances, seed=5)
    design = pd.read_csv(tmp_path / "d.csv").drop(columns="tuple_id").to_numpy()
    counts = np.stack([np.bincount(design[:, p], minlength=n + 1)[1:] for p in range(size)], axis=1)
    assert (counts.sum(axis=1) == appearances).all(), "each item in exactly k tuples"
    shared = max(len(set(a) & set(b)) for i, a in enumerate(design.tolist()) for b in design[i + 1 :].tolist())
    assert shared <= 2 and report["max_shared_items"] == shared
    ascending = int((np.diff(design, axis=1) > 0).all(axis=1).sum())
    assert ascending < len(design) / 4, "not the ascending order of the old design files"
    pos = report["positions"]
    assert pos["ascending_tuples"] == ascending
    spread = counts.max(axis=1) - counts.min(axis=1)
    assert pos["items_balanced"] == int((spread <= 1).sum()) and pos["items_spread_max"] == int(spread.max())
    assert pos["items_balanced"] == n and spread.max() <= 1, "each item in each position equally (floor or ceil of k / size)"
    # far better than a random order within each tuple (measured on the same tuples)
    rng = np.random.default_rng(0)
    shuffled = np.array([rng.permutation(row) for row in design])
    rc = np.stack([np.bincount(shuffled[:, p], minlength=n + 1)[1:] for p in range(size)], axis=1)
    assert (spread <= 1).sum() > ((rc.max(axis=1) - rc.min(axis=1)) <= 1).sum()
    again = make_tuples(n, tmp_path / "d2.csv", tuple_size=size, appearances=appearances, seed=5)
    assert (tmp_path / "d.csv").read_bytes() == (tmp_path / "d2.csv").read_bytes() and again["positions"] == pos


@pytest.mark.parametrize("seed", range(6))
def test_euler_split_halves_every_vertex(seed: int) -> None:
    """Random bipartite multigraphs with even degrees (parallel edges included): each vertex gets exactly
    half of its edges in each colour, and different seeds give different colourings."""
    from fsb.bws.tuples import euler_split

    rng = np.random.default_rng(seed)
    n_left, n_right, degree = 50, 70, 2 * int(rng.integers(1, 4))
    left = np.repeat(np.arange(n_left), degree)
    right = rng.permutation(np.repeat(np.arange(left.size // 2) % n_right, 2))  # every right degree even
    if seed == 0:  # parallel edges: one pair of vertices joined twice more
        left, right = np.concatenate([left, [0, 0]]), np.concatenate([right, [0, 0]])
    colour = euler_split(left, right, np.random.default_rng(seed))
    for vertex in (left, right):
        total = np.bincount(vertex)
        ones = np.bincount(vertex, weights=colour, minlength=total.size)
        assert (ones * 2 == total).all()
    assert not np.array_equal(colour, euler_split(left, right, np.random.default_rng(seed + 100)))


@pytest.mark.parametrize(
    ("size", "method"), [(2, "_balance_by_euler_splits"), (8, "_balance_by_euler_splits"), (4, "_balance_by_matchings")]
)
def test_both_exact_balancers_balance_exactly(size: int, method: str) -> None:
    """Euler splits (sizes 2, 4, 8, ...) and perfect matchings (any size) give every tuple every position
    once and every item every position floor or ceil of appearances / size times, keeping the tuples' sets."""
    import fsb.bws.tuples as annotate

    n, appearances = 64, 2 * size
    rng = np.random.default_rng(1)
    design = np.stack([rng.permutation(n)[:size] for _ in range(n * appearances // size)])
    out = getattr(annotate, method)(design, n, np.random.default_rng(2))
    assert out is not None and (np.sort(out, axis=1) == np.sort(design, axis=1)).all()
    counts = np.stack([np.bincount(out[:, p], minlength=n) for p in range(size)], axis=1)
    assert (counts.max(axis=1) - counts.min(axis=1) <= 1).all()


def test_greedy_fallback_balances_approximately() -> None:
    from fsb import bws
    from fsb.bws.tuples import balance_greedy, position_report

    design = bws.bws_design(200, seed=0)
    out = balance_greedy(design, 200, np.random.default_rng(0))
    assert (np.sort(out, axis=1) == np.sort(design, axis=1)).all()
    report = position_report(out, 200)
    assert report["items_spread_max"] <= 2 and report["items_balanced"] >= 150


def test_position_report_of_an_ascending_design_shows_the_imbalance() -> None:
    from fsb import bws
    from fsb.bws.tuples import position_report

    design = np.sort(bws.bws_design(40, seed=0), axis=1)
    report = position_report(design, 40)
    assert report["ascending_tuples"] == 80
    assert report["per_item_per_position_max"] == 8, "the smallest item always sits first"


# --- Label Studio files (the real server round trip is in tests/annotate/test_labelstudio.py) -------------------


def _ls_export(tmp_path: Path, annotations: list[dict], items: list[int] | None = None) -> Path:
    data = {"tuple_id": 0, **{f"item{j + 1}": v for j, v in enumerate(items or [5, 2, 9, 1])}}
    path = tmp_path / "export.json"
    path.write_text(json.dumps([{"id": 7, "data": data, "annotations": annotations}]))
    return path


def _ann(i: int, best: str, worst: str, who: object = 3, **extra: object) -> dict:
    result = [
        {"from_name": f, "to_name": "text1", "type": "choices", "value": {"choices": [v]}} for f, v in (("best", best), ("worst", worst))
    ]
    return {"id": i, "completed_by": who, "result": result, "created_at": "2026-12-01T06:00:00.5Z", **extra}


def test_label_studio_export_files(study: dict[str, Path]) -> None:
    import xml.etree.ElementTree as ET

    from fsb.annotate.forms import export_label_studio

    out = study["dir"] / "ls"
    summary = export_label_studio(study["design"], study["gens"], out)
    assert summary["tasks"] == 80
    root = ET.fromstring((out / "labeling_config.xml").read_text())
    choices = {c.get("name"): [x.get("value") for x in c] for c in root.iter("Choices")}
    assert choices == {"best": ["1", "2", "3", "4"], "worst": ["1", "2", "3", "4"]}
    assert [t.get("value") for t in root.iter("Text")] == ["$text1", "$text2", "$text3", "$text4"]
    tasks = json.loads((out / "tasks.json").read_text())
    design = pd.read_csv(study["design"])
    first = tasks[0]["data"]
    assert [first[f"item{j}"] for j in range(1, 5)] == design.loc[0, ["Item1", "Item2", "Item3", "Item4"]].tolist()
    assert first["text3"] == f"generated sentence number {first['item3']}, with a comma"


def test_label_studio_import_maps_positions_to_ids_and_keeps_who_and_when(tmp_path: Path) -> None:
    from fsb.annotate.forms import import_label_studio

    export = _ls_export(
        tmp_path,
        [
            _ann(1, "3", "4"),
            _ann(2, "1", "2", who={"id": 4, "email": "b@x.org"}),
            {"id": 3, "completed_by": 5, "was_cancelled": True, "result": []},
        ],
    )
    summary = import_label_studio(export, tmp_path / "j.csv")
    assert (summary["judgments"], summary["cancelled_left_out"], summary["annotators"]) == (2, 1, 2)
    got = pd.read_csv(tmp_path / "j.csv", dtype=str)
    assert got.values.tolist() == [
        ["5", "2", "9", "1", "9", "1", "3", "2026-12-01T06:00:00.5Z"],
        ["5", "2", "9", "1", "5", "2", "4", "2026-12-01T06:00:00.5Z"],
    ]


@pytest.mark.parametrize(
    ("annotations", "words"),
    [
        ([_ann(1, "2", "2")], "task 7, annotation 1: best and worst are the same text (position 2)"),
        ([_ann(1, "5", "2")], "'best' choice '5' is not a position 1..4"),
        ([{"id": 1, "completed_by": 3, "result": []}], "task 7, annotation 1: no 'best' choice"),
        ([_ann(1, "1", "2"), _ann(2, "3", "4")], "annotation 2: annotator '3' already judged tuple 0 (annotation 1)"),
        ([], "no submitted annotations in 1 tasks"),
    ],
)
def test_bad_label_studio_exports_are_refused(tmp_path: Path, annotations: list[dict], words: str) -> None:
    from fsb.annotate.forms import import_label_studio

    export = _ls_export(tmp_path, annotations)
    with pytest.raises(InputError) as err:
        import_label_studio(export, tmp_path / "j.csv")
    assert words in str(err.value)
    assert not (tmp_path / "j.csv").exists()


def test_label_studio_import_checks_items_against_the_design(tmp_path: Path) -> None:
    from fsb.annotate.forms import import_label_studio

    design = write_csv(tmp_path / "d.csv", ["tuple_id", "Item1", "Item2", "Item3", "Item4"], [[0, 1, 2, 5, 8]])
    export = _ls_export(tmp_path, [_ann(1, "1", "2")])
    with pytest.raises(InputError, match=r"task 7: items \[5, 2, 9, 1\] differ from tuple 0"):
        import_label_studio(export, tmp_path / "j.csv", design_csv=design)


def test_a_json_export_given_as_csv_answers_says_which_format(tmp_path: Path, study: dict[str, Path]) -> None:
    export = _ls_export(tmp_path, [_ann(1, "1", "2")])
    proc = fsb("annotate", "import", str(export), "--tuples", str(study["forms"]), "--out", str(tmp_path / "j.csv"))
    assert proc.returncode == 2 and "--format label-studio" in proc.stderr and proc.stderr.count("\n") == 1


def test_csv_answers_keep_their_timestamps(study: dict[str, Path]) -> None:
    forms = pd.read_csv(study["forms"])
    a, b = int(forms.loc[0, "Item1"]), int(forms.loc[0, "Item3"])
    responses = write_csv(
        study["dir"] / "r.csv", ["tuple_id", "best", "worst", "annotator", "timestamp"], [[0, a, b, "x", "2026-12-01T06:00:00Z"]]
    )
    import_judgments(responses, study["forms"], study["dir"] / "j.csv")
    got = pd.read_csv(study["dir"] / "j.csv", dtype=str)
    assert list(got.columns)[-2:] == ["Annotator", "Timestamp"] and got.loc[0, "Timestamp"] == "2026-12-01T06:00:00Z"
    assert got.loc[0, ["BestItem", "WorstItem"]].astype(int).tolist() == [a, b]


def test_export_joins_several_item_files_and_refuses_an_id_in_two(tmp_path: Path) -> None:
    """Bug: an extended design (`fsb tuples NEW --extend EXISTING`) shows existing and new items, but
    `--items` took one file: "unknown id 1000: no such item in new.jsonl". Now --items repeats and the
    files are joined; an id in two files is refused with one line naming both."""
    old = write_csv(tmp_path / "old.csv", ["id", "text"], [[i, f"old {i}"] for i in range(1, 13)])
    new = write_csv(tmp_path / "new.csv", ["id", "text"], [[i, f"new {i}"] for i in range(13, 21)])
    design = write_csv(tmp_path / "d.csv", ["tuple_id", "Item1", "Item2", "Item3", "Item4"], [[0, 1, 13, 14, 15], [1, 16, 2, 17, 18]])
    one = fsb("annotate", "export", str(design), "--items", str(new), "--out", str(tmp_path / "f0.csv"))
    assert one.returncode == 2 and "unknown id 1: no such item in" in one.stderr
    proc = fsb("annotate", "export", str(design), "--items", str(old), "--items", str(new), "--out", str(tmp_path / "f.csv"))
    assert proc.returncode == 0, proc.stderr
    forms = pd.read_csv(tmp_path / "f.csv")
    assert forms.loc[0, ["Text1", "Text2"]].tolist() == ["old 1", "new 13"] and forms.loc[1, "Text2"] == "old 2"
    clash = write_csv(tmp_path / "clash.csv", ["id", "text"], [[20, "again"], [21, "x"]])
    bad = fsb("annotate", "export", str(design), "--items", str(new), "--items", str(clash), "--out", str(tmp_path / "f2.csv"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "clash.csv" in bad.stderr and "duplicate id 20: also in" in bad.stderr and "new.csv (line 9)" in bad.stderr
    assert not (tmp_path / "f2.csv").exists()
    ls = tmp_path / "ls"
    assert (
        fsb(
            "annotate", "export", str(design), "--items", str(old), "--items", str(new), "--format", "label-studio", "--out", str(ls)
        ).returncode
        == 0
    )
    assert "new 18" in (ls / "tasks.json").read_text(encoding="utf-8")


def test_forms_quote_a_carriage_return_in_a_text(tmp_path: Path) -> None:
    """Found running the update path on a tiny model's generations: a text holding a lone \\r was written
    unquoted (pandas and the csv module quote \\n but not \\r under a \\n terminator), so every reader split
    the form there and `fsb annotate import --tuples forms.csv` refused it. Now such fields are quoted."""
    texts = {1: "plain", 2: "a\rb", 3: 'say "hi", then', 4: "two\nlines", 5: "x\x0fy", 6: "NA", 7: "t7", 8: "t8"}
    items = tmp_path / "items.csv"
    items.write_text("id,text\n" + "".join(f'{k},"{v.replace(chr(34), chr(34) * 2)}"\n' for k, v in texts.items()), encoding="utf-8")
    design = write_csv(tmp_path / "d.csv", ["tuple_id", "Item1", "Item2", "Item3", "Item4"], [[0, 1, 2, 3, 4], [1, 5, 6, 7, 8]])
    assert export_forms(design, items, tmp_path / "f.csv") == 2
    body = (tmp_path / "f.csv").read_bytes()
    assert body.startswith(b'tuple_id,Item1,Item2,Item3,Item4,Text1,Text2,Text3,Text4\n0,1,2,3,4,plain,"a\rb",')
    forms = pd.read_csv(tmp_path / "f.csv", keep_default_na=False)
    assert forms.shape == (2, 9) and [*forms.loc[0, ["Text2", "Text3", "Text4"]], *forms.loc[1, ["Text1", "Text2"]]] == [
        "a\rb",
        'say "hi", then',
        "two\nlines",
        "x\x0fy",
        "NA",
    ]
    answers = write_csv(tmp_path / "a.csv", ["tuple_id", "best", "worst"], [[0, 2, 3], [1, 5, 8]])
    proc = fsb("annotate", "import", str(answers), "--tuples", str(tmp_path / "f.csv"), "--out", str(tmp_path / "j.csv"))
    assert proc.returncode == 0, proc.stderr
    assert pd.read_csv(tmp_path / "j.csv")["BestItem"].tolist() == [2, 5]
