"""`fsb.annotate.layouts`: judgments in the layouts other tools write, read from files these tests make in
each tool's exact layout (the source of each layout is in the test's docstring), converted to fsb's
judgments layout, and every ambiguous or foreign file refused in one line naming file, line and field."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fsb.annotate.forms import import_label_studio
from fsb.annotate.layouts import ColumnMap, check_layout, import_layout
from fsb.core.readers import InputError
from fsb.tables.judgments import read_annotations
from tests._support import read_rows, write_csv

# The raw data files of Hollis's best-worst tools (samples/aoa_raw_data/id_<group>_<id>_<uuid>_task2_BestWorst.csv,
# one file a participant, 260 trials each): this header, the two scale anchors in best_text/worst_text, and
# only the two unchosen words of each 4-tuple in option1, option2.
HOLLIS_RAW = ["group", "id", "uuid", "trial", "best_text", "worst_text", "best", "worst", "option1", "option2"]

# The header of an MTurk batch results file (Manage > Results > Download CSV), in MTurk's order: the HIT's and
# assignment's fields, then Input.<column> for each column of the batch's input CSV (here fsb's forms:
# tuple_id, Item1..K, Text1..K), then Answer.<name> for each named form field of the template, Approve, Reject.
MTURK_FIELDS = [
    *("HITId", "HITTypeId", "Title", "Description", "Keywords", "Reward", "CreationTime", "MaxAssignments"),
    *("RequesterAnnotation", "AssignmentDurationInSeconds", "AutoApprovalDelayInSeconds", "Expiration"),
    *("NumberOfSimilarHITs", "LifetimeInSeconds", "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime"),
    *("SubmitTime", "AutoApprovalTime", "ApprovalTime", "RejectionTime", "RequesterFeedback", "WorkTimeInSeconds"),
    *("LifetimeApprovalRate", "Last30DaysApprovalRate", "Last7DaysApprovalRate"),
]


def hollis_file(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    """A CSV as the tools' Python 2 scripts and their sample data write it (csv module, \\r\\n line ends)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    return path


def judgments(path: Path) -> list[list[str]]:
    return read_rows(path)


def test_hollis_raw_data_folder_one_file_a_participant(tmp_path: Path) -> None:
    """Layout: Hollis's best-worst tools, raw data files (haratimo/best-worst-tools,
    bestworst_tools_python3/samples/aoa_raw_data/*.csv: header `group,id,uuid,trial,best_text,worst_text,best,worst,
    option1,option2`, only the unchosen words in the option columns; README: "python scripts/flag_noncompliant_users.py
    ... --id_column=uuid"). The uuid column is the annotator; every row gives a 4-tuple."""
    folder = tmp_path / "aoa_raw_data"
    anchors = ["learned when younger", "learned when older"]
    hollis_file(folder / "id_1_10_1485986147_task2_BestWorst.csv", HOLLIS_RAW, [
        [1, 10, 1485986147, 0, *anchors, "stress", "twilight", "pamphlet", "irritate"],
        [1, 10, 1485986147, 1, *anchors, "innocent", "despairing", "wealthy", "immoral"],
    ])  # fmt: skip
    hollis_file(folder / "id_1_11_1485986245_task2_BestWorst.csv", HOLLIS_RAW, [
        [1, 11, 1485986245, 0, *anchors, "pamphlet", "stress", "twilight", "wealthy"],
    ])  # fmt: skip
    (folder / "notes.txt").write_text("not a data file")
    out = tmp_path / "j.csv"
    report = import_layout(folder, "best-worst-tools", out)
    assert report["skipped"] == {str(folder / "notes.txt"): "not a .csv file (.txt)"}
    assert report["files"] == 2 and report["judgments"] == 3 and report["tuple_size"] == 4 and report["annotators"] == 2
    assert report["annotator_from"] == {"uuid": 2} and report["rows_by_variant"]["only unchosen items among the options"] == 3
    assert judgments(out) == [
        ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator"],
        ["stress", "twilight", "pamphlet", "irritate", "stress", "twilight", "1485986147"],
        ["innocent", "despairing", "wealthy", "immoral", "innocent", "despairing", "1485986147"],
        ["pamphlet", "stress", "twilight", "wealthy", "pamphlet", "stress", "1485986245"],
    ]
    ann = read_annotations(out)  # fsb's own reader takes it as it is
    assert len(ann) == 3 and sorted(set(ann.annotator.tolist())) == ["1485986147", "1485986245"]


