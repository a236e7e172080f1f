"""Bad input is refused with an error naming file, line and field, and a previous good build survives."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import fifty_shades_of_bias as spec
from fsb.core.readers import InputError
from fsb.data.dataset import build_dataset
from tests._support import make_raw, read_rows, run_fsb, write_csv

Rows = list[list[str]]


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def good(tmp_path: Path) -> tuple[Path, Path, Path]:
    g, a = make_raw(tmp_path / "raw", n=16, seed=4)
    out = tmp_path / "out" / spec.NAME
    build_dataset(g, a, out)
    return g, a, out


def _mutate(src: Path, dst: Path, change: Callable[[Rows], Rows]) -> Path:
    rows = change(read_rows(src))
    return write_csv(dst, rows[0], rows[1:])


def _set(row: int, col: int, value: str) -> Callable[[Rows], Rows]:
    def change(rows: Rows) -> Rows:
        rows[row][col] = value
        return rows

    return change


def _drop_column(name: str) -> Callable[[Rows], Rows]:
    def change(rows: Rows) -> Rows:
        j = rows[0].index(name)
        return [r[:j] + r[j + 1 :] for r in rows]

    return change


def _drop_covering(uid: str) -> Callable[[Rows], Rows]:
    return lambda rows: [rows[0]] + [r for r in rows[1:] if uid not in r[:4]]


# (which file, mutation, expected line, expected field, words in the message)
# Annotation rows: line 2 is the first judgment (header = line 1). Generations: line k+1 holds uid k.
CASES = {
    "unknown id": ("ann", _set(3, 2, "999"), 4, "Item3", "unknown id 999"),
    "best equals worst": ("ann", lambda r: _set(2, 5, r[2][4])(r), 3, "WorstItem", "same item"),
    "best not in tuple": (
        "ann",
        lambda r: _set(5, 4, next(x for x in ("1", "2", "3", "4", "5", "6") if x not in r[5][:4]))(r),
        6,
        "BestItem",
        "not one of the tuple's items",
    ),
    "worst not in tuple": (
        "ann",
        lambda r: _set(7, 5, next(x for x in ("1", "2", "3", "4", "5", "6") if x not in r[7][:4]))(r),
        8,
        "WorstItem",
        "not one of the tuple's items",
    ),
    "tuple repeats an item": ("ann", lambda r: _set(4, 2, r[4][0])(r), 5, "Item3", "repeats item"),
    "non-integer id": ("ann", _set(2, 1, "x7"), 3, "Item2", "not an integer id"),
    "missing annotation column": ("ann", _drop_column("WorstItem"), 1, "WorstItem", "missing column"),
    "missing generation column": ("gen", _drop_column("seed_type"), 1, "seed_type", "missing column"),
    "unknown seed_type": ("gen", _set(5, 2, "implict"), 6, "seed_type", "unknown seed_type 'implict'"),
    "unknown prompt_type": ("gen", _set(2, 1, "rewrite"), 3, "prompt_type", "unknown prompt_type 'rewrite'"),
    "duplicate uid": ("gen", _set(9, 0, "3"), 10, "uid", "duplicate uid 3 (first seen on line 4)"),
    "empty response": ("gen", _set(4, 4, " "), 5, "response", "empty value"),
    "uncovered sentence": ("ann", _drop_covering("7"), 8, "uid", "no annotation"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_refused_and_the_old_build_survives(case: str, good: tuple[Path, Path, Path], tmp_path: Path) -> None:
    g, a, out = good
    which, change, line, field, words = CASES[case]
    if which == "ann":
        a = _mutate(a, tmp_path / "bad-annotations.csv", change)
    else:
        g = _mutate(g, tmp_path / "bad-generations.csv", change)
    before = _snapshot(out)
    with pytest.raises(InputError) as err:
        build_dataset(g, a, out)
    e = err.value
    # "uncovered sentence" is reported against the generations file, where the sentence is.
    expected_file = g if field == "uid" else (a if which == "ann" else g)
    assert e.path == str(expected_file)
    assert (e.line, e.field) == (line, field)
    assert words in e.message
    assert str(expected_file) in str(e) and f"line {line}" in str(e) and repr(field) in str(e)
    assert _snapshot(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == [spec.NAME], "no staging folder left behind"


@pytest.mark.parametrize(
    ("content", "words", "line"),
    [
        (b"", "file is empty", None),
        (b"  \n\n", "file is empty", None),
        (b"uid,prompt_type,seed_type,query,response\n", "header but no rows", None),
        (b"uid,prompt_type,seed_type,query,response\n1,completion,explicit,a seed,caf\xe9 au lait\n", "not valid UTF-8", 2),
    ],
)
def test_unreadable_generation_files(content: bytes, words: str, line: int | None, good: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, a, out = good
    bad = tmp_path / "gens.csv"
    bad.write_bytes(content)
    before = _snapshot(out)
    with pytest.raises(InputError) as err:
        build_dataset(bad, a, out)
    assert err.value.path == str(bad) and words in err.value.message and err.value.line == line
    assert _snapshot(out) == before


def test_empty_annotation_file(good: tuple[Path, Path, Path], tmp_path: Path) -> None:
    g, _, out = good
    empty = tmp_path / "ann.csv"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"ann\.csv: file is empty"):
        build_dataset(g, empty, out)


def test_line_numbers_count_quoted_newlines(tmp_path: Path) -> None:
    """A response that spans lines (quoted) shifts later records' line numbers; errors must say the real line."""
    rows = [
        ["1", "completion", "explicit", "s1", "first line\nsecond line"],
        ["2", "completion", "explicit", "s2", "ok"],
        ["3", "completion", "nonsense", "s3", "ok"],
    ]
    g = write_csv(tmp_path / "g.csv", ["uid", "prompt_type", "seed_type", "query", "response"], rows)
    from fsb.tables.csvrows import read_generations

    with pytest.raises(InputError) as err:
        read_generations(g)
    assert (err.value.line, err.value.field) == (5, "seed_type")


