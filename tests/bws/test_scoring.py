"""fsb score and fsb reliability from the file: the --invalid policies against the NRC Perl script's own
output, the MaxDiff and interval columns, and the two reader paths (pyarrow for large files, Python's
csv for small ones) giving the same tables and the same errors."""

from __future__ import annotations

import csv
import io
import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fsb.bws import maxdiff, scoring
from fsb.core.readers import InputError
from fsb.tables import judgments
from tests._support import run_fsb, write_csv

DATA = Path(__file__).resolve().parents[1] / "fixtures"


def fsb(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = run_fsb(*args)
    if check and proc.returncode != 0:
        raise AssertionError(f"fsb {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def _table(text: str) -> dict[str, dict[str, str]]:
    return {row["item"]: row for row in csv.DictReader(io.StringIO(text))}


def test_invalid_count_reproduces_the_perl_script() -> None:
    """tests/fixtures/qc-rows.perl-scores.csv is the output of get-scores-from-BWS-annotations-counting.pl
    (NRC, 2016) on qc-rows.csv: check rows where a placeholder fills 2-3 slots and is both best and worst."""
    proc = fsb("score", str(DATA / "qc-rows.csv"), "--invalid", "count")
    ours = _table(proc.stdout)
    perl = dict(line.split(",") for line in (DATA / "qc-rows.perl-scores.csv").read_text().split())
    assert set(ours) == set(perl)
    for item, score in perl.items():
        assert f"{float(ours[item]['score_raw']):.3f}" == score, item
    assert ours["check"]["n"] == "5", "a repeated item counts once per slot it fills"
    assert ours["check"]["best"] == "2" and ours["check"]["worst"] == "2", "best = worst counts both ways"
    assert "2 with repeated item (first on line 4), 3 with best = worst (first on line 4)" in proc.stderr


@pytest.mark.skipif(not os.environ.get("FSB_PERL_BWS"), reason="set FSB_PERL_BWS to the NRC Perl scripts' folder")
def test_invalid_count_against_the_live_perl_script(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(300):
        t = rng.choice(30, size=4, replace=False).astype(str)
        if rng.random() < 0.1:
            t[rng.integers(1, 4)] = t[0]
        rows.append([*t, t[rng.integers(4)], t[rng.integers(4)]])
    ann = write_csv(tmp_path / "a.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"], rows)
    script = Path(os.environ["FSB_PERL_BWS"]) / "get-scores-from-BWS-annotations-counting.pl"
    subprocess.run(["perl", str(script), str(ann), str(tmp_path / "p.csv")], check=True, capture_output=True)
    perl = dict(line.split(",") for line in (tmp_path / "p.csv").read_text().split())
    ours = _table(fsb("score", str(ann), "--invalid", "count").stdout)
    assert {k: f"{float(v['score_raw']):.3f}" for k, v in ours.items()} == {k: v.replace("-0.000", "0.000") for k, v in perl.items()}


@pytest.mark.skipif(not os.environ.get("FSB_PERL_BWS"), reason="set FSB_PERL_BWS to the NRC Perl scripts' folder")
@pytest.mark.parametrize("sizes", [(1, 3, 7, 8), (3, 7, 9, 10)], ids=["packed-keys", "hashed-strings"])
def test_large_string_id_file_matches_the_live_perl_script(tmp_path: Path, sizes: tuple[int, ...]) -> None:
    """A file over FAST_READER_BYTES with string ids of up to 8 characters (packed into integer keys) or
    some longer (hashed as strings), an Annotator column, and quality-control rows (--invalid count):
    fsb's scores are the Perl script's, item for item (the path `fsb score` takes on real studies' files)."""
    rng = np.random.default_rng(7)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))
    lengths = rng.choice(sizes, size=3000)
    ids = sorted({"".join(alphabet[rng.integers(0, 36, size=n)]) for n in lengths})
    rows = []
    for r in range(40_000):
        t = [ids[i] for i in rng.choice(len(ids), size=4, replace=False)]
        if r % 97 == 0:
            t[2] = t[0]  # a repeated item, counted as the Perl script counts it
        rows.append([*t, t[rng.integers(4)], t[rng.integers(4)], f"ann{r % 5}"])
    ann = write_csv(tmp_path / "a.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator"], rows)
    assert ann.stat().st_size > judgments.FAST_READER_BYTES
    script = Path(os.environ["FSB_PERL_BWS"]) / "get-scores-from-BWS-annotations-counting.pl"
    subprocess.run(["perl", str(script), str(ann), str(tmp_path / "p.csv")], check=True, capture_output=True)
    perl = dict(line.split(",") for line in (tmp_path / "p.csv").read_text().split())
    ours = _table(fsb("score", str(ann), "--invalid", "count").stdout)
    assert len(ours) == len(ids)
    assert {k: f"{float(v['score_raw']):.3f}" for k, v in ours.items()} == {k: v.replace("-0.000", "0.000") for k, v in perl.items()}


