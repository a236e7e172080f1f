"""`fsb annotate export` in process: the forms are the data (a file), its "wrote N forms" commentary goes to
stderr, and `--json` prints the summary as data on stdout. `fsb annotate import --format F` in a subprocess:
the layouts other tools write, refused in one line when of another layout, and scored as counted by hand."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fsb.cli.app import main
from tests._support import run_fsb, write_csv

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


# --- `fsb annotate import --format F`: the layouts other tools write (fsb.annotate.layouts), through the real command


def fsb(*args: object) -> subprocess.CompletedProcess[str]:
    return run_fsb(*args, in_process=False, timeout=300)


def test_hollis_study_imported_then_scored_equals_counting_by_hand(tmp_path: Path) -> None:
    """Layout: Hollis's best-worst tools raw data, a folder of one file a participant (header `group,id,uuid,
    trial,best_text,worst_text,best,worst,option1,option2` as in the tools' samples/aoa_raw_data; only the two
    unchosen words in the option columns). `fsb annotate import` then `fsb score`: every item's counting score
    equals (times best - times worst) / appearances counted here on the raw rows, and n, best, worst exactly."""
    rng = np.random.default_rng(7)
    words = [f"word{j:02d}" for j in range(16)]
    header = ["group", "id", "uuid", "trial", "best_text", "worst_text", "best", "worst", "option1", "option2"]
    best, worst, seen = Counter(), Counter(), Counter()
    for person in range(5):
        rows = []
        for trial in range(12):
            shown = rng.choice(words, size=4, replace=False).tolist()
            b, w, *rest = shown  # a random participant: the first drawn is best, the second worst
            rows.append([1, person, 1485986147 + person, trial, "most", "least", b, w, *rest])
            best[b], worst[w] = best[b] + 1, worst[w] + 1
            seen.update(shown)
        (tmp_path / "raw").mkdir(exist_ok=True)
        write_csv(tmp_path / "raw" / f"id_1_{person}_task2_BestWorst.csv", header, rows)
    proc = fsb("annotate", "import", tmp_path / "raw", "--format", "best-worst-tools", "--out", tmp_path / "j.csv")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["files"], summary["judgments"], summary["annotators"], summary["tuple_size"]) == (5, 60, 5, 4)
    proc = fsb("score", tmp_path / "j.csv", "--out", tmp_path / "s.csv")
    assert proc.returncode == 0, proc.stderr
    scores = pd.read_csv(tmp_path / "s.csv").set_index("item")
    assert sorted(scores.index) == sorted(seen)
    for item, row in scores.iterrows():
        assert (row["n"], row["best"], row["worst"]) == (seen[item], best[item], worst[item])
        assert abs(row["score_raw"] - (best[item] - worst[item]) / seen[item]) < 5e-7  # the file's 6 decimals


HOLLIS = "best,worst,option1,option2\ndog,ennui,justice,haven\n"
MTURK = (
    '"HITId","AssignmentId","WorkerId","AssignmentStatus","Input.Item1","Input.Item2","Answer.best","Answer.worst"\n'
    '"3H","3A","W1","Approved","a","b","a","b"\n'
)
LS_CSV = (
    '"annotation_id","annotator","best","created_at","id","item1","item2","lead_time","tuple_id","worst"\n'
    '1,"2","1","2026-12-06T03:21:14Z",1,5,10,4.2,0,"2"\n'
)
MTURK_SEEN = "this looks like an MTurk batch results file (HITId, WorkerId, Input.*/Answer.* columns)"
HOLLIS_SEEN = "this looks like the layout of Hollis's best-worst tools (best, worst, option1..optionK)"
LS_SEEN = "this looks like a Label Studio CSV export (annotation_id, annotator, lead_time columns)"


@pytest.mark.parametrize(
    ("text", "fmt", "words"),
    [
        (MTURK, "best-worst-tools", f"{MTURK_SEEN}, not --format best-worst-tools: use --format mturk"),
        (HOLLIS, "mturk", f"{HOLLIS_SEEN}, not --format mturk: use --format best-worst-tools"),
        (MTURK, "label-studio", f"{MTURK_SEEN}, not --format label-studio: use --format mturk"),
        (LS_CSV, "csv", f"{LS_SEEN}, not --format csv: use --format label-studio"),
        ("Item1,Item2,BestItem,WorstItem\na,b,a,b\n", "best-worst-tools", "already fsb's judgments layout"),
    ],
)
def test_import_refuses_a_file_of_another_layout_in_one_line(tmp_path: Path, text: str, fmt: str, words: str) -> None:
    """Headers as each tool writes them (MTurk's batch results, Hollis's best-worst tools, Label Studio's CSV
    export, fsb's judgments), each given to another --format: exit 2, one line naming the layout and the option."""
    (tmp_path / "answers.csv").write_text(text)
    extra = ["--tuples", tmp_path / "answers.csv"] if fmt == "csv" else []
    proc = fsb("annotate", "import", tmp_path / "answers.csv", "--format", fmt, *extra, "--out", tmp_path / "j.csv")
    assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stdout == "" and not (tmp_path / "j.csv").exists()


@pytest.mark.parametrize(("text", "fmt"), [(HOLLIS, "best-worst-tools"), (MTURK, "mturk"), (LS_CSV, "label-studio")])
@pytest.mark.parametrize("command", ["score", "reliability", "build"])
def test_score_reliability_and_build_name_the_import_for_a_foreign_layout(tmp_path: Path, text: str, fmt: str, command: str) -> None:
    """The one rule: fsb score, fsb reliability and fsb build --annotations read fsb's judgments layout only, and
    given another tool's file say in one line which layout it is and the `fsb annotate import` that converts it."""
    (tmp_path / "theirs.csv").write_text(text)
    args = ["--out", tmp_path / "out"] if command == "build" else []
    args += ["--annotations"] if command == "build" else []
    proc = fsb(command, *args, tmp_path / "theirs.csv")
    command_line = f"fsb annotate import {tmp_path / 'theirs.csv'} --format {fmt} --out judgments.csv"
    assert proc.returncode == 2 and command_line in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_column_map_options_through_the_command_line(tmp_path: Path) -> None:
    """Layout: a lab's own sheet (no tool's), read by --format columns with the map; a map where the layout is
    fixed (fsb's answers) is refused, not ignored."""
    write_csv(tmp_path / "lab.csv", ["rater", "w1", "w2", "w3", "most", "least"], [["r1", "ox", "cat", "ant", "3", "1"]])
    cols = ["--items-cols", "w1, w2,w3", "--best-col", "most", "--worst-col", "least", "--annotator-col", "rater"]
    proc = fsb("annotate", "import", tmp_path / "lab.csv", "--format", "columns", *cols, "--positions", "--out", tmp_path / "j.csv")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "j.csv").read_text() == "Item1,Item2,Item3,BestItem,WorstItem,Annotator\nox,cat,ant,ant,ox,r1\n"
    proc = fsb("annotate", "import", tmp_path / "lab.csv", "--tuples", tmp_path / "lab.csv", *cols, "--out", tmp_path / "k.csv")
    assert proc.returncode == 2 and "--items-cols maps another tool's columns" in proc.stderr and not (tmp_path / "k.csv").exists()
    cols[1] = "w1,w2,w4"  # a column the file does not have
    proc = fsb("annotate", "import", tmp_path / "lab.csv", "--format", "columns", *cols, "--out", tmp_path / "k.csv")
    assert proc.returncode == 2 and "line 1, field 'w4': missing column" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "k.csv").exists()


def test_an_out_among_the_participants_files_is_refused_even_with_force(tmp_path: Path) -> None:
    """Layout: Hollis's raw data folder. `--out d/p1.csv --force` would replace a participant's file: every file
    read is an input, so it is refused and p1.csv is left as it was. `--out d/judgments.csv` twice: the second
    run skips the judgments and the record the first wrote there, and says so."""
    header = ["group", "id", "uuid", "trial", "best_text", "worst_text", "best", "worst", "option1", "option2"]
    (tmp_path / "d").mkdir()
    write_csv(tmp_path / "d" / "p1.csv", header, [[1, 1, 11, 0, "most", "least", "ant", "bee", "cat", "dog"]])
    write_csv(tmp_path / "d" / "p2.csv", header, [[1, 2, 12, 0, "most", "least", "cat", "dog", "ant", "bee"]])
    before = (tmp_path / "d" / "p1.csv").read_bytes()
    proc = fsb("annotate", "import", tmp_path / "d", "--format", "best-worst-tools", "--out", tmp_path / "d" / "p1.csv", "--force")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and (tmp_path / "d" / "p1.csv").read_bytes() == before, proc.stderr
    for _ in range(2):
        proc = fsb("annotate", "import", tmp_path / "d", "--format", "best-worst-tools", "--out", tmp_path / "d" / "judgments.csv")
        assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["files"], summary["judgments"]) == (2, 2)
    assert sorted(summary["skipped"]) == [str(tmp_path / "d" / ".fsb-files.json"), str(tmp_path / "d" / "judgments.csv")]


def test_several_files_from_a_shell_glob_are_read_as_participants(tmp_path: Path) -> None:
    """Layout: Hollis's README variant, one file a participant, passed as `raw/*` (the tools' README runs
    `score_trials.py samples/aoa_raw_data/*`); other formats read one file and say so."""
    (tmp_path / "raw").mkdir()
    write_csv(tmp_path / "raw" / "anna.csv", ["best", "worst", "option1", "option2"], [["ant", "bee", "cat", "dog"]])
    write_csv(tmp_path / "raw" / "ben.csv", ["best", "worst", "option1", "option2"], [["cat", "dog", "ant", "bee"]])
    files = sorted((tmp_path / "raw").iterdir())
    proc = fsb("annotate", "import", *files, "--format", "best-worst-tools", "--out", tmp_path / "j.csv")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "j.csv").read_text().splitlines()[1:] == ["ant,bee,cat,dog,ant,bee,anna", "cat,dog,ant,bee,cat,dog,ben"]
    proc = fsb("annotate", "import", *files, "--format", "mturk", "--out", tmp_path / "k.csv")
    assert proc.returncode == 2 and "--format mturk reads one file; only --format best-worst-tools" in proc.stderr, proc.stderr


def test_a_header_field_over_csvs_limit_is_refused_in_one_line_not_a_traceback(tmp_path: Path) -> None:
    """A header with a 200,000-character field (csv's default limit is 131,072), given to `fsb annotate import
    --format mturk`: the layout check read the first line before the limit was raised (exit 1, _csv.Error)."""
    (tmp_path / "big.csv").write_text("x" * 200_000 + ",WorkerId\n1,2\n")
    proc = fsb("annotate", "import", tmp_path / "big.csv", "--format", "mturk", "--out", tmp_path / "j.csv")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "j.csv").exists()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"--best-col": "w2"}, "--items-cols and --best-col both name the column 'w2'"),
        ({"--annotator-col": "most"}, "--annotator-col and --best-col both name the column 'most'"),
        ({"--annotator-col": ""}, "--annotator-col names no column (an empty name)"),
    ],
)
def test_a_column_map_giving_one_column_two_roles_or_none_is_refused(tmp_path: Path, change: dict[str, str], words: str) -> None:
    """Layout: a lab's own sheet read by --format columns. --best-col naming an item column, --annotator-col equal
    to --best-col, or an empty --annotator-col (ignored before: the judgments had no Annotator) is refused in one
    line before anything is read."""
    write_csv(tmp_path / "lab.csv", ["rater", "w1", "w2", "w3", "most", "least"], [["r1", "ox", "cat", "ant", "cat", "ox"]])
    options = {"--items-cols": "w1,w2,w3", "--best-col": "most", "--worst-col": "least", "--annotator-col": "rater", **change}
    flat = [x for pair in options.items() for x in pair]
    proc = fsb("annotate", "import", tmp_path / "lab.csv", "--format", "columns", *flat, "--out", tmp_path / "j.csv")
    assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "j.csv").exists()


def test_forgetting_the_format_names_the_one_to_use(tmp_path: Path) -> None:
    """Layouts: a folder of Hollis's raw data files and a lab's own sheet, each given without --format (so read as
    answers to fsb's forms, which need --tuples): the folder's refusal names --format best-worst-tools, the
    sheet's names --format columns, each in one line (before: "--tuples is required for CSV answers")."""
    write_csv(tmp_path / "lab.csv", ["rater", "w1", "w2", "w3", "most", "least"], [["r1", "ox", "cat", "ant", "cat", "ox"]])
    (tmp_path / "raw").mkdir()
    write_csv(tmp_path / "raw" / "p1.csv", ["best", "worst", "option1", "option2"], [["ant", "bee", "cat", "dog"]])
    for given, words in ((tmp_path / "raw", "is a folder: only --format best-worst-tools"), (tmp_path / "lab.csv", "--format columns")):
        proc = fsb("annotate", "import", given, "--out", tmp_path / "j.csv")
        assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