def test_cli_reports_bad_input_with_exit_code_2(good: tuple[Path, Path, Path], tmp_path: Path) -> None:
    g, a, out = good
    bad = _mutate(a, tmp_path / "bad.csv", _set(3, 2, "999"))
    before = _snapshot(out)
    proc = subprocess.run(
        [sys.executable, "-m", "fsb", "build", "--generations", str(g), "--annotations", str(bad), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert f"{bad}, line 4, field 'Item3': unknown id 999" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _snapshot(out) == before


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("uid,prompt_type,seed_type,query,response\n1,completion,explicit,a,b\n   \n\t\n2,completion,nonsense,a,b\n", 5, "seed_type"),
        ("\n\nuid,prompt_type,seed_type,query,response\n1,completion,explicit,a,b\n2,completion,nonsense,a,b\n", 5, "seed_type"),
        ('uid,prompt_type,seed_type,query,response\n1,completion,explicit,a,"x\ny"\n2,completion,explicit,a,b,extra\n', 4, None),
    ],
)
def test_line_numbers_survive_blank_lines_and_ragged_rows(tmp_path: Path, text: str, line: int, field: str | None) -> None:
    from fsb.tables.csvrows import read_generations

    g = tmp_path / "g.csv"
    g.write_text(text)
    with pytest.raises(InputError) as err:
        read_generations(g)
    assert (err.value.line, err.value.field) == (line, field), err.value


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_fsb(*args)


