"""`fsb.annotate.layouts_files`: which files of a folder (or a shell glob) a best-worst-tools import reads as
participants, which it skips and lists, and which it refuses, on folders laid out as Hollis's tools' users
keep them (samples/aoa_raw_data: one .csv a participant) with the things found beside them in the wild. Each
file's table (separators, Excel's trailing columns, item columns without a gap) is tested through
`import_layout` in tests/annotate/test_layouts.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fsb.annotate.layouts import import_layout
from fsb.annotate.layouts_files import participant_files
from fsb.core.readers import InputError

HEADER = "group,id,uuid,trial,best_text,worst_text,best,worst,option1,option2\n"


def participant(folder: Path, name: str, uuid: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(HEADER + f"1,{uuid},{uuid},0,most,least,ant,bee,cat,dog\n")
    return folder / name


def test_a_copy_or_a_link_to_a_participant_is_refused(tmp_path: Path) -> None:
    """A folder with p1.csv, a copy "p1 (copy).csv" (a file manager's duplicate) and a link to p1.csv: read as
    they are, one participant's trials would count three times; the second file with the same bytes is refused."""
    p1 = participant(tmp_path / "d", "p1.csv", 1)
    (tmp_path / "d" / "p1 (copy).csv").write_bytes(p1.read_bytes())
    with pytest.raises(InputError, match=r"the same bytes as .*p1 \(copy\)\.csv \(a copy, or a link to it\)") as e:
        participant_files([tmp_path / "d"])
    assert e.value.path.endswith("p1.csv")
    (tmp_path / "d" / "p1 (copy).csv").unlink()
    os.symlink(p1, tmp_path / "d" / "p2.csv")
    with pytest.raises(InputError, match="the same bytes as"):
        participant_files([tmp_path / "d"])


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: (d / "p9.tsv").write_text("best\tworst\toption1\toption2\n"), "'p9.tsv' is tab-separated (.tsv)"),
        (lambda d: participant(d / "group2", "p9.csv", 9), "'group2' is a subfolder"),
        (lambda d: os.symlink(d / "gone.csv", d / "p9.csv"), "'p9.csv' is a link that leads nowhere"),
    ],
)
def test_a_participant_fsb_cannot_read_is_refused_naming_it(tmp_path: Path, make, words: str) -> None:
    """A .tsv participant beside the .csv ones (the tools read both), a subfolder of more participants, a
    broken link: each would be a participant lost with exit 0, so the folder is refused naming the entry."""
    participant(tmp_path / "d", "p1.csv", 1)
    make(tmp_path / "d")
    with pytest.raises(InputError) as e:
        participant_files([tmp_path / "d"])
    assert words in e.value.message and e.value.path == str(tmp_path / "d")


def test_hidden_files_fsbs_own_and_other_kinds_are_skipped_and_listed(tmp_path: Path) -> None:
    """macOS's `._p1.csv` and `__MACOSX` (an unzipped archive), notes.txt, and an earlier import written into
    the data folder (judgments.csv and fsb's .fsb-files.json record): skipped and listed, so a second run
    reads the same participants as the first instead of refusing its own output."""
    d = tmp_path / "d"
    participant(d, "p1.csv", 1)
    participant(d, "p2.csv", 2)
    (d / "._p1.csv").write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    (d / "__MACOSX").mkdir()
    (d / "notes.txt").write_text("session notes")
    for _ in range(2):
        report = import_layout(d, "best-worst-tools", d / "judgments.csv")
        assert report["files"] == 2 and report["judgments"] == 2
    assert set(report["skipped"]) == {str(d / n) for n in ("._p1.csv", "__MACOSX", "notes.txt", ".fsb-files.json", "judgments.csv")}
    assert report["skipped"][str(d / "judgments.csv")] == "written by fsb"


def test_several_files_are_participants_named_by_their_files(tmp_path: Path) -> None:
    """A shell glob (`raw/*`, as the tools' README runs score_trials.py): each .csv a participant; a README
    among them is skipped and listed; a file without an id column is named by its stem."""
    d = tmp_path / "raw"
    d.mkdir()
    (d / "anna.csv").write_text("best,worst,option1,option2\nant,bee,cat,dog\n")
    (d / "ben.csv").write_text("best,worst,option1,option2\ncat,dog,ant,bee\n")
    (d / "README").write_text("read me")
    found = participant_files(sorted(d.iterdir()))
    assert found.files == [d / "anna.csv", d / "ben.csv"] and found.one_a_participant
    assert found.skipped == {str(d / "README"): "not a .csv file (no extension)"}
    single = participant_files([d / "anna.csv"])
    assert single.files == [d / "anna.csv"] and not single.one_a_participant


def test_a_missing_file_among_several_is_refused_naming_it(tmp_path: Path) -> None:
    """Several files given (a glob that matched and a name that did not): the missing one is named."""
    p1 = participant(tmp_path / "d", "p1.csv", 1)
    with pytest.raises(InputError, match=r"'p2\.csv' does not exist$"):
        participant_files([p1, tmp_path / "d" / "p2.csv"])