def test_invalid_refuse_names_the_first_qc_row_and_drop_equals_deleting_them(tmp_path: Path) -> None:
    proc = fsb("score", str(DATA / "qc-rows.csv"), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "qc-rows.csv, line 4, field 'Item2': the tuple repeats item 'check'" in proc.stderr
    assert "--invalid count" in proc.stderr
    dropped = fsb("score", str(DATA / "qc-rows.csv"), "--invalid", "drop")
    assert "dropped 3 irregular rows" in dropped.stderr
    rows = list(csv.reader((DATA / "qc-rows.csv").open()))
    clean = write_csv(tmp_path / "clean.csv", rows[0], [r for r in rows[1:] if len(set(r[:4])) == 4 and r[4] != r[5]])
    assert dropped.stdout == fsb("score", str(clean)).stdout
    rel = fsb("reliability", str(DATA / "qc-rows.csv"), "--invalid", "drop", "--trials", "5", "--json")
    assert '"trials": 5' in rel.stdout and "dropped 3" in rel.stderr


def test_maxdiff_and_interval_columns_from_the_cli(tmp_path: Path) -> None:
    from tests._support import make_raw

    _, ann = make_raw(tmp_path, n=40, seed=2, judgments_per_tuple=3)
    out = tmp_path / "m.csv"
    fsb("score", str(ann), "--method", "maxdiff", "--ci", "--bootstrap", "50", "--out", str(out))
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == ["item", "score", "se", "n", "best", "worst", "ci_low", "ci_high", "bound"]
    score = np.array([float(r["score"]) for r in rows])
    low, high = (np.array([float(r[c]) for r in rows]) for c in ("ci_low", "ci_high"))
    assert abs(score.mean()) < 1e-6, "centred to mean 0"
    assert np.all(np.diff(score) <= 0), "most biased first"
    assert np.mean((low <= score) & (score <= high)) > 0.9 and np.all(high > low)
    # make_raw's judge prefers higher uids: the utilities must rank them so.
    assert np.corrcoef([int(r["item"]) for r in rows], score)[0, 1] > 0.8
    helptext = fsb("score", "--help").stdout
    assert "centred to mean 0" in " ".join(helptext.split())
    counting = list(csv.DictReader(io.StringIO(fsb("score", str(ann), "--ci", "--bootstrap", "50").stdout)))
    assert list(counting[0]) == ["item", "score_raw", "score", "n", "best", "worst", "ci_low", "ci_high", "bound"]


def test_a_small_file_imports_neither_pandas_nor_pyarrow(tmp_path: Path) -> None:
    ann = write_csv(tmp_path / "a.csv", ["Item1", "Item2", "Item3", "BestItem", "WorstItem"], [["1", "2", "3", "1", "3"]] * 10)
    code = (
        "import sys; from fsb.cli.app import main; main(['score', sys.argv[1]]); "
        "print(sorted(m for m in ('pandas', 'pyarrow', 'scipy', 'datasets') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(ann)], capture_output=True, text=True, check=True)
    assert proc.stdout.strip().endswith("[]"), proc.stdout


FILES = {
    "integer ids": "Item1,Item2,Item3,Item4,BestItem,WorstItem\n"
    + "".join(f"{i},{i + 7},{i + 3},{i + 11},{i + 3},{i}\n" for i in range(50)),
    "string labels, quoted header, CRLF, BOM": "\ufeff"
    + '"Item1","Item2","Item3","BestItem","WorstItem"\r\n'
    + "".join(f'"a {i}",b{i % 7}, c{i} ,b{i % 7},"a {i}"\r\n' for i in range(50)),
    "a quoted newline and blank lines": 'Item1,Item2,BestItem,WorstItem,Annotator\n1,2,1,2,"x\ny"\n\n3,4,4,3,z\n',
    "a repeat on line 9 beside an outside choice on line 12": "Item1,Item2,Item3,BestItem,WorstItem\n"
    + "".join("1,2,3,1,2\n" for _ in range(7))
    + "4,5,4,4,5\n1,2,3,1,3\n1,2,3,1,3\n1,2,3,9,3\n",
    "a 21-digit id": "Item1,Item2,BestItem,WorstItem\n1,2,1,2\n" + "123456789012345678901,2,2,123456789012345678901\n",
    "a non-ASCII digit": "Item1,Item2,BestItem,WorstItem\n1,2,1,2\n\u0663,2,2,\u0663\n",
    "an empty label": "Item1,Item2,BestItem,WorstItem\n1,2,1,2\n1, ,1, \n",
    "a short row": "Item1,Item2,BestItem,WorstItem\n1,2,1,2\n1,2,1\n",
}


def _outcome(path: Path, **kw: object) -> object:
    try:
        a = judgments.read_annotations(path, **kw)  # type: ignore[arg-type]
    except InputError as e:
        return ("error", e.line, e.field, e.message)
    return (
        "ok",
        a.labels.tolist(),
        a.item_codes.tolist(),
        a.best_codes.tolist(),
        a.worst_codes.tolist(),
        [a.line_of(i) for i in range(len(a))],
    )


@pytest.mark.parametrize("name", list(FILES))
@pytest.mark.parametrize("integer_ids", [False, True])
def test_both_reader_paths_agree(name: str, integer_ids: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.csv"
    path.write_text(FILES[name], encoding="utf-8", newline="")
    slow = _outcome(path, integer_ids=integer_ids)
    monkeypatch.setattr(judgments, "FAST_READER_BYTES", 0)
    assert _outcome(path, integer_ids=integer_ids) == slow


def test_first_bad_line_in_file_order_and_id_rules(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    for name, kw, expected in [
        ("a repeat on line 9 beside an outside choice on line 12", {}, (9, "Item3", "the tuple repeats item 4")),
        ("a 21-digit id", {"integer_ids": True}, (3, "Item1", "id 123456789012345678901 is outside 0..2147483647")),
        ("a non-ASCII digit", {"integer_ids": True}, (3, "Item1", "not an integer id: '\u0663'")),
        ("an empty label", {}, (3, "Item2", "empty value")),
        ("a short row", {}, (3, None, "3 fields where the header has 4")),
    ]:
        path.write_text(FILES[name], encoding="utf-8")
        with pytest.raises(InputError) as err:
            judgments.read_annotations(path, **kw)
        assert (err.value.line, err.value.field, err.value.message[: len(expected[2])]) == expected, name
    path.write_text(FILES["a 21-digit id"], encoding="utf-8")  # labels are opaque: past 2**63-1, every label is a string (issue 32)
    assert "123456789012345678901" in judgments.read_annotations(path).labels.tolist()


def test_fast_and_plain_formatting_agree() -> None:
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(0)
    n = rng.integers(1, 60, size=200_000)
    b = rng.integers(0, n + 1)
    cols = {"item": np.arange(n.size) * 7, "score_raw": (2 * b - n) / n, "score": b / n, "n": n}
    fast = scoring.format_csv(cols)
    plain = scoring.format_csv({k: v[:99_999] for k, v in cols.items()})
    assert fast.startswith(plain)
    assert scoring.csv_bytes(cols) == fast.encode() and scoring.csv_bytes({k: v[:99_999] for k, v in cols.items()}) == plain.encode()


def test_annotator_agreement_flags_a_random_clicker(tmp_path: Path) -> None:
    """Six careful annotators judge from one truth; a seventh clicks at random. Its leave-one-out agreement
    is near chance (1/4 per choice for 4-tuples) and flagged; the careful ones are well above it."""
    from fsb import bws
    from tests._support import simulate_bws

    n = 120
    rng = np.random.default_rng(0)
    truth = rng.normal(size=n) * 2
    design = bws.bws_design(n, seed=0)
    ti, best, worst = simulate_bws(design, truth, 7, seed=1)
    who = np.tile(np.arange(7), design.shape[0])
    clicker = who == 6
    shown = design[ti]
    pick = rng.integers(0, 4, size=(clicker.sum(), 2))
    pick[:, 1] = (pick[:, 0] + 1 + rng.integers(0, 3, size=pick.shape[0])) % 4
    best[clicker], worst[clicker] = shown[clicker, pick[:, 0]], shown[clicker, pick[:, 1]]
    rows = [[*shown[j].tolist(), int(best[j]), int(worst[j]), f"a{who[j]}"] for j in range(ti.size)]
    path = write_csv(tmp_path / "a.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator"], rows)
    result = scoring.annotator_agreement(judgments.read_annotations(path))
    assert result is not None
    by = {r["annotator"]: r for r in result}
    assert by["a6"]["outlier"] and not any(by[f"a{i}"]["outlier"] for i in range(6))
    assert 0.15 < by["a6"]["agreement"] < 0.35
    assert min(by[f"a{i}"]["agreement"] for i in range(6)) > 0.5
    assert all(r["judgments"] == design.shape[0] for r in result)
    proc = fsb("reliability", str(path), "--trials", "5", "--spearman-brown")
    assert "a6" in proc.stdout and "*" in proc.stdout and "Spearman-Brown" in proc.stdout
    no_ids = write_csv(tmp_path / "b.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"], [r[:6] for r in rows])
    assert scoring.annotator_agreement(judgments.read_annotations(no_ids)) is None


def test_build_with_quality_control_rows(tmp_path: Path) -> None:
    """fsb build --invalid count/drop: the check rows are counted or left out, and stats.json says how many."""
    import json

    from tests._support import make_raw

    g, a = make_raw(tmp_path / "raw", n=16, seed=1)
    text = a.read_text() + "3,3,5,3,3,3\n7,8,7,9,7,7\n"
    a.write_text(text)
    refused = fsb("build", "--generations", str(g), "--annotations", str(a), "--out", str(tmp_path / "r"), "--no-record", check=False)
    assert refused.returncode == 2 and "the tuple repeats item 3" in refused.stderr
    n_rows = len(text.strip().splitlines()) - 1
    for policy, kept in (("count", n_rows), ("drop", n_rows - 2)):
        out = tmp_path / policy
        proc = fsb("build", "--generations", str(g), "--annotations", str(a), "--out", str(out), "--no-record", "--invalid", policy)
        stats = json.loads((out / "stats.json").read_text())
        assert stats["n_annotations"] == kept
        assert stats["invalid"]["irregular"]["repeated item"]["rows"] == 2
        assert stats["invalid"]["irregular"]["best = worst"] == {"rows": 2, "first_line": n_rows}
        assert "irregular judgments" in proc.stderr
        card = (out / "README.md").read_text()  # issue 11: the card says so too, by kind
        assert f"2 with a repeated item (first on line {n_rows})" in card and f"2 with best = worst (first on line {n_rows})" in card
        assert ("2 irregular (quality-control) rows of the judgments file were left out" in card) == (policy == "drop")
        assert ("were counted as they stand" in card) == (policy == "count")


def test_build_keeps_each_judgments_timestamp(tmp_path: Path) -> None:
    """Issue 11: a Timestamp column (Label Studio's created_at, via `fsb annotate import`) reaches the build's
    annotations config; an empty cell is null, and a file without the column gives null everywhere."""
    import datasets

    from tests._support import make_raw

    g, a = make_raw(tmp_path / "raw", n=16, seed=1)
    lines = a.read_text().strip().splitlines()
    stamps = [f"2026-11-{1 + i % 28:02d}T10:{i % 60:02d}:00.000000Z" if i != 3 else "" for i in range(len(lines) - 1)]
    timed = tmp_path / "timed.csv"
    timed.write_text(
        "\n".join([lines[0] + ",Annotator,Timestamp", *(f"{r},u{i % 3},{t}" for i, (r, t) in enumerate(zip(lines[1:], stamps)))]) + "\n"
    )
    for src, out in ((timed, tmp_path / "with"), (a, tmp_path / "without")):
        proc = fsb("build", "--generations", str(g), "--annotations", str(src), "--out", str(out), "--no-record")
        assert proc.returncode == 0, proc.stderr
    got = datasets.load_dataset(str(tmp_path / "with"), "annotations")["test"]
    assert got.features["timestamp"].dtype == "string"
    assert got["timestamp"] == [t or None for t in stamps]
    none = datasets.load_dataset(str(tmp_path / "without"), "annotations")["test"]
    assert none["timestamp"] == [None] * len(stamps)
    assert "| `timestamp` | string |" in (tmp_path / "with" / "README.md").read_text()


def test_large_tables_are_written_by_pyarrow_exactly_as_by_pythons_csv_module() -> None:
    """Issue 23: string-labelled tables (and ones holding NaN intervals) now take pyarrow's writer; the
    text must be the csv module's, byte for byte ("%.6f", NaN empty); labels that need quotes still go
    through the csv module."""
    rng = np.random.default_rng(0)
    n = 100_000
    labels = np.array([f"cza{i}q" for i in range(n)])
    score = rng.normal(size=n)
    score[::7] = np.nan
    cols = {"item": labels, "score": score, "n": np.arange(n), "ci_low": rng.normal(size=n)}

    def by_csv(c: dict[str, np.ndarray]) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(list(c))
        text = [["" if v != v else f"{v:.6f}" for v in x.tolist()] if x.dtype.kind == "f" else x.tolist() for x in c.values()]
        writer.writerows(zip(*text))
        return buf.getvalue()

    assert scoring.format_csv(cols) == by_csv(cols)
    quoted = {**cols, "item": np.array([f"a,{i}" if i == 5 else f"b{i}" for i in range(n)])}
    assert scoring.format_csv(quoted) == by_csv(quoted)
    assert '"a,5"' in scoring.format_csv(quoted)


def test_labels_needing_quotes_and_unicode_labels_are_written_as_by_pythons_csv_module() -> None:
    """The fast writer's two label checks (which labels need quotes, which are ASCII) decide the path: every
    character that needs quoting (comma, quote, CR, LF) sends a 1e5-row table to the csv module, an empty
    label too, and non-ASCII, internal NUL or mixed-width labels are copied to pyarrow exactly
    (`fsb.tables.labelcodes.strings_to_arrow` against pyarrow's own conversion). Catches a check that misses a
    character, or an ASCII copy that shifts, pads or truncates a label."""
    import pyarrow as pa

    from fsb.tables.labelcodes import strings_to_arrow

    n = 100_000
    base = np.array([f"b{i}" for i in range(n)])
    for odd, at in itertools.product(("a,5", 'a"5', "a\r5", "a\n5", ""), (5, n - 1)):  # first and last block of labels read
        labels = base.copy().astype(f"U{max(len(odd), 7)}")
        labels[at] = odd
        cols = {"item": labels, "score": np.linspace(0, 1, n), "n": np.arange(n)}
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([list(cols), *zip(labels.tolist(), [f"{v:.6f}" for v in cols["score"]], range(n))])
        assert scoring.format_csv(cols) == buf.getvalue(), (odd, at)
    for values in (
        np.array(["a", "bc", "", "x\x00y", "longer label"]),
        np.array(["é", "a", "日本"]),
        np.array(["abc", "de", "f"])[::-1],
        np.array(["abc", "x\x00y", "def"]),  # one width: the bytes copied as they are, a NUL inside kept
        np.array(["日本", "中文"]),  # one UTF-8 width, not ASCII
        np.array([f"{i:040x}" for i in range(1000)])[::3],  # hashes, strided
        np.array([], dtype=str),
    ):
        assert strings_to_arrow(values).equals(pa.array(values.tolist(), type=pa.string())), values


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fsb", *args], capture_output=True, text=True, check=False)


def test_refusals_are_one_line_with_the_reason(tmp_path: Path) -> None:
    """Issue 19 messages, end to end: maxdiff with --invalid count is refused (the likelihood has no
    reading for a quality-control row), and fsb tuples says why a size cannot make a design."""
    one = tmp_path / "one.csv"
    one.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\n1,2,3,4,1,4\n")
    cases = [
        (["score", str(one), "--method", "maxdiff", "--invalid", "count"], "--method maxdiff cannot take --invalid count"),
        (["tuples", "3", "--out", str(tmp_path / "t.csv")], "3 items are too few: 4-tuples need more than 4 items"),
        (["tuples", "5", "--size", "1", "--out", str(tmp_path / "t.csv")], "a tuple holds at least 2 items (--size 1)"),
        (["tuples", "10", "--k", "3", "--out", str(tmp_path / "t.csv")], "30 places, and that must be a multiple of tuple_size (4)"),
    ]
    for args, expected in cases:
        proc = _run(args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    ok = _run(["score", str(one), "--method", "maxdiff", "--invalid", "drop"])
    assert ok.returncode == 0, ok.stderr


def test_counting_a_large_file_imports_neither_pandas_nor_the_pyarrow_compute_module(tmp_path: Path) -> None:
    """`fsb score` on a file over FAST_READER_BYTES (pyarrow's reader, string ids, the arrow CSV writer)
    imports neither pandas nor `pyarrow.compute` (0.06 s of CPU building kernel wrappers at import, an
    eighth of a 1e5-item run): the kernels are called through `fsb.tables.labelcodes.arrow_call`."""
    rng = np.random.default_rng(2)
    ids = [f"i{v:06d}" for v in range(40_000)]
    rows = [[*(ids[i] for i in t), ids[t[0]], ids[t[3]]] for t in (rng.choice(len(ids), size=4, replace=False) for _ in range(120_000))]
    ann = write_csv(tmp_path / "a.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"], rows)
    assert ann.stat().st_size > judgments.FAST_READER_BYTES
    code = (
        "import sys; from fsb.cli import main; "
        f"assert main(['score', {str(ann)!r}, '--out', {str(tmp_path / 's.csv')!r}]) == 0; "
        "print(sorted(m for m in ('pandas', 'pyarrow.compute', 'pyarrow.csv') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split("\n")[-2] == "['pyarrow.csv']"  # the fast reader ran, and nothing heavier
    assert sum(1 for _ in (tmp_path / "s.csv").open()) == len(ids) + 1


def test_arrow_pool_pages_are_handed_back_before_the_maxdiff_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large file is read and coded through pyarrow, whose pool keeps freed pages (450 MB at 1e6 items)
    that numpy never reuses: `score_columns` must hand them back before the fit and the bootstrap, and
    `release_arrow_memory` must really shrink the process (a no-op release, or one after the fit, keeps
    the peak where it was)."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.compute as pc

    from tests._support import make_raw

    kept = [pc.add(pa.array(np.arange(100_000)), 1) for _ in range(200)]  # 160 MB of Arrow buffers, then freed
    del kept
    if not Path("/proc/self/statm").exists():
        pytest.skip("no /proc/self/statm: resident memory unknown")
    assert scoring.release_arrow_memory() > 80e6
    assert scoring.release_arrow_memory() < 20e6  # nothing left to hand back

    _, path = make_raw(tmp_path, n=30, seed=1, judgments_per_tuple=2)
    ann = judgments.read_annotations(path=path)
    events: list[str] = []
    real_pool, real_fit = pa.default_memory_pool, maxdiff.fit_maxdiff

    class Pool:
        def release_unused(self) -> None:
            events.append("release")
            real_pool().release_unused()

    monkeypatch.setattr(pa, "default_memory_pool", Pool)
    monkeypatch.setattr(maxdiff, "fit_maxdiff", lambda *a, **k: events.append("fit") or real_fit(*a, **k))
    cols = scoring.score_columns(ann, method="maxdiff", ci=True, n_boot=20)
    assert events == ["release", "fit"] and cols["ci_low"].size == 30


@pytest.mark.parametrize("n", [1_000, 200_000])
@pytest.mark.parametrize("labels", ["ints", "hashes"])
def test_rows_written_in_order_are_the_table_gathered_first(n: int, labels: str) -> None:
    """`csv_bytes(cols, rows=order)` (each column gathered as it is written: labels as UTF-8 bytes on the
    pyarrow path) is the table gathered first, on both writers; `score_order` is score_columns' own order.
    Catches a column left ungathered, a label gathered by another permutation, the orders differing."""
    rng = np.random.default_rng(1)
    items = np.arange(n) * 3 if labels == "ints" else np.array([f"{v:040x}" for v in rng.integers(0, 2**62, size=n)])
    score = np.round(rng.random(n), 2)  # ties: the stable sort keeps label order
    cols = {"item": np.sort(items), "score": score, "n": rng.integers(1, 9, size=n), "ci_low": np.where(score > 0.9, np.nan, score)}
    order = scoring.score_order(cols)
    assert np.array_equal(order, np.argsort(-score, kind="stable"))
    gathered = {k: v[order] for k, v in cols.items()}
    assert scoring.csv_bytes(cols, rows=order) == scoring.csv_bytes(gathered) == scoring.format_csv(gathered).encode()