ANN_HEADER = "Item1,Item2,Item3,Item4,BestItem,WorstItem\n"
GEN_HEADER = "uid,prompt_type,seed_type,query,response\n"


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        # line 3 repeats an item in Item1/Item3; line 5 in Item2: the first line of the file wins
        (ANN_HEADER + "1,2,3,4,1,4\n5,6,5,7,5,6\n1,2,3,4,1,4\n8,9,9,1,8,1\n", 3, "Item3", "the tuple repeats item 5"),
        # best outside the tuple on line 3 and best = worst on line 5: line 3
        (ANN_HEADER + "1,2,3,4,1,4\n1,2,3,4,9,4\n1,2,3,4,1,4\n1,2,3,4,2,2\n", 3, "BestItem", "9 is not one of the tuple's items"),
        # an empty label on line 4 after an outside choice on line 3, in another column
        (ANN_HEADER + "1,2,3,4,1,4\n1,2,3,4,1,9\n,2,3,4,2,3\n", 3, "WorstItem", "9 is not one of the tuple's items"),
        (ANN_HEADER + "1,2,3,4,1,4\n1,2,3,4,1,4,7\n1,2,3\n", 3, None, "7 fields where the header has 6"),
        (ANN_HEADER + "1,2,3,4,1,4\n1,2,3\n", 3, None, "3 fields where the header has 6"),
        ("Item1,Item2,Item3,Item1,BestItem,WorstItem\n1,2,3,4,1,4\n", 1, "Item1", "column name repeated"),
        # issue 34, fault 1: a gap in the item columns, refused in the header (Item4 was dropped silently)
        ("Item1,Item2,Item4,BestItem,WorstItem\na,b,c,a,b\n", 1, "Item3", "missing column (expected Item1..ItemK, BestItem, WorstItem)"),
        # issue 34, fault 4: an invisible character in an id, named by code point (a 5000-character id too, shortened)
        (ANN_HEADER + "a,b,c,d,a,b\na,b,c\u200b,d,a,b\n", 3, "Item3", "id 'c\\u200b' holds U+200B (ZERO WIDTH SPACE)"),
        (ANN_HEADER + "a,b,c,d,a,b\na,b," + "7" * 5000 + "\u202e,d,a,b\n", 3, "Item3", "holds U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        # issue 32: an unterminated quote is named, not counted as a row of 2 fields
        (ANN_HEADER + '1,2,3,4,1,4\n1,"2,3,4,1,4\n1,2,3,4,1,4\n', 3, "Item2", "a quote opened in this field is never closed"),
    ],
)
def test_score_reports_the_first_problem_in_the_file(tmp_path: Path, text: str, line: int, field: str | None, words: str) -> None:
    path = tmp_path / "a.csv"
    path.write_text(text)
    proc = _cli("score", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    where = f"{path}, line {line}" + (f", field {field!r}" if field else "")
    assert proc.stderr.startswith(f"fsb score: error: {where}: ") and words in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and len(proc.stderr) < 400, "one short line, even for a 5000-character id"


def test_score_takes_all_digit_ids_above_the_int64_range_as_strings_whole(tmp_path: Path) -> None:
    """Labels are opaque (issue 32): 99999999999999999999 and a 5000-digit id were refused as "outside
    0..9223372036854775807"; each is now an item of its own, written back whole."""
    path, out = tmp_path / "a.csv", tmp_path / "s.csv"
    huge = "7" * 5000
    path.write_text(ANN_HEADER + "1,2,3,4,1,4\n1,2,99999999999999999999," + huge + "," + huge + ",1\n", encoding="utf-8")
    proc = _cli("score", str(path), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    scores = dict(line.split(",")[:2] for line in out.read_text(encoding="utf-8").splitlines()[1:])
    assert set(scores) == {"1", "2", "3", "4", "99999999999999999999", huge} and scores[huge] == "1.000000"


@pytest.mark.parametrize(
    ("which", "text", "line", "field", "words"),
    [
        ("ann", ANN_HEADER + "1,2,3,4,1,4\n1,2,3,\u0664,1,4\n", 3, "Item4", "not an integer id: '\u0664'"),
        ("ann", ANN_HEADER + "1,2,3,4,1,4\n1,2,3,\uff14,1,4\n", 3, "Item4", "not an integer id"),
        ("ann", ANN_HEADER + "1,2,3,4,1,4\n1,2,3,+4,1,4\n", 3, "Item4", "not an integer id: '+4'"),
        ("ann", ANN_HEADER + "1,2,3,4,1,4\n1,2,3,2147483648,1,4\n", 3, "Item4", "id 2147483648 is outside 0..2147483647"),
        ("ann", ANN_HEADER + "1,2,3,4,1,4\n1,2,3," + "9" * 20 + ",1,4\n", 3, "Item4", "is outside 0..2147483647"),
        ("gen", GEN_HEADER + "1,completion,explicit,a,b\n2147483648,completion,explicit,a,b\n", 3, "uid", "outside 0..2147483647"),
        ("gen", GEN_HEADER + "1,completion,explicit,a,b\n" + "9" * 10**7 + ",completion,explicit,a,b\n", 3, "uid", "outside"),
        ("gen", GEN_HEADER + '1,completion,explicit,a,"' + "x" * 10**7 + '"\n2,completion,nonsense,a,b\n', 3, "seed_type", "unknown"),
        ("gen", "uid,prompt_type,seed_type,query,response,query\n1,completion,explicit,a,b,c\n", 1, "query", "column name repeated"),
        ("gen", GEN_HEADER + "1,completion,explicit,a,b\n2,completion\n", 3, None, "2 fields where the header has 5"),
        # one row, two problems: the left one (uid) is reported, whatever the kind of check
        ("gen", GEN_HEADER + "1,completion,explicit,a,b\nx,rewrite,explicit,a,b\n", 3, "uid", "not an integer id"),
    ],
)
def test_build_reports_the_first_problem_as_one_line(
    which: str, text: str, line: int, field: str | None, words: str, good: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    g, a, out = good
    bad = tmp_path / f"{which}.csv"
    bad.write_text(text, encoding="utf-8")
    g, a = (g, bad) if which == "ann" else (bad, a)
    before = _snapshot(out)
    proc = _cli("build", "--generations", str(g), "--annotations", str(a), "--out", str(out), "--no-record")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    where = f"{bad}, line {line}" + (f", field {field!r}" if field else "")
    assert proc.stderr.startswith(f"fsb build: error: {where}: ") and words in proc.stderr
    assert len(proc.stderr) < 400
    assert _snapshot(out) == before


def test_cr_only_line_endings_read_like_lf(tmp_path: Path) -> None:
    """An "old Mac" file (CR-only line ends) is read like the same file with LF, by both annotation readers
    (Python's below 1 MB, pyarrow's above) and by fsb build; a bad row is named by its line."""
    rows = [
        [*(str(v) for v in t), str(t[0]), str(t[3])] for t in ((i % 97 + 1, i % 89 + 100, i % 83 + 200, i % 79 + 300) for i in range(60000))
    ]
    for n in (5, 60000):
        text = ANN_HEADER + "".join(",".join(r) + "\n" for r in rows[:n])
        lf, cr = tmp_path / f"lf{n}.csv", tmp_path / f"cr{n}.csv"
        lf.write_bytes(text.encode())
        cr.write_bytes(text.replace("\n", "\r").encode())
        assert (cr.stat().st_size > 1 << 20) == (n == 60000)
        want, got = _cli("score", str(lf)), _cli("score", str(cr))
        assert got.returncode == 0 and got.stdout == want.stdout and want.stdout.count("\n") > 5, got.stderr[-500:]
    bad = tmp_path / "bad.csv"
    bad.write_bytes((ANN_HEADER + "1,2,3,4,1,4\n1,2,3,4,9,4\n").replace("\n", "\r").encode())
    proc = _cli("score", str(bad))
    assert proc.returncode == 2 and proc.stderr.startswith(f"fsb score: error: {bad}, line 3, field 'BestItem': 9 is not one"), proc.stderr
    g, a = make_raw(tmp_path / "raw", n=16, seed=4)
    a.write_bytes(a.read_bytes().replace(b"\r\n", b"\r").replace(b"\n", b"\r"))
    proc = _cli("build", "--generations", str(g), "--annotations", str(a), "--out", str(tmp_path / "out"), "--no-record")
    assert proc.returncode == 0 and "16 sentences" in proc.stdout, proc.stderr[-2000:]


def test_echoed_values_are_short_and_escaped(good: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """A 200 KB field is echoed as 40 characters and its length; a header with a NUL in a name is refused naming
    the missing column and what fsb expected, never the file's own names (issue 32)."""
    big = tmp_path / "big.csv"
    big.write_text(ANN_HEADER + '1,2,3,4,1,"' + "x" * 200_000 + '"\n', encoding="utf-8")
    proc = _cli("score", str(big))
    assert proc.returncode == 2 and f"{big}, line 2, field 'WorstItem': '{'x' * 40}'... (200000 characters) is not one" in proc.stderr
    assert len(proc.stderr) < 400, len(proc.stderr)
    gen = tmp_path / "gen.csv"
    gen.write_text(GEN_HEADER + '1,completion,"' + "e" * 200_000 + '",a,b\n', encoding="utf-8")
    proc = _cli("build", "--generations", str(gen), "--annotations", str(good[1]), "--out", str(tmp_path / "o"), "--no-record")
    assert proc.returncode == 2 and "unknown seed_type 'eeee" in proc.stderr and len(proc.stderr) < 400, proc.stderr[:500]
    nul = tmp_path / "nul.csv"
    nul.write_text("Item1,Item\x002,Item3,Item4,BestItem,WorstItem\n1,2,3,4,1,4\n", encoding="utf-8")
    proc = _cli("score", str(nul))
    assert proc.returncode == 2, proc.stderr
    assert "field 'Item2': missing column (expected Item1..ItemK, BestItem, WorstItem)" in proc.stderr and "Item\\x00" not in proc.stderr


def test_previous_with_a_broken_stats_json_says_so(good: tuple[Path, Path, Path], tmp_path: Path) -> None:
    import shutil

    g, a, out = good
    prev = tmp_path / "prev"
    shutil.copytree(out, prev)
    (prev / "stats.json").write_text('{\n  "fingerprint": "abc",\n  oops\n}\n', encoding="utf-8")
    proc = _cli(
        "build", "--generations", str(g), "--annotations", str(a), "--out", str(tmp_path / "new"), "--no-record", "--previous", str(prev)
    )
    assert proc.returncode == 2 and not (tmp_path / "new").exists()
    assert f"{prev / 'stats.json'}, line 3: stats.json is not valid JSON (Expecting property name enclosed in double quotes)" in proc.stderr


def test_deeply_nested_jsonl_line(tmp_path: Path) -> None:
    """A generations JSONL line of 100000 "[" is "nested too deeply" with its file and line, not a RecursionError."""
    from fsb.tables.csvrows import read_generations

    path = tmp_path / "g.jsonl"
    path.write_text('{"uid": 1}\n' + "[" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"g.jsonl, line 2: not valid JSON: nested too deeply"):
        read_generations(path)
    proc = _cli("build", "--generations", str(path), "--annotations", str(path), "--out", str(tmp_path / "o"), "--no-record")
    assert proc.returncode == 2 and proc.stderr == f"fsb build: error: {path}, line 2: not valid JSON: nested too deeply\n", proc.stderr[
        -500:
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["build", "--trials", "99999999999"], "argument --trials: at most 100000 split-half trials"),
        (["reliability", "x.csv", "--trials", "100001"], "argument --trials: at most 100000 split-half trials"),
        (["score", "x.csv", "--ci", "--bootstrap", "99999999999"], "argument --bootstrap: at most 10000 bootstrap resamples"),
        (["report", "--bootstrap", "99999999999"], "argument --bootstrap: at most 10000 bootstrap resamples"),
        (["report", "--trials", "99999999999"], "argument --trials: at most 100000 split-half trials"),
        *(
            ([cmd, *pre, "--model", "m", "--dry-run", *opt], words)
            for cmd, pre in (("annotate", ["llm", "x.csv"]), ("generate", []), ("explain", []))
            for opt, words in (
                (["--temperature", "nan"], "argument --temperature: must be a finite number, got 'nan'"),
                (["--temperature", "inf"], "argument --temperature: must be a finite number, got 'inf'"),
                (["--temperature", "-1"], "argument --temperature: a temperature is from 0 to 2"),
                (["--temperature", "2.5"], "argument --temperature: a temperature is from 0 to 2"),
                (["--top-p", "2"], "argument --top-p: top-p is a probability mass, greater than 0 and at most 1, got 2.0"),
                (["--top-p", "0"], "argument --top-p: top-p is a probability mass"),
                (["--presence-penalty=-inf"], "argument --presence-penalty: must be a finite number"),
            )
        ),
    ],
)
def test_counts_and_sampling_options_are_bounded(args: list[str], words: str) -> None:
    """Counts that would need terabytes, and sampling values no endpoint accepts, are usage errors (one line,
    exit 2, saying why) before anything runs."""
    proc = _cli(*args)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and words in proc.stderr, proc.stderr[-1000:]


def test_out_of_memory_is_one_line() -> None:
    """numpy's failure to allocate (a MemoryError) is an expected failure of the CLI: one line, no traceback."""
    import numpy as np

    from fsb.cli.app import expected_failure

    with pytest.raises(MemoryError) as err:
        np.empty(2**62, dtype=np.int8)
    message = expected_failure(err.value)
    assert message is not None and message.startswith("out of memory (Unable to allocate") and "--trials" in message


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["5", "--k", "1000"], "5: 1250 tuples of 4 items hold 5000 3-item subsets, but 5 items have only 10"),
        (["20", "--k", "10000"], "20: 50000 tuples of 4 items hold 200000 3-item subsets, but 20 items have only 1140"),
        (["20", "--k", "58"], "is met here; the counting bound is --k 57, which the search may not reach"),
        (["3000", "--k", "100000000"], "75000000000 tuples is more than the 10000000 fsb designs"),
        (
            ["new3.txt", "--extend", "ex.csv", "--k", "1000"],
            "1000 new tuples hold 1000 3-item subsets of new items, but 3 new items have only 1",
        ),
        (
            ["new20.txt", "--extend", "ex.csv", "--k", "100"],
            "an existing item joins 84 new tuples holding 250 pairs of new items, but 20 new items have only 190",
        ),
    ],
)
def test_impossible_designs_are_refused_up_front(args: list[str], words: str, tmp_path: Path) -> None:
    """A design in which some two tuples must share 3 items (more 3-subsets needed than exist) is refused
    before any search, in one line saying why; the search would otherwise run for hours."""
    (tmp_path / "ex.csv").write_text(ANN_HEADER + "1,2,3,4,1,4\n5,6,7,8,5,8\n", encoding="utf-8")
    (tmp_path / "new3.txt").write_text("id\n100\n101\n102\n", encoding="utf-8")
    (tmp_path / "new20.txt").write_text("id\n" + "".join(f"{100 + i}\n" for i in range(20)), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "fsb", "tuples", *args, "--out", "d.csv"], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and words in proc.stderr, proc.stderr[-500:]
    assert not (tmp_path / "d.csv").exists()