def test_hollis_readme_layout_lists_all_items_and_a_folder_names_annotators_by_file(tmp_path: Path) -> None:
    """Layout: Hollis's best-worst tools README ("one column called best, one column called worst, and one column
    for each of your K items ... whatever is in the best and worst columns will also be duplicated in two of your
    other K columns") and score_trials.py's docstring (`best,worst,option1,option2,option3,option4`, then
    `dog,ennui,justice,dog,haven,ennui`). Without an id column, score_trials/flag_noncompliant_users name a
    participant by the file: here the file's stem. An RT column is any further column, ignored."""
    header = ["best", "worst", "option1", "option2", "option3", "option4", "rt"]
    hollis_file(tmp_path / "p" / "anna.csv", header, [["dog", "ennui", "justice", "dog", "haven", "ennui", 1532]])
    hollis_file(tmp_path / "p" / "ben.csv", header, [["haven", "justice", "justice", "dog", "haven", "ennui", 988]])
    report = import_layout(tmp_path / "p", "best-worst-tools", tmp_path / "j.csv")
    assert report["rows_by_variant"] == {"all items among the options": 2, "only unchosen items among the options": 0}
    assert report["annotator_from"] == {"the file's name": 2}
    assert judgments(tmp_path / "j.csv")[1:] == [
        ["justice", "dog", "haven", "ennui", "dog", "ennui", "anna"],
        ["justice", "dog", "haven", "ennui", "haven", "justice", "ben"],
    ]


def test_hollis_single_file_without_id_has_no_annotator_and_filtered_output_keeps_user(tmp_path: Path) -> None:
    """Layout: one master file of all trials (README: "you can also feed the script a master file"), and the file
    flag_noncompliant_users.py --filter writes (header `User,best,worst,option1,option2`, its User column the
    participant). A single file with no id column has no Annotator column: one file is not one participant."""
    plain = hollis_file(tmp_path / "all.csv", ["best", "worst", "option1", "option2"], [["a", "b", "c", "d"]])
    import_layout(plain, "best-worst-tools", tmp_path / "j1.csv")
    assert judgments(tmp_path / "j1.csv") == [["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"], ["a", "b", "c", "d", "a", "b"]]
    filtered = hollis_file(tmp_path / "kept.csv", ["User", "best", "worst", "option1", "option2"], [["p7", "a", "b", "c", "d"]])
    assert import_layout(filtered, "best-worst-tools", tmp_path / "j2.csv")["annotator_from"] == {"User": 1}
    assert judgments(tmp_path / "j2.csv")[1] == ["a", "b", "c", "d", "a", "b", "p7"]
    other = hollis_file(tmp_path / "o.csv", ["subject", "best", "worst", "option1", "option2"], [["s1", "a", "b", "c", "d"]])
    import_layout(other, "best-worst-tools", tmp_path / "j3.csv", columns=ColumnMap(annotator="subject"))
    assert judgments(tmp_path / "j3.csv")[1][-1] == "s1"


@pytest.mark.parametrize(
    ("row", "field", "words"),
    [
        # score_trials.py's own docstring example, second row: best 'tooth' is no option, worst 'hatred' is (twice)
        (["tooth", "hatred", "hatred", "microbe", "photon", "hatred"], "best", "ambiguous: worst 'hatred' is among the options but best"),
        (["dog", "dog", "justice", "dog", "haven", "ennui"], "worst", "best and worst are the same item 'dog'"),
        (["dog", "ennui", "dog", "dog", "haven", "ennui"], "option2", "the tuple repeats item 'dog'"),
        (["dog", "", "justice", "dog", "haven", "ennui"], "worst", "empty value"),
        (["dog", "ennui", "jus\u200btice", "dog", "haven", "ennui"], "option1", "U+200B"),
        (["dog", "ennui", "jus\ntice", "dog", "haven", "ennui"], "option1", "a line break inside an id"),
    ],
)
def test_ambiguous_hollis_rows_are_refused_naming_file_line_and_field(tmp_path: Path, row: list[str], field: str, words: str) -> None:
    """Layout: Hollis's README variant (`best,worst,option1..option4`). The tools' parser silently removes best and
    worst from the options when present, so these rows would be scored as something nobody chose."""
    good = ["dog", "ennui", "justice", "dog", "haven", "ennui"]
    path = hollis_file(tmp_path / "t.csv", ["best", "worst", "option1", "option2", "option3", "option4"], [good, row])
    with pytest.raises(InputError) as e:
        import_layout(path, "best-worst-tools", tmp_path / "j.csv")
    assert (e.value.line, e.value.field) == (3, field) and words in e.value.message
    assert not (tmp_path / "j.csv").exists(), "nothing is written"


def test_hollis_rows_must_agree_on_the_tuple_size_and_labels_are_nfc(tmp_path: Path) -> None:
    """Layout: Hollis's raw data (2 option columns: 4-tuples) beside a README-layout file (2 option columns: a
    2-tuple). Words are compared as fsb compares ids: 'e' + a combining acute is the precomposed 'é'."""
    folder = tmp_path / "mixed"
    hollis_file(folder / "a.csv", ["best", "worst", "option1", "option2"], [["caf\u00e9", "b", "c", "d"]])
    hollis_file(folder / "b.csv", ["best", "worst", "option1", "option2"], [["cafe\u0301", "b", "cafe\u0301", "b"]])
    with pytest.raises(InputError, match=r"a tuple of 2 items where the first \(.*a\.csv line 2\) has 4") as e:
        import_layout(folder, "best-worst-tools", tmp_path / "j.csv")
    assert e.value.path.endswith("b.csv") and e.value.line == 2
    (folder / "b.csv").unlink()
    hollis_file(folder / "b.csv", ["best", "worst", "option1", "option2"], [["b", "cafe\u0301", "c", "d"]])
    import_layout(folder, "best-worst-tools", tmp_path / "j.csv")
    assert read_annotations(tmp_path / "j.csv").labels.tolist() == ["b", "c", "caf\u00e9", "d"]


