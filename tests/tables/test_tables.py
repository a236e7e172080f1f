"""The one id rule (`fsb.core.tables.id_problem`) across every reader of ids, and the judgments reader's
first-line guarantee with unknown ids and its string-id fast path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fsb.bws.tuples import read_design
from fsb.core.readers import InputError
from fsb.tables.csvrows import FAST_READER_BYTES, INT64_MAX, id_problem, read_generations
from fsb.tables.items import read_items
from fsb.tables.judgments import read_annotations

HEADER = "Item1,Item2,Item3,Item4,BestItem,WorstItem\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("7", None),
        ("0", None),
        ("01", "leading zero"),
        ("0001", "leading zero"),
        ("00", "leading zero"),
        ("+1", "not an integer id"),
        ("1_000", "not an integer id"),
        ("\u0663", "not an integer id"),  # an Arabic-Indic digit: isdigit() but not ASCII
        ("", "empty value"),
        ("9" * 5000, "outside"),  # never int() on it
    ],
)
def test_the_id_rule(text: str, problem: str | None) -> None:
    got = id_problem(text, INT64_MAX)
    assert (got is None) if problem is None else (problem in got)


def _judgments(path: Path, labels: list[str]) -> Path:
    a, b, c, d = labels
    path.write_text(HEADER + f"{a},{b},{c},{d},{a},{d}\n{a},{b},{c},{d},{b},{c}\n")
    return path


def _design(path: Path, labels: list[str]) -> Path:
    path.write_text("tuple_id,Item1,Item2,Item3,Item4\n0," + ",".join(labels) + "\n")
    return path


def _generations(path: Path, uids: list[str]) -> Path:
    rows = "".join(f"{u},completion,explicit,seed {u},sentence {u}\n" for u in uids)
    path.write_text("uid,prompt_type,seed_type,query,response\n" + rows)
    return path


def test_readers_agree_on_the_one_id_rule(tmp_path: Path) -> None:
    """'1', '01' and '0001' are three spellings: every opaque-label reader keeps them as three string
    items, every integer reader refuses the first leading zero (naming line and field), and a file of
    ids is read as integers everywhere."""
    spelled = ["1", "01", "0001", "2"]
    ann = read_annotations(_judgments(tmp_path / "j.csv", spelled))
    assert ann.labels.dtype.kind == "U" and sorted(ann.labels.tolist()) == sorted(spelled)
    (tmp_path / "items.txt").write_text("\n".join(spelled) + "\n")
    items = read_items(tmp_path / "items.txt")
    assert items.ids.dtype.kind in "UO" and sorted(map(str, items.ids.tolist())) == sorted(spelled)
    design = read_design(_design(tmp_path / "d.csv", spelled))
    assert sorted(design.loc[0, ["Item1", "Item2", "Item3", "Item4"]].map(str).tolist()) == sorted(spelled)
    assert all(isinstance(v, str) for v in design.loc[0, ["Item1", "Item2", "Item3", "Item4"]])
    with pytest.raises(InputError, match="leading zero") as e:
        read_generations(_generations(tmp_path / "g.csv", ["1", "01"]))
    assert "line 3" in str(e.value) and "uid" in str(e.value)
    with pytest.raises(InputError, match="leading zero") as e:
        read_annotations(_judgments(tmp_path / "j2.csv", spelled), integer_ids=True)
    assert "line 2" in str(e.value) and "Item2" in str(e.value)
    ids = ["10", "3", "0", "7"]
    assert read_annotations(_judgments(tmp_path / "j3.csv", ids)).labels.tolist() == [0, 3, 7, 10]
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    assert read_items(tmp_path / "ids.txt").ids.dtype.kind == "i"
    assert read_generations(_generations(tmp_path / "g2.csv", ids)).frame["uid"].tolist() == [10, 3, 0, 7]
    assert int(read_design(_design(tmp_path / "d2.csv", ids)).loc[0, "Item1"]) == 10


def _lines_with(bad: dict[int, str], total: int = 12) -> str:
    """A judgments file whose data line n (header = line 1) is `bad[n]` where given, else a good row."""
    rows = [bad.get(n, f"{n},{n + 100},{n + 200},{n + 300},{n},{n + 300}") for n in range(2, total + 2)]
    return HEADER + "\n".join(rows) + "\n"


@pytest.mark.parametrize(("unknown_line", "other_line"), [(4, 9), (9, 4)])
def test_the_first_bad_line_wins_when_one_problem_is_an_unknown_id(tmp_path: Path, unknown_line: int, other_line: int) -> None:
    """Issue 20: an unknown id on line 4 and a best = worst row on line 9 must report line 4 (it reported
    line 9: the unknown-id check ran after the others); and the other way round."""
    bad = {unknown_line: "5,6,7,999999,5,6", other_line: f"{other_line},1,2,3,1,1"}
    path = tmp_path / "j.csv"
    path.write_text(_lines_with(bad))
    labels = read_annotations(path, invalid="count").labels
    known = labels[labels != 999999]
    with pytest.raises(InputError) as e:
        read_annotations(path, known_ids=known, unknown_why="no such uid in g.csv")
    first = min(unknown_line, other_line)
    assert f"line {first}" in str(e.value)
    if first == unknown_line:
        assert "unknown id 999999: no such uid in g.csv" in str(e.value) and "Item4" in str(e.value)
    else:
        assert "best and worst are the same item" in str(e.value)


def test_large_files_keep_string_ids_as_strings_and_agree_with_the_small_reader(tmp_path: Path) -> None:
    """The pyarrow path (files over FAST_READER_BYTES) must code ids exactly as Python's reader does:
    'cza1q49'-like ids stay strings; a file whose first 50 rows hold only digit ids and whose later rows
    hold string ids is all strings; digit-only files are integers."""
    rng = np.random.default_rng(0)
    alphabet = np.array(list("0123456789abcdefghijklmnopqrstuvwxyz"))
    n_rows = FAST_READER_BYTES // 40 + 1000
    words = ["".join(w) for w in alphabet[rng.integers(0, 36, size=(400, 7))].tolist()]
    digits = [str(v) for v in rng.choice(10**6, size=400, replace=False) + 1]
    for name, pool, late in (("strings", words, words), ("late", digits, words), ("ints", digits, digits)):
        rows = []
        for r in range(n_rows):
            src = pool if r < 60 else late
            a, b, c, d = (src[int(i)] for i in rng.choice(len(src), size=4, replace=False))
            rows.append(f"{a},{b},{c},{d},{a},{d}")
        big = tmp_path / f"{name}.csv"
        big.write_text(HEADER + "\n".join(rows) + "\n")
        assert big.stat().st_size > FAST_READER_BYTES
        small = tmp_path / f"{name}-small.csv"
        small.write_text(HEADER + "\n".join(rows[:50] + rows[-50:]) + "\n")
        fast, slow = read_annotations(big), read_annotations(small)
        assert fast.labels.dtype.kind == ("i" if name == "ints" else "U")
        assert slow.labels.dtype.kind == ("i" if name == "ints" else "U") or name == "late"
        np.testing.assert_array_equal(fast.items[-50:], slow.items[-50:])
        np.testing.assert_array_equal(fast.best[:50], np.asarray(slow.best[:50]).astype(fast.labels.dtype))


def test_large_files_trim_spaces_around_string_ids(tmp_path: Path) -> None:
    """The fast path skips trimming only when the body holds no byte trimming could remove: a large file
    written with spaces after the commas still gives the bare ids (as the small reader does)."""
    rows = [f"a{i}, b{i}, c{i}, d{i}, a{i}, d{i}" for i in range(FAST_READER_BYTES // 20)]
    big = tmp_path / "spaced.csv"
    big.write_text(HEADER + "\n".join(rows) + "\n")
    ann = read_annotations(big)
    assert ann.labels.dtype.kind == "U" and ann.items[0].tolist() == ["a0", "b0", "c0", "d0"] and ann.worst[0] == "d0"


def test_large_memory_mapped_file_with_bom_and_annotators_reads_as_the_small_reader(tmp_path: Path) -> None:
    """A file over FAST_READER_BYTES is memory-mapped (its pages released once parsed): with a byte order
    mark and an Annotator column it gives the labels, codes and annotators Python's reader gives, and
    `annotators=False` (what fsb score asks) leaves the annotator and timestamp out without changing the
    codes; a bad row far down is still named by its line."""
    rows = [f"s{i % 977},t{i % 499},u{i % 251},v{i % 97},t{i % 499},v{i % 97},ann{i % 3}" for i in range(FAST_READER_BYTES // 30)]
    header = "\ufeffItem1,Item2,Item3,Item4,BestItem,WorstItem,Annotator\n"
    big = tmp_path / "big.csv"
    big.write_text(header + "\n".join(rows) + "\n", encoding="utf-8")
    assert big.stat().st_size > FAST_READER_BYTES
    fast, plain = read_annotations(big), read_annotations(big, annotators=False)
    small = tmp_path / "small.csv"
    small.write_text(header + "\n".join(rows[:2000]) + "\n", encoding="utf-8")
    slow = read_annotations(small)
    np.testing.assert_array_equal(fast.items[:2000], slow.items)
    assert fast.annotator[:2000].tolist() == slow.annotator.tolist()
    assert plain.annotator is None and plain.timestamp is None
    np.testing.assert_array_equal(plain.item_codes, fast.item_codes)
    np.testing.assert_array_equal(plain.labels, fast.labels)
    bad = tmp_path / "bad.csv"
    bad.write_text(header + "\n".join([*rows[:-1], "a,b,c,d,x,b,ann0"]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_annotations(bad)
    assert f"line {len(rows) + 1}" in str(e.value) and "'x' is not one of the tuple's items" in str(e.value)