def test_design_search_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A feasible-looking design near the counting bound ends after MAX_SEARCH_STEPS swaps with one line,
    whatever --k asks for (20 items seen 57 times: at the bound, the search does not find one)."""
    from fsb import bws
    from fsb.bws import designs

    assert bws.design_size_problem(20, 20 * 57 // 4, 4, 57) is None
    monkeypatch.setattr(designs, "MAX_SEARCH_STEPS", 2000)
    with pytest.raises(RuntimeError, match=r"no design of 4-tuples .* for 20 items seen 57 times each within 2000 swaps; use more items"):
        bws.bws_design(20, appearances=57)


def test_an_out_folder_with_a_deeply_nested_stats_json_is_refused_in_one_line(good: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """--out looks like a build made before seals but its stats.json nests 100000 levels: refused as not a
    build (one line), not a RecursionError."""
    g, a, _ = good
    out = tmp_path / "deep"
    for rel in ("data/default/test-0.parquet", "data/annotations/test-0.parquet", "README.md"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("x")
    (out / "stats.json").write_text("[" * 100_000)
    proc = _cli("build", "--generations", str(g), "--annotations", str(a), "--out", str(out), "--no-record")
    assert proc.returncode == 2 and "stats.json is not the one fsb build writes" in proc.stderr and len(proc.stderr.splitlines()) == 1