def mturk_file(path: Path, rows: list[tuple[str, str, str, list[str], str, str]], extra_inputs: list[str] | None = None) -> Path:
    """An MTurk batch results CSV of fsb's forms: rows of (assignment, worker, status, items, best, worst), every
    field quoted, as MTurk writes it."""
    header = [*MTURK_FIELDS, "Input.tuple_id", *(f"Input.Item{j}" for j in range(1, 5)), *(f"Input.Text{j}" for j in range(1, 5))]
    header += [*(extra_inputs or []), "Answer.best", "Answer.worst", "Approve", "Reject"]
    body = []
    for n, (assignment, worker, status, items, best, worst) in enumerate(rows):
        meta = {"HITId": f"3HIT{n // 2}", "AssignmentId": assignment, "WorkerId": worker, "AssignmentStatus": status}
        meta |= {"Title": "Which sentence is the most biased, and which the least?", "Reward": "$0.05"}
        meta |= {"SubmitTime": "Wed Dec 02 10:15:00 PST 2026", "Last7DaysApprovalRate": "0% (0/0)"}
        body.append([meta.get(h, "") for h in MTURK_FIELDS] + [str(n // 2), *items, *(f"text of {i}, with a comma" for i in items)])
        body[-1] += ["" for _ in extra_inputs or []] + [best, worst, "", ""]
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows([header, *body])
    return path


def test_mturk_batch_results_drop_rejected_assignments_and_keep_workers(tmp_path: Path) -> None:
    """Layout: MTurk's batch results CSV (Requester UI, Manage > Review Results > Download CSV; columns documented
    in the MTurk Requester guide, "Batch results": HITId ... Last7DaysApprovalRate, Input.<input column>,
    Answer.<form field name>, Approve, Reject; AssignmentStatus Submitted, Approved or Rejected). An HTML template
    for fsb's forms shows ${Text1}..${Text4} and has two radio groups named best and worst with value ${Item1}.."""
    path = mturk_file(tmp_path / "Batch_5123456_batch_results.csv", [
        ("3A1", "A1WORKER", "Approved", ["5", "2", "9", "1"], "9", "1"),
        ("3A2", "A2WORKER", "Submitted", ["5", "2", "9", "1"], "5", "2"),
        ("3A3", "A1WORKER", "Rejected", ["3", "4", "6", "7"], "3", "3"),
        ("3A4", "A2WORKER", "Approved", ["3", "4", "6", "7"], "7", "3"),
    ])  # fmt: skip
    report = import_layout(path, "mturk", tmp_path / "j.csv")
    assert report["rejected_left_out"] == 1 and report["judgments"] == 3 and report["annotators"] == 2
    assert judgments(tmp_path / "j.csv") == [
        ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator"],
        ["5", "2", "9", "1", "9", "1", "A1WORKER"],
        ["5", "2", "9", "1", "5", "2", "A2WORKER"],
        ["3", "4", "6", "7", "7", "3", "A2WORKER"],
    ]


def test_mturk_positions_and_another_template_by_column_map(tmp_path: Path) -> None:
    """Layout: MTurk's batch results CSV of a template whose radio values are the places 1..4 (--positions), and
    of another template (items in Input.w1..w4, choices in Answer.most/Answer.least) read through the column map."""
    path = mturk_file(tmp_path / "b.csv", [("3A1", "W1", "Approved", ["5", "2", "9", "1"], "3", "4")])
    import_layout(path, "mturk", tmp_path / "j.csv", positions=True)
    assert judgments(tmp_path / "j.csv")[1] == ["5", "2", "9", "1", "9", "1", "W1"]
    header = [*MTURK_FIELDS, "Input.w1", "Input.w2", "Input.w3", "Input.w4", "Answer.most", "Answer.least", "Approve", "Reject"]
    meta = {"HITId": "3H", "AssignmentId": "3A", "WorkerId": "W9", "AssignmentStatus": "Submitted"}
    other = write_csv(
        tmp_path / "o.csv", header, [[meta.get(h, "") for h in MTURK_FIELDS] + ["ox", "cat", "ant", "elk", "ox", "ant", "", ""]]
    )
    cmap = ColumnMap(items=["Input.w1", "Input.w2", "Input.w3", "Input.w4"], best="Answer.most", worst="Answer.least")
    import_layout(other, "mturk", tmp_path / "j2.csv", columns=cmap)
    assert judgments(tmp_path / "j2.csv")[1] == ["ox", "cat", "ant", "elk", "ox", "ant", "W9"]
    with pytest.raises(InputError, match="missing column") as e:
        import_layout(other, "mturk", tmp_path / "j3.csv")
    assert e.value.field == "Answer.best" and "--items-cols" in e.value.message


@pytest.mark.parametrize(
    ("status", "best", "field", "words"),
    [
        ("Approved", "8", "Answer.best", "the best choice '8' is not one of the tuple's items"),
        ("Approved", "", "Answer.best", "empty value"),
        ("Returned", "5", "AssignmentStatus", "status 'Returned' is not one of Submitted, Approved, Rejected"),
    ],
)
def test_bad_mturk_rows_are_refused(tmp_path: Path, status: str, best: str, field: str, words: str) -> None:
    """Layout: MTurk's batch results CSV of fsb's forms (see above)."""
    path = mturk_file(
        tmp_path / "b.csv",
        [("3A1", "W1", "Approved", ["5", "2", "9", "1"], "9", "1"), ("3A2", "W2", status, ["5", "2", "9", "1"], best, "1")],
    )
    with pytest.raises(InputError) as e:
        import_layout(path, "mturk", tmp_path / "j.csv")
    assert (e.value.line, e.value.field) == (3, field) and words in e.value.message


# Label Studio 1.23.2's CSV export (Export > CSV, or /api/projects/ID/export?exportType=CSV) of the project
# `fsb annotate export --format label-studio` makes: one row per submitted annotation, the columns sorted by name,
# numbers unquoted and strings quoted (csv.QUOTE_NONNUMERIC), the choices as the chosen position. Taken from a real
# 1.23.2 server's export of such a project (label_studio_sdk.converter.exports.csv2 writes it).
LS_HEADER = ["annotation_id", "annotator", "best", "created_at", "id", "item1", "item2", "item3", "item4", "lead_time"]
LS_HEADER += ["text1", "text2", "text3", "text4", "tuple_id", "updated_at", "worst"]


def ls_csv(path: Path, rows: list[tuple[object, ...]]) -> Path:
    """rows of (annotation id, annotator, best, worst, task id, tuple id, items) in Label Studio's CSV export."""
    records = []
    for ann, who, best, worst, task, tid, items in rows:
        at = f"2026-12-06T03:21:{ann:02d}.877389Z" if ann != "" else ""
        records.append(
            [ann, who, best, at, task, *items, 4.2 if ann != "" else "", *(f"sentence {i}, with a comma" for i in items), tid, at, worst]
        )
    with open(path, "w", newline="", encoding="utf8") as f:
        csv.writer(f, quoting=csv.QUOTE_NONNUMERIC).writerows([LS_HEADER, *records])
    return path


def test_label_studio_csv_export_gives_what_its_json_export_gives(tmp_path: Path) -> None:
    """Layout: Label Studio 1.23.2's CSV export (above), beside its JSON export of the same annotations; a task
    nobody annotated (exported with "all tasks") is a row without annotation_id, left out and counted."""
    rows = [(1, "2", "1", "3", 1, 0, [5, 10, 8, 2]), (3, "2", "2", "4", 2, 1, [1, 6, 9, 2]), (4, "3", "3", "1", 2, 1, [1, 6, 9, 2])]
    path = ls_csv(tmp_path / "project-1-at-2026-12-06-03-22.csv", [*rows, ("", "", "", "", 3, 2, [3, 4, 7, 11])])
    report = import_layout(path, "label-studio", tmp_path / "j.csv")
    assert report["tasks_without_annotation"] == 1 and report["judgments"] == 3 and report["annotators"] == 2
    tasks: dict[int, dict] = {}
    for ann, who, best, worst, task, tid, items in rows:
        t = tasks.setdefault(
            task, {"id": task, "data": {"tuple_id": tid, **{f"item{j + 1}": v for j, v in enumerate(items)}}, "annotations": []}
        )
        result = [
            {"from_name": n, "to_name": "text1", "type": "choices", "value": {"choices": [p]}}
            for n, p in (("best", best), ("worst", worst))
        ]
        t["annotations"].append(
            {"id": ann, "completed_by": int(who), "result": result, "created_at": f"2026-12-06T03:21:{ann:02d}.877389Z"}
        )
    (tmp_path / "export.json").write_text(json.dumps(list(tasks.values())))
    import_label_studio(tmp_path / "export.json", tmp_path / "j_json.csv")
    assert judgments(tmp_path / "j.csv") == judgments(tmp_path / "j_json.csv")
    assert judgments(tmp_path / "j.csv")[1] == ["5", "10", "8", "2", "5", "8", "2", "2026-12-06T03:21:01.877389Z"]


@pytest.mark.parametrize(
    ("second", "field", "words"),
    [
        ((2, "2", "5", "1", 1, 0, [5, 10, 8, 2]), "best", "'5' is not a position 1..4"),
        ((2, "2", "1", "1", 1, 0, [5, 10, 8, 2]), "worst", "best and worst are the same item '5'"),
        ((2, "2", "2", "1", 1, 0, [5, 10, 8, 2]), "annotator", "annotator '2' already judged this tuple (line 2)"),
    ],
)
def test_bad_label_studio_csv_rows_are_refused(tmp_path: Path, second: tuple, field: str, words: str) -> None:
    """Layout: Label Studio 1.23.2's CSV export (above)."""
    path = ls_csv(tmp_path / "e.csv", [(1, "2", "1", "3", 1, 0, [5, 10, 8, 2]), second])
    with pytest.raises(InputError) as e:
        import_layout(path, "label-studio", tmp_path / "j.csv")
    assert (e.value.line, e.value.field) == (3, field) and words in e.value.message


def test_a_column_map_reads_any_layout(tmp_path: Path) -> None:
    """Layout: none in particular (a lab's own spreadsheet): the column map names the item, best, worst and
    annotator columns; without the map --format columns is refused, naming the options."""
    path = write_csv(tmp_path / "lab.csv", ["rater", "w1", "w2", "w3", "most", "least"], [["r1", "ox", "cat", "ant", "cat", "ox"]])
    cmap = ColumnMap(items=["w1", "w2", "w3"], best="most", worst="least", annotator="rater")
    assert import_layout(path, "columns", tmp_path / "j.csv", columns=cmap)["tuple_size"] == 3
    assert judgments(tmp_path / "j.csv") == [
        ["Item1", "Item2", "Item3", "BestItem", "WorstItem", "Annotator"],
        ["ox", "cat", "ant", "cat", "ox", "r1"],
    ]
    with pytest.raises(InputError, match="needs --items-cols"):
        import_layout(path, "columns", tmp_path / "j2.csv")


@pytest.mark.parametrize(
    ("header", "fmt", "words"),
    [
        (
            HOLLIS_RAW,
            "mturk",
            "Hollis's best-worst tools (best, worst, option1..optionK), not --format mturk: use --format best-worst-tools",
        ),
        (
            [*MTURK_FIELDS, "Input.Item1", "Answer.best"],
            "best-worst-tools",
            "an MTurk batch results file (HITId, WorkerId, Input.*/Answer.* columns)",
        ),
        (
            LS_HEADER,
            "mturk",
            "a Label Studio CSV export (annotation_id, annotator, lead_time columns), not --format mturk: use --format label-studio",
        ),
        (
            ["tuple_id", "best", "worst"],
            "label-studio",
            "answers to fsb's forms (tuple_id, best, worst), not --format label-studio: use --format csv --tuples",
        ),
        (["Item1", "Item2", "BestItem", "WorstItem"], "mturk", "already fsb's judgments layout"),
        (['[{"id": 1'], "best-worst-tools", "JSON (Label Studio's JSON export?), not --format best-worst-tools: use --format label-studio"),
    ],
)
def test_each_format_refuses_another_layout_naming_it(tmp_path: Path, header: list[str], fmt: str, words: str) -> None:
    """The headers of the layouts above (Hollis's raw data, MTurk's batch results, Label Studio's CSV export,
    answers to fsb's forms, fsb's judgments, a JSON export), each given to another format."""
    path = tmp_path / "answers.csv"
    path.write_text(",".join(header) + "\n")
    with pytest.raises(InputError) as e:
        check_layout(path, fmt)
    assert words in e.value.message and "\n" not in str(e.value)


def test_a_tab_separated_hollis_file_is_refused_saying_so(tmp_path: Path) -> None:
    """Layout: the tools also read .tsv files (spreadsheet.py, tab for .tsv); fsb reads comma-separated ones and
    says so rather than "missing column 'best'"."""
    path = tmp_path / "p1.tsv"
    path.write_text("best\tworst\toption1\toption2\na\tb\tc\td\n")
    with pytest.raises(InputError, match=r"tab-separated \(\.tsv\) file: .* save it as \.csv"):
        import_layout(path, "best-worst-tools", tmp_path / "j.csv")


@pytest.mark.parametrize(
    ("fmt", "header", "field", "words"),
    [
        ("best-worst-tools", ["best", "worst", "option1", "option2", "option4", "option5"], "option3", "names option5 but not option3"),
        ("best-worst-tools", ["best", "worst", "option0", "option1", "option2"], "option0", "'option0' looks like an item column"),
        ("best-worst-tools", ["best", "worst", "option1", "option2", "Option 3"], "Option 3", "looks like an item column"),
        ("best-worst-tools", ["best", "worst", "option1", "option2", "option3\0"], "option3\0", "looks like an item column"),
        (
            "mturk",
            ["HITId", "WorkerId", "AssignmentStatus", "Input.Item1", "Input.Item2", "Input.Item4", "Answer.best", "Answer.worst"],
            "Input.Item3",
            "names Input.Item4 but not Input.Item3",
        ),
        (
            "label-studio",
            [*LS_HEADER[:5], "item1", "item2", "item4", "lead_time", "tuple_id", "worst"],
            "item3",
            "names item4 but not item3",
        ),
    ],
)
def test_item_columns_after_a_gap_are_refused_not_dropped(tmp_path: Path, fmt: str, header: list[str], field: str, words: str) -> None:
    """Layouts: Hollis's (option1..optionK), MTurk's (Input.Item1..K), Label Studio's CSV (item1..itemK), each with
    a gap or a near name in its item columns: read as a shorter tuple they would drop items silently (bee and eel
    here), so the header is refused naming the column, as fsb's judgments reader refuses Item1, Item2, Item4."""
    values = {"best": "ant", "worst": "cat", "option1": "dog", "option2": "bee", "option4": "eel", "option5": "fox"}
    path = write_csv(tmp_path / "a.csv", header, [[values.get(h, "1") for h in header]])
    with pytest.raises(InputError) as e:
        import_layout(path, fmt, tmp_path / "j.csv")
    assert (e.value.line, e.value.field) == (1, field) and words in e.value.message, e.value
    assert not (tmp_path / "j.csv").exists()


def test_a_participant_judging_one_tuple_twice_is_refused_across_files_and_in_columns(tmp_path: Path) -> None:
    """Layouts: Hollis's raw data (uuid the participant) in two files of one folder, the second repeating a
    tuple of the first (its items in another order), and a lab's sheet read by --format columns with an
    annotator column: one annotator's second judgment of a tuple is refused, as mturk, label-studio and fsb's
    own answers refuse it, naming the first judgment's file and line."""
    hollis_file(tmp_path / "raw" / "a.csv", HOLLIS_RAW, [[1, 10, 77, 0, "x", "y", "ant", "bee", "cat", "dog"]])
    hollis_file(tmp_path / "raw" / "b.csv", HOLLIS_RAW, [[1, 10, 77, 1, "x", "y", "dog", "cat", "bee", "ant"]])
    with pytest.raises(InputError, match=r"annotator '77' already judged this tuple \(.*a\.csv line 2\)") as e:
        import_layout(tmp_path / "raw", "best-worst-tools", tmp_path / "j.csv")
    assert e.value.path.endswith("b.csv") and (e.value.line, e.value.field) == (2, "uuid")
    path = write_csv(tmp_path / "lab.csv", ["rater", "w1", "w2", "w3", "most", "least"], [["r1", "ox", "cat", "ant", "cat", "ox"]] * 2)
    cmap = ColumnMap(items=["w1", "w2", "w3"], best="most", worst="least", annotator="rater")
    with pytest.raises(InputError, match=r"annotator 'r1' already judged this tuple \(line 2\)"):
        import_layout(path, "columns", tmp_path / "j.csv", columns=cmap)
    assert not (tmp_path / "j.csv").exists()


def test_annotator_ids_follow_the_rules_of_item_ids_in_every_format(tmp_path: Path) -> None:
    """Layouts: Hollis's README variant in a folder, named by file (a file name with a line break in it would be
    a two-line annotator); MTurk's batch results (a WorkerId typed "José" in NFD and in NFC is one worker, so
    their second judgment of the tuple is refused; a right-to-left override in an id is refused);
    Label Studio's CSV export (a zero-width space in the annotator)."""
    folder = tmp_path / "p"
    hollis_file(folder / "p\n1.csv", ["best", "worst", "option1", "option2"], [["ant", "bee", "cat", "dog"]])
    with pytest.raises(InputError, match=r"the file name 'p\\n1.csv' \(the annotator\): a line break inside it") as e:
        import_layout(folder, "best-worst-tools", tmp_path / "j.csv")
    assert "\n" not in str(e.value) and e.value.path == str(folder)
    rows = [
        ("3A1", "Jose\u0301", "Approved", ["5", "2", "9", "1"], "9", "1"),
        ("3A2", "Jos\u00e9", "Approved", ["5", "2", "9", "1"], "5", "2"),
    ]
    with pytest.raises(InputError, match=r"annotator 'José' already judged this tuple \(line 2\)"):
        import_layout(mturk_file(tmp_path / "m.csv", rows), "mturk", tmp_path / "j.csv")
    rows = [("3A1", "A1\u202eX", "Approved", ["5", "2", "9", "1"], "9", "1")]
    with pytest.raises(InputError, match=r"U\+202E") as e:
        import_layout(mturk_file(tmp_path / "m.csv", rows), "mturk", tmp_path / "j.csv")
    assert (e.value.line, e.value.field) == (2, "WorkerId")
    path = ls_csv(tmp_path / "e.csv", [(1, "2\u200b", "1", "3", 1, 0, [5, 10, 8, 2])])
    with pytest.raises(InputError, match=r"U\+200B") as e:
        import_layout(path, "label-studio", tmp_path / "j.csv")
    assert e.value.field == "annotator" and not (tmp_path / "j.csv").exists()


def test_columns_on_an_mturk_file_leaves_rejected_assignments_out_as_mturk_does(tmp_path: Path) -> None:
    """Layout: MTurk's batch results CSV of fsb's forms, read by --format columns with a column map (as a user
    does who missed --format mturk): Rejected assignments are left out and counted as --format mturk does, not
    kept silently; the two formats give the same judgments."""
    rows = [
        ("3A1", "W1", "Approved", ["5", "2", "9", "1"], "9", "1"),
        ("3A2", "W2", "Rejected", ["5", "2", "9", "1"], "2", "2"),
        ("3A3", "W3", "Submitted", ["3", "4", "6", "7"], "7", "3"),
    ]
    path = mturk_file(tmp_path / "b.csv", rows)
    items = ["Input.Item1", "Input.Item2", "Input.Item3", "Input.Item4"]
    cmap = ColumnMap(items=items, best="Answer.best", worst="Answer.worst", annotator="WorkerId")
    report = import_layout(path, "columns", tmp_path / "j.csv", columns=cmap)
    assert report["rejected_left_out"] == 1 and report["judgments"] == 2
    import_layout(path, "mturk", tmp_path / "m.csv")
    assert judgments(tmp_path / "j.csv") == judgments(tmp_path / "m.csv")


def test_a_repeated_judgment_is_found_by_tuple_not_by_hit_or_a_joined_string(tmp_path: Path) -> None:
    """Layouts: MTurk's batch results CSV of fsb's forms, one tuple (Input.tuple_id 0) posted in two HITs and
    judged in both by one worker: refused (it was checked by HITId). MTurk without HITId and Label Studio's CSV
    with empty tuple_id cells: two different tuples whose items joined with '|' read alike ("a|b","c" and "a",
    "b|c") are two tuples, read without a false repeat; one tuple twice is refused."""
    rows = [("3A1", "W1", "Approved", ["5", "2", "9", "1"], "9", "1"), ("3A2", "W2", "Approved", ["5", "2", "9", "1"], "5", "2")]
    rows.append(("3A3", "W1", "Approved", ["2", "9", "1", "5"], "2", "5"))  # HIT 3HIT1, the same tuple 0 again
    path = mturk_file(tmp_path / "b.csv", rows)
    text = path.read_text().splitlines()
    text[3] = text[3].replace('"1","2","9","1","5"', '"0","2","9","1","5"')  # Input.tuple_id of the third row: 0
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(InputError, match=r"annotator 'W1' already judged this tuple \(line 2\)") as e:
        import_layout(path, "mturk", tmp_path / "j.csv")
    assert e.value.line == 4
    header = ["WorkerId", "AssignmentStatus", "Input.Item1", "Input.Item2", "Input.Item3", "Answer.best", "Answer.worst"]
    lone = [["W1", "Approved", "a|b", "c", "d", "c", "d"], ["W1", "Approved", "a", "b|c", "d", "a", "d"]]
    assert import_layout(write_csv(tmp_path / "n.csv", header, lone), "mturk", tmp_path / "j.csv")["judgments"] == 2
    ls = [(1, "2", "1", "3", 1, "", ["a|b", "c", "d", "e"]), (2, "2", "1", "3", 2, "", ["a", "b|c", "d", "e"])]
    assert import_layout(ls_csv(tmp_path / "l.csv", ls), "label-studio", tmp_path / "k.csv")["judgments"] == 2
    ls.append((3, "2", "2", "3", 3, "", ["e", "d", "a", "b|c"]))
    with pytest.raises(InputError, match=r"annotator '2' already judged this tuple \(line 3\)"):
        import_layout(ls_csv(tmp_path / "l.csv", ls), "label-studio", tmp_path / "m.csv")


def test_the_summary_says_where_each_files_annotators_come_from(tmp_path: Path) -> None:
    """Layouts: a folder of Hollis's raw data files (uuid column) beside README-layout files without an id column
    (named by file): the summary counts files per source instead of naming the last file's only."""
    hollis_file(tmp_path / "d" / "a.csv", HOLLIS_RAW, [[1, 10, 77, 0, "x", "y", "ant", "bee", "cat", "dog"]])
    hollis_file(tmp_path / "d" / "b.csv", ["best", "worst", "option1", "option2"], [["cat", "dog", "ant", "bee"]])
    hollis_file(tmp_path / "d" / "c.csv", ["best", "worst", "option1", "option2"], [["dog", "cat", "ant", "bee"]])
    report = import_layout(tmp_path / "d", "best-worst-tools", tmp_path / "j.csv")
    assert report["annotator_from"] == {"uuid": 1, "the file's name": 2} and report["annotators"] == 3


@pytest.mark.parametrize(("fmt", "sep"), [("best-worst-tools", ";"), ("mturk", ";"), ("label-studio", "\t"), ("columns", ";")])
def test_a_file_separated_by_semicolons_or_tabs_is_named_as_such(tmp_path: Path, fmt: str, sep: str) -> None:
    """Layout: Hollis's README layout saved by Excel in a locale with a decimal comma (';' between fields), or
    tab-separated: read with commas its header is one name, and the refusal said "missing column 'best'"
    although the header has it."""
    path = tmp_path / "p1.csv"
    path.write_text(sep.join(["best", "worst", "option1", "option2"]) + "\n" + sep.join(["ant", "bee", "cat", "dog"]) + "\n")
    cmap = ColumnMap(items=["option1", "option2"], best="best", worst="worst") if fmt == "columns" else None
    with pytest.raises(InputError) as e:
        import_layout(path, fmt, tmp_path / "j.csv", columns=cmap)
    assert f"the file is separated by {sep!r}" in e.value.message and "save it as comma-separated CSV" in e.value.message
    assert e.value.line == 1 and ("Excel" in e.value.message) == (sep == ";")


def test_excels_trailing_empty_columns_are_left_out_and_a_value_in_one_is_refused(tmp_path: Path) -> None:
    """Layout: Hollis's README layout saved by Excel with two empty columns after the last (header "...,option4,,"
    and every row ending ",,"), which Hollis's tools read: read as if they were not there (before: "column name
    repeated"); a value in such a column is refused naming its line."""
    path = tmp_path / "p1.csv"
    path.write_text("best,worst,option1,option2,option3,option4,,\r\ndog,ennui,justice,dog,haven,ennui,,\r\n")
    import_layout(path, "best-worst-tools", tmp_path / "j.csv")
    assert judgments(tmp_path / "j.csv")[1] == ["justice", "dog", "haven", "ennui", "dog", "ennui"]
    path.write_text("best,worst,option1,option2,option3,option4,,\r\ndog,ennui,justice,dog,haven,ennui,,\r\na,b,c,a,d,b,,x\r\n")
    with pytest.raises(InputError, match="a value in column 8, which has no name") as e:
        import_layout(path, "best-worst-tools", tmp_path / "k.csv")
    assert (e.value.line, e.value.field) == (3, "column 8")


def test_answers_that_look_like_positions_name_the_positions_option(tmp_path: Path) -> None:
    """Layout: MTurk's batch results CSV of a template whose radio values are the places 1..4, read without
    --positions: the refusal adds "(answers look like positions 1..K: use --positions)"; answers that are not
    all places 1..K get no such hint."""
    rows = [("3A1", "W1", "Approved", ["5", "12", "9", "11"], "3", "4"), ("3A2", "W2", "Approved", ["5", "12", "9", "11"], "1", "2")]
    with pytest.raises(
        InputError,
        match=r"is not one of the tuple's items \('5', '12', '9', '11'\) \(answers look like positions 1\.\.K: use --positions\)",
    ):
        import_layout(mturk_file(tmp_path / "b.csv", rows), "mturk", tmp_path / "j.csv")
    rows[1] = ("3A2", "W2", "Approved", ["5", "12", "9", "11"], "7", "2")
    with pytest.raises(InputError) as e:
        import_layout(mturk_file(tmp_path / "b.csv", rows), "mturk", tmp_path / "j.csv")
    assert "not one of the tuple's items" in e.value.message and "--positions" not in e.value.message


def test_a_position_of_thousands_of_digits_is_refused_in_one_line(tmp_path: Path) -> None:
    """Layout: Label Studio's CSV export with a 5000-digit best (Python's int() refuses more than 4300 digits, so
    the check stopped with a ValueError traceback): refused as not a position 1..K, shortened in the message."""
    path = ls_csv(tmp_path / "e.csv", [(1, "2", "7" * 5000, "3", 1, 0, [5, 10, 8, 2])])
    with pytest.raises(InputError, match=r"is not a position 1\.\.4") as e:
        import_layout(path, "label-studio", tmp_path / "j.csv")
    assert e.value.field == "best" and len(str(e.value)) < 300


def test_two_files_of_one_name_named_by_file_are_refused(tmp_path: Path) -> None:
    """Layout: Hollis's README variant without an id column, two folders given (two sessions), each with a p1.csv:
    named by file, both would be one annotator "p1"; refused naming the other file."""
    hollis_file(tmp_path / "s1" / "p1.csv", ["best", "worst", "option1", "option2"], [["ant", "bee", "cat", "dog"]])
    hollis_file(tmp_path / "s2" / "p1.csv", ["best", "worst", "option1", "option2"], [["eel", "fox", "cat", "dog"]])
    with pytest.raises(InputError, match=r"the annotator is the file's name, 'p1', as for .*s1/p1\.csv: rename one") as e:
        import_layout([tmp_path / "s1", tmp_path / "s2"], "best-worst-tools", tmp_path / "j.csv")
    assert e.value.path.endswith("s2/p1.csv")
