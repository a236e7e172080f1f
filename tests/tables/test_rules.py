"""fsb.tables.rules: the judgments layout's rules hold on every reader path alike (Python's reader for small files,
the whole file through pyarrow, the block stream): the header's item columns without a gap, ids above 2**63-1
taken as strings whole, ids NFC-normalised, invisible and bidi control characters refused by code point, and a
refusal of the header that names only the columns fsb expected (issues 32 and 34)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fsb.core.readers import InputError
from fsb.tables import judgments, streamcells
from fsb.tables.judgments import Annotations, read_annotations
from fsb.tables.rules import label_fields

PATHS = ("python", "stream", "whole file")


def _write(path: Path, header: str, rows: list[list[str]], repeat: int = 1) -> Path:
    """`header` and `rows` (repeated `repeat` times, so that a large-file path has something to read)."""
    body = "".join(",".join(r) + "\n" for r in rows) * repeat
    path.write_text(header + "\n" + body, encoding="utf-8")
    return path


def _reader(kind: str, monkeypatch: pytest.MonkeyPatch, seen: list) -> Callable[[Path], Annotations]:
    """read_annotations on one path: "python" (a small file), "stream" (any file is large: string labels are
    streamed), "whole file" (large, and a quoted first label: the stream hands the file to pyarrow's reader)."""
    if kind != "python":
        monkeypatch.setattr(judgments, "FAST_READER_BYTES", 0)
        real = streamcells.stream_cells

        def spy(*args, **kwargs):
            got = real(*args, **kwargs)
            seen.append(got)
            return got

        monkeypatch.setattr(streamcells, "stream_cells", spy)

    def read(path: Path) -> Annotations:
        if kind == "whole file":
            header, first, rest = path.read_text(encoding="utf-8").split("\n", 2)
            path.write_text(f'{header}\n"{first.split(",")[0]}",{first.split(",", 1)[1]}\n{rest}', encoding="utf-8")
        return read_annotations(path)

    return read


@pytest.mark.parametrize("kind", PATHS)
def test_item_columns_with_a_gap_are_refused_naming_the_missing_column(tmp_path: Path, monkeypatch, kind: str) -> None:
    """Item1,Item2,Item4: Item4 was dropped silently (c never scored, exit 0; issue 34, fault 1). Refused in the
    header's line, naming Item3, on every path."""
    read = _reader(kind, monkeypatch, [])
    path = _write(tmp_path / "gap.csv", "Item1,Item2,Item4,BestItem,WorstItem", [["a", "b", "c", "a", "b"]], 50)
    with pytest.raises(InputError) as e:
        read(path)
    assert str(e.value).startswith(f"{path}, line 1, field 'Item3': missing column") and "names Item4 but not Item3" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize("extra", ["item5", "ITEM 5", "Item_5", "Item0"])
def test_a_column_named_like_an_item_column_but_not_one_is_refused(tmp_path: Path, monkeypatch, kind: str, extra: str) -> None:
    """Item1..Item4 and `item5` (or ITEM 5, Item_5, Item0): the extra column was read as a plain column and its items
    never scored, exit 0 (found by the adversarial review). Refused in the header's line, naming it, on every path."""
    read = _reader(kind, monkeypatch, [])
    header = f"Item1,Item2,Item3,Item4,BestItem,WorstItem,{extra}"
    path = _write(tmp_path / "near.csv", header, [["a", "b", "c", "d", "a", "b", "e"]], 50)
    with pytest.raises(InputError) as e:
        read(path)
    assert str(e.value).startswith(f"{path}, line 1, field '{extra}': '{extra}' looks like an item column") and "\n" not in str(e.value)


def test_label_fields_name_the_first_missing_item_column() -> None:
    """The missing column is the first gap, whatever the order or the other columns; no gap: K columns."""
    assert label_fields("f", ["Item2", "Item1", "WorstItem", "x", "BestItem"]) == (["Item1", "Item2", "BestItem", "WorstItem"], None, None)
    for header, missing in (
        (["Item1", "Item2", "Item3", "Item5", "BestItem", "WorstItem"], "Item4"),
        (["Item2", "Item3", "BestItem", "WorstItem"], "Item1"),
        (["Item1", "BestItem", "WorstItem"], "Item2"),
    ):
        with pytest.raises(InputError, match=f"field '{missing}': missing column"):
            label_fields("f", header)


@pytest.mark.parametrize("kind", PATHS)
def test_all_digit_ids_above_the_int64_range_are_taken_as_strings_whole(tmp_path: Path, monkeypatch, kind: str) -> None:
    """Labels are opaque: 18446744073709551616 (2**64) was refused as "outside 0..2**63-1", though one non-digit
    label would have made every label a string (issue 32). Now the file is read with string labels, each whole."""
    read = _reader(kind, monkeypatch, [])
    huge = str(2**64)
    path = _write(tmp_path / "big.csv", "Item1,Item2,Item3,Item4,BestItem,WorstItem", [[huge, "2", "3", "4", huge, "3"]], 50)
    got = read(path)
    assert got.labels.dtype.kind == "U" and sorted(got.labels.tolist()) == sorted([huge, "2", "3", "4"])
    assert got.best.tolist() == [huge] * 50


@pytest.mark.parametrize("kind", PATHS)
def test_ids_that_print_the_same_are_one_item_after_nfc(tmp_path: Path, monkeypatch, kind: str) -> None:
    """ "e" + U+0301 and the precomposed U+00E9 were two items (issue 34, fault 4): labels are NFC-normalised, so a
    tuple holding both repeats an item, and a best written one way matches an item written the other."""
    read = _reader(kind, monkeypatch, [])
    rows = [["cafe\u0301", "x", "y", "z", "caf\u00e9", "x"], ["caf\u00e9", "x", "y", "w", "cafe\u0301", "y"]]
    got = read(_write(tmp_path / "nfc.csv", "Item1,Item2,Item3,Item4,BestItem,WorstItem", rows, 50))
    assert sorted(got.labels.tolist()) == ["caf\u00e9", "w", "x", "y", "z"]
    assert np.array_equal(got.best_codes, got.item_codes[:, 0])
    twice = [["cafe\u0301", "caf\u00e9", "y", "z", "y", "z"]]
    twice = _write(tmp_path / "twice.csv", "Item1,Item2,Item3,Item4,BestItem,WorstItem", twice, 50)
    with pytest.raises(InputError, match=f"{twice}, line 2, field 'Item2': the tuple repeats item 'café'"):
        read(twice)


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize(
    ("char", "name"), [("\u200b", "ZERO WIDTH SPACE"), ("\u202e", "RIGHT-TO-LEFT OVERRIDE"), ("\u2066", "LEFT-TO-RIGHT ISOLATE")]
)
def test_an_id_with_an_invisible_or_bidi_control_character_is_refused_naming_the_code_point(
    tmp_path: Path, monkeypatch, kind: str, char: str, name: str
) -> None:
    """An id carrying a zero-width space or a right-to-left override was taken silently (it prints as another id;
    issue 34, fault 4): refused in one line naming the code point, the line and the field (the first such cell)."""
    read = _reader(kind, monkeypatch, [])
    rows = [["a", "b", "c", "d", "a", "b"]] * 30 + [["a", "b", f"x{char}y", "d", "a", "b"]] + [["a", "b", "c", "d", "a", "b"]] * 30
    path = _write(tmp_path / "bidi.csv", "Item1,Item2,Item3,Item4,BestItem,WorstItem", rows)
    with pytest.raises(InputError) as e:
        read(path)
    code = f"U+{ord(char):04X}"
    assert str(e.value).startswith(f"{path}, line 32, field 'Item3': id 'x\\u{ord(char):04x}y' holds {code} ({name})"), str(e.value)
    assert "\n" not in str(e.value) and char not in str(e.value)


def test_a_refused_header_quotes_only_the_columns_fsb_expected(tmp_path: Path) -> None:
    """A file given by mistake (a system file, say) had its first line echoed in "missing column (the header
    has: ...)" (issue 32): the refusal names what fsb expected, never the file's own line."""
    path = tmp_path / "passwd"
    path.write_text("root:x:0:0:root:/root:/bin/bash,secret-ish\ndaemon:x:1:1\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_annotations(path)
    assert str(e.value) == f"{path}, line 1, field 'Item1': missing column (expected Item1..ItemK, BestItem, WorstItem)"


def test_a_header_field_longer_than_csvs_default_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    """A header holding a 200,000-character field (csv's default field limit is 131,072): `header_of` read it
    before the limit was raised, and `fsb score` stopped with a traceback (exit 1, _csv.Error); now the header
    is read and refused as a header, naming the columns fsb expected, without echoing the field."""
    from fsb.tables.rules import header_of

    data = ("x" * 200_000 + ",BestItem,WorstItem\n1,2\n").encode()
    assert header_of(tmp_path / "j.csv", data)[0][1:] == ["BestItem", "WorstItem"]
    (tmp_path / "j.csv").write_bytes(data)
    with pytest.raises(InputError, match="missing column") as e:
        read_annotations(tmp_path / "j.csv")
    assert e.value.field == "Item1" and len(str(e.value)) < 300
