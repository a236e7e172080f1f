"""The individual best-worst judgments file (`Item1..ItemK,BestItem,WorstItem[,Annotator][,Timestamp]`)
-> validated, integer-coded `Annotations` (`read_annotations`), and the checks against a set of uids.
(size: one reader, about 590 lines: its fast pyarrow paths, its exact Python path and the vectorised
checks share one first-bad-line rule, and apart they would need each other's private pieces; the
label coding itself is in `fsb.tables.labelcodes`.)

Every refusal is an `InputError` naming the file, the line (header = line 1) and the field, and it is
always the FIRST offending line of the file, whatever the column or the kind of check (an unknown id
included: `refuse_unknown_ids`). Labels follow the one id rule of `fsb.tables.csvrows.id_problem`. Large
files are parsed by pyarrow's CSV reader (imported when needed), small ones by Python's: a large regular file
whose first lines hold text labels is read block by block (`fsb.tables.streamcells`: memory follows the
judgments, not the file), other large files whole (copied into memory handed back once parsed). Labels are
coded once (`fsb.tables.labelcodes`: ids up to 8 bytes as integer keys, longer ones by their words, best and
worst by comparison with their row's items) with no Python object per row.
"""

from __future__ import annotations

import csv
import mmap
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fsb.core.readers import InputError, read_input_bytes, read_utf8
from fsb.tables.csvrows import (
    FAST_READER_BYTES,
    INT32_MAX,
    INT64_MAX,
    INVALID_POLICIES,
    Generations,
    Invalid,
    arrow_call,
    canonical_id,
    check_header,
    first_true,
    has_leading_zero,
    id_problem,
    parse_rows,
    record_lines,
    require_header,
    show_label,
)

__all__ = [
    "IRREGULAR_KINDS",
    "Annotations",
    "check_coverage",
    "describe_irregular",
    "peek_header",
    "read_annotations",
    "refuse_unknown_ids",
]


IRREGULAR_KINDS = ("repeated item", "best = worst")


@dataclass(frozen=True)
class Annotations:
    """Validated best-worst judgments, coded: `labels` are the sorted distinct item labels (int64 when
    every label is an integer id, else strings) and `item_codes` (M, k), `best_codes`, `worst_codes`
    index into them. `items`, `best`, `worst` give the labels themselves. `irregular` counts rows that
    are quality-control rows rather than judgments ({kind: {"rows", "first_line"}}), which `invalid`
    ("count" or "drop") let through; with "drop" they are not among the M rows."""

    path: Path
    labels: np.ndarray
    item_codes: np.ndarray
    best_codes: np.ndarray
    worst_codes: np.ndarray
    annotator: np.ndarray | None
    line_of: Callable[[int], int]
    invalid: str = "refuse"
    irregular: dict[str, dict[str, int]] = field(default_factory=dict)
    dropped: int = 0
    timestamp: np.ndarray | None = None  # the optional Timestamp column (e.g. Label Studio's created_at); "" -> None

    @property
    def items(self) -> np.ndarray:
        return self.labels[self.item_codes]

    @property
    def best(self) -> np.ndarray:
        return self.labels[self.best_codes]

    @property
    def worst(self) -> np.ndarray:
        return self.labels[self.worst_codes]

    @property
    def integer_ids(self) -> bool:
        return self.labels.dtype.kind in "iu"

    @property
    def item_columns(self) -> list[str]:
        return [f"Item{j + 1}" for j in range(self.item_codes.shape[1])]

    def __len__(self) -> int:
        return int(self.best_codes.size)


@dataclass
class _Cells:
    """The label columns of an annotation file, factorised: `cells[j, i]` (column j, row i) indexes `uniques` (stripped
    strings as a list or a numpy unicode array, or int64 values when pyarrow read every label as an integer
    in range). With `rank`, `uniques` come sorted and distinct, and code c stands for uniques[rank[c]] (a
    numpy unicode array is neither sorted nor gathered again)."""

    cells: np.ndarray
    uniques: list[str] | np.ndarray
    annotator: np.ndarray | None
    line_of: Callable[[int], int]
    timestamp: np.ndarray | None = None
    rank: np.ndarray | None = None
    chosen_in_items: bool = False  # every BestItem and WorstItem is known to be one of its row's items


def _lazy_lines(path: Path, text: str | None = None) -> Callable[[int], int]:
    """row -> line, computed on first use only (error messages), by one scan with Python's csv module."""
    cache: list[int] = []

    def line_of(row: int) -> int:
        if not cache:
            cache.extend(record_lines(text if text is not None else read_utf8(path)))
        return cache[row] if row < len(cache) else row + 2

    return line_of


def _header_of(path: Path, data: bytes | mmap.mmap, start: int = 0) -> tuple[list[str], int] | None:
    """The header and the byte offset of the data (from `start`) when the first line is the whole header
    record (quoted names allowed, no newline inside quotes), else None (then Python's reader handles the file)."""
    end = data.find(b"\n", start)
    first = data[start : end if end >= 0 else len(data)]
    if first.count(b'"') % 2 or not first.strip() or b"\r" in first.rstrip(b"\r"):  # a CR inside: CR-only line ends
        return None
    try:
        line = first.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        return None
    names = next(csv.reader([line]))
    return check_header(path, names), (end + 1 - start if end >= 0 else len(data) - start)


def _bom(data: bytes | mmap.mmap) -> int:
    """Bytes of a UTF-8 byte order mark at the start of `data` (3 or 0)."""
    return 3 if data[:3] == b"\xef\xbb\xbf" else 0


def _input_data(path: Path) -> bytes | mmap.mmap:
    """The file's bytes: a large regular file copied into anonymous memory, handed back once parsed (never a
    mapping of the file, which a writer truncating it would turn into a SIGBUS in the parser); anything else
    read whole by `read_input_bytes` (which names every problem). A file changing size while read is refused."""
    size = -1
    try:
        info = path.stat()
        if stat.S_ISREG(info.st_mode) and info.st_size > FAST_READER_BYTES:
            size = info.st_size
            with path.open("rb") as f:
                # private memory (not mmap's shared default) takes huge pages: the copy faults 2 MB at a time, not 4 kB
                private = hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MADV_HUGEPAGE")
                buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) if private else mmap.mmap(-1, size)
                if private:
                    buf.madvise(mmap.MADV_HUGEPAGE)
                got = f.readinto(buf)
                if got == size and not f.read(1):
                    return buf
    except (OSError, ValueError):
        size = -1
    if size >= 0:
        raise InputError(path, "the file changed size while it was read (is something writing it?): run again once it is complete")
    return read_input_bytes(path)


def _fast_cells(
    path: Path, data: bytes | mmap.mmap, fields: list[str], annotator: str | None, high: int, timestamp: str | None = None
) -> _Cells | None:
    """Parse with pyarrow: first every label column as int64 (ids in 0..high, the common case), else as
    stripped strings; None when pyarrow cannot parse the file (then Python's reader finds the exact line)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from fsb.tables.labelcodes import numpy_chunks

    start = _bom(data)
    head = _header_of(path, data, start)
    if head is None:
        return None
    header, offset = head
    require_header(path, header, fields)
    if data[start + offset : start + offset + 3] == b"\xef\xbb\xbf":
        return None  # pyarrow drops a byte order mark at its input's start: here a label's first character
    body = pa.py_buffer(data)[start + offset :]
    extra = [c for c in (annotator, timestamp) if c]
    keep = [*fields, *extra]
    quoted = data.find(b'"', start + offset) >= 0

    def read(kind: pa.DataType) -> pa.Table:
        types = {c: kind for c in fields} | {c: pa.string() for c in extra}
        return pacsv.read_csv(
            pa.BufferReader(body),
            # 4 MB blocks parsed in turn: the parser's buffers are reused block after block, not fresh memory for
            # each 16 MB block and each thread (fewer page faults, less CPU; see the issue 23 report)
            read_options=pacsv.ReadOptions(column_names=header, block_size=1 << 22, use_threads=False),
            parse_options=pacsv.ParseOptions(newlines_in_values=quoted),  # a newline in a value needs quotes
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=keep, strings_can_be_null=False, quoted_strings_can_be_null=False
            ),
        )

    columns = None
    try:
        if has_leading_zero(data, start + offset):  # "007" is not the id 7 (as in the reference tool): read labels as text
            raise pa.ArrowInvalid("a label with a leading zero")
        if any(data.find(c, start + offset) >= 0 for c in (b"x", b"X", b"+", b"-")):
            # pyarrow's integer parser reads "0x4" as 4 and "-0" as 0: such a label is not the id 4 or 0 (the
            # id rule: digits only), so a body holding any of these bytes is read as text, whatever column holds them
            raise pa.ArrowInvalid("a label that may be hexadecimal or signed")
        if not _labels_look_numeric(data[start + offset : start + offset + (1 << 16)], [header.index(c) for c in fields]):
            raise pa.ArrowInvalid("a label that is not digits")  # string ids: the file is not parsed twice
        table = read(pa.int64())
        columns = [table[c] for c in fields]
        in_range = all(int(v.min()) >= 0 and int(v.max()) <= high for c in columns for v in numpy_chunks(c))
        if any(c.null_count for c in columns) or not in_range:
            columns = None
    except pa.ArrowInvalid:
        pass
    if columns is None:
        try:
            table = read(pa.string())
        except pa.ArrowInvalid:
            return None
        trim = _may_hold_spaces(data, start + offset)
        columns = [arrow_call("utf8_trim_whitespace", table[c]) if trim else table[c] for c in fields]
    n = table.num_rows
    if n == 0:
        raise InputError(path, "file holds a header but no rows")
    ann = np.array(table[annotator].to_pylist(), dtype=object) if annotator else None
    stamps = np.array(table[timestamp].to_pylist(), dtype=object) if timestamp else None
    del table
    text = pa.types.is_string(columns[0].type)  # what the coding needs of the bytes, before they are let go
    ascii_only = text and _ascii_only(data, start + offset)
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        data.madvise(mmap.MADV_DONTNEED)  # the parsed copy's pages leave this process (~0.4 GB at 1e6 items)
    from fsb.tables.labelcodes import code_columns

    indices, uniques, rank, unmatched = code_columns(columns, ascii_only, len(fields) - 2)
    return _Cells(indices, uniques, ann, _lazy_lines(path), stamps, rank, chosen_in_items=unmatched == 0)


def _may_hold_spaces(data: bytes | mmap.mmap, pos: int) -> bool:
    """Whether `data[pos:]` holds a byte Unicode whitespace trimming could remove (ASCII whitespace, 0x1c-0x1f,
    a quote: a quoted value may hold a newline, any non-ASCII byte): else trimming copies every label for nothing."""
    if any(data.find(c, pos) >= 0 for c in (b'"', b" ", b"\t", b"\x0b", b"\x0c", b"\r", b"\x1c", b"\x1d", b"\x1e", b"\x1f")):
        return True
    return bool(len(data) > pos and np.frombuffer(data, dtype=np.uint8, offset=pos).max() >= 0x80)


def _ascii_only(data: bytes | mmap.mmap, pos: int) -> bool:
    """Whether `data[pos:]` holds only ASCII bytes."""
    return not (len(data) > pos and np.frombuffer(data, dtype=np.uint8, offset=pos).max() >= 0x80)


def _labels_look_numeric(head: bytes, columns: list[int], rows: int = 50) -> bool:
    """Whether the label fields of the first `rows` complete lines of `head` are all digits (after
    stripping): string ids then skip the integer parse attempt."""
    lines = head.split(b"\n")[:-1][:rows]
    try:
        records = list(csv.reader(line.decode("utf-8") for line in lines))
    except (UnicodeDecodeError, csv.Error):
        return False
    return all(j < len(r) and r[j].strip().isdigit() for r in records for j in columns)


def _slow_cells(path: Path, fields: list[str], annotator: str | None, timestamp: str | None = None) -> _Cells:
    """Parse with Python's csv module (exact lines for every record) and factorise the stripped labels."""
    parsed = parse_rows(path)
    require_header(path, parsed.header, fields)
    if not parsed.rows:
        raise InputError(path, "file holds a header but no rows")
    memo: dict[str, int] = {}
    cells = np.empty((len(fields), len(parsed.rows)), dtype=np.int64)
    for j, name in enumerate(fields):
        idx = parsed.header.index(name)
        cells[j] = [memo.setdefault(r[idx].strip(), len(memo)) for r in parsed.rows]
    ann = np.asarray(parsed.column(annotator), dtype=object) if annotator else None
    stamps = np.asarray(parsed.column(timestamp), dtype=object) if timestamp else None
    lines = parsed.lines
    return _Cells(cells, list(memo), ann, lambda i: lines[i], stamps)


def _label_fields(path: Path, header: list[str]) -> tuple[list[str], str | None, str | None]:
    item_cols = []
    while f"Item{len(item_cols) + 1}" in header:
        item_cols.append(f"Item{len(item_cols) + 1}")
    if len(item_cols) < 2:
        require_header(path, header, ("Item1", "Item2"))
    require_header(path, header, ("BestItem", "WorstItem"))
    annotator = next((c for c in ("Annotator", "annotator") if c in header), None)
    timestamp = next((c for c in ("Timestamp", "timestamp") if c in header), None)
    return [*item_cols, "BestItem", "WorstItem"], annotator, timestamp


def peek_header(path: Path, data: bytes | mmap.mmap) -> list[str]:
    """The stripped column names of a CSV file's header, from its bytes."""
    head = _header_of(path, data, _bom(data))
    if head is not None:
        return head[0]
    return parse_rows(path).header


def read_annotations(
    path: str | Path,
    *,
    integer_ids: bool = False,
    invalid: Invalid = "refuse",
    known_ids: np.ndarray | None = None,
    unknown_why: str = "not a known id",
    annotators: bool = True,
) -> Annotations:
    """Read and validate a best-worst annotation file in the common format.

    Parameters
    ----------
    path : the CSV file: columns Item1..ItemK (K >= 2, every row the same K), BestItem, WorstItem and
        optionally Annotator and Timestamp (kept as written, e.g. Label Studio's ISO 8601 created_at; an
        empty cell is None).
    integer_ids : every label must be an id in 0..2**31-1 (the dataset build).
    invalid : rows where the tuple repeats an item or best = worst are quality-control rows: "refuse"
        stops at the first, "count" counts them as the reference Perl script does, "drop" leaves them out.
    known_ids, unknown_why : when given, a label not in `known_ids` is refused as "unknown id X: WHY",
        competing with every other check for the first line (use this rather than `refuse_unknown_ids`
        after reading, which can only report an unknown id after the other checks).
    annotators : read the optional Annotator and Timestamp columns; False leaves them out (`annotator` and
        `timestamp` are None), as `fsb score` does: they are kept as one Python object per row.

    Returns
    -------
    Annotations
        Labels follow the one id rule (`fsb.core.tables.id_problem`): integer ids when every label is an
        id (ASCII digits, no leading zero), else opaque strings, so "007" and "7" are two items. The
        error always names the first offending line of the file, whatever the column or check.
    """
    if invalid not in INVALID_POLICIES:
        raise ValueError(f"invalid must be one of {INVALID_POLICIES}")
    p = Path(path)
    high = INT32_MAX if integer_ids else INT64_MAX
    got, fields = _streamed(p, annotators)
    if got is None:
        data = _input_data(p)
        header = peek_header(p, data)
        fields, annotator, timestamp = _label_fields(p, header)  # a header's own problems are named first
        _refuse_nul(p, data, header)
        if not annotators:
            annotator = timestamp = None
        got = _fast_cells(p, data, fields, annotator, high, timestamp) if len(data) > FAST_READER_BYTES else None
        del data
    if got is None:
        got = _slow_cells(p, fields, annotator, timestamp)
    known = None if known_ids is None else (np.asarray(known_ids), unknown_why)
    return _validate(p, got, fields, integer_ids, high, invalid, known)


def _streamed(path: Path, annotators: bool) -> tuple[_Cells | None, list[str]]:
    """(cells, label fields) of a regular file over FAST_READER_BYTES whose first lines hold a non-digit label, read
    block by block (`fsb.tables.streamcells`); (None, []) for other files and when the stream hands the file back."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size <= FAST_READER_BYTES:
            return None, []
        with path.open("rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return None, []  # the whole-file path names the problem
    start = _bom(head)
    found = _header_of(path, head, start) if head.find(b"\n", start) >= 0 else None
    if found is None:
        return None, []
    header, offset = found
    fields, annotator, timestamp = _label_fields(path, header)  # a header's own problems are named first
    if head.find(b"\0", 0, start + offset) >= 0:
        _refuse_nul(path, head, header)
    if _labels_look_numeric(head[start + offset :], [header.index(c) for c in fields]):
        return None, []  # integer ids: the whole-file path parses them as integers
    from fsb.tables.streamcells import stream_cells

    try:
        got = stream_cells(path, header, start + offset, fields, annotator if annotators else None, timestamp if annotators else None)
    except OSError:
        return None, []
    if got is None:
        return None, []
    cells = _Cells(got.cells, got.uniques, got.annotator, _lazy_lines(path), got.timestamp, got.rank, got.unmatched == 0)
    return cells, fields


def _refuse_nul(path: Path, data: bytes | mmap.mmap, header: list[str]) -> None:
    """Refuse a NUL byte anywhere in the file, naming its line and field: text ends at a NUL for numpy's and C's
    strings, so "a\\0" would silently become the item "a" (the reference Perl script keeps them apart)."""
    pos = data.find(b"\0")
    if pos < 0:
        return
    before = bytes(data[:pos])  # an anonymous mapping has no count(); this copy happens on the refusal only
    line, column = before.count(b"\n") + 1, before[before.rfind(b"\n") + 1 :].count(b",")
    name = header[column] if column < len(header) else f"column {column + 1}"
    raise InputError(path, "a NUL byte (\\0) in the file: labels are text without NUL bytes", line=line, field=name)


def _label_values(uniques: list[str] | np.ndarray, integer_ids: bool, high: int) -> tuple[np.ndarray, Callable[[int], str], np.ndarray]:
    """Per distinct label: whether it breaks the id rule, the problem of label i, and the values (int64 ids, or the strings)."""
    if isinstance(uniques, np.ndarray) and uniques.dtype.kind in "iu":  # pyarrow read every label as an id in range
        return np.zeros(uniques.size, dtype=bool), str, uniques.astype(np.int64)
    if isinstance(uniques, np.ndarray):  # packed short strings: vectorised, unless they are all ids after all
        if not integer_ids and not _all_canonical(uniques):
            return np.char.str_len(uniques) == 0, lambda i: "empty value", uniques
        uniques = uniques.tolist()
    if integer_ids or all(canonical_id(u) for u in uniques if u):
        problems = [id_problem(u, high) for u in uniques]
        values = np.array([int(u) if q is None else -1 for u, q in zip(uniques, problems)], dtype=np.int64)
        return np.array([q is not None for q in problems], dtype=bool), problems.__getitem__, values
    return np.array([not u for u in uniques], dtype=bool), lambda i: "empty value", np.array(uniques, dtype=str)


def _all_canonical(labels: np.ndarray) -> bool:
    """`canonical_id` of every non-empty label of a numpy unicode array, vectorised."""
    if labels.size == 0 or any(label and not canonical_id(label) for label in labels[:8].tolist()):
        return labels.size == 0  # one of the first labels is no id: no pass over all of them (1e6 hashes)
    length = np.char.str_len(labels)
    if int(labels.view(np.uint32).max(initial=0)) >= 0x80:
        return False
    ok = np.char.isdigit(labels) & ((length == 1) | ~np.char.startswith(labels, "0"))
    return bool((ok | (length == 0)).all())


def _row_problems(
    items, best, worst, labels, fields, invalid, known, chosen_in_items=False
) -> tuple[list[tuple[float, ...]], dict, np.ndarray]:
    """The first row of each kind of problem as (row, priority within the row, field, message) candidates,
    the irregular rows let through ({kind: {"rows", "first_line" (a row here)}}), and their mask.
    `chosen_in_items`: the reader found every best and worst among its row's items (not checked again)."""
    k = items.shape[1]
    candidates: list[tuple] = []
    if known is not None:
        is_known = np.isin(labels, known[0])
        if not is_known.all():
            # every label column: the items, then best and worst (a label only there is unknown too)
            columns = np.column_stack([items, best, worst])
            names = fields  # Item1..ItemK, BestItem, WorstItem
            cell_bad = ~is_known[columns]
            row = first_true(cell_bad.any(axis=1))
            if row is not None:
                col = int(np.flatnonzero(cell_bad[row])[0])
                candidates.append((row, 0.5, names[col], f"unknown id {show_label(labels[columns[row, col]])}: {known[1]}"))
    repeat = np.zeros(best.size, dtype=bool)
    for a in range(1, k):
        for b in range(a):
            repeat |= items[:, a] == items[:, b]
    same = best == worst
    irregular: dict[str, dict[str, int]] = {}
    for kind, mask in zip(IRREGULAR_KINDS, (repeat, same)):
        row = first_true(mask)
        if row is None:
            continue
        if invalid != "refuse":
            irregular[kind] = {"rows": int(np.count_nonzero(mask)), "first_line": row}
        elif kind == "repeated item":
            j = next(j for j in range(1, k) if (items[row, j] == items[row, :j]).any())
            message = f"the tuple repeats item {show_label(labels[items[row, j]])}"
            candidates.append((row, 1, fields[j], message + _IRREGULAR_HINT))
        else:
            candidates.append((row, 2, "WorstItem", f"best and worst are the same item {show_label(labels[best[row]])}" + _IRREGULAR_HINT))
    for priority, (name, chosen) in enumerate(() if chosen_in_items else (("BestItem", best), ("WorstItem", worst)), start=3):
        row = first_true(~(items == chosen[:, None]).any(axis=1))
        if row is not None:
            shown = ", ".join(show_label(v) for v in labels[items[row]])
            candidates.append((row, priority, name, f"{show_label(labels[chosen[row]])} is not one of the tuple's items ({shown})"))
    return candidates, irregular, repeat | same


def _validate(path: Path, got: _Cells, fields: list[str], integer_ids: bool, high: int, invalid: str, known=None) -> Annotations:
    """Label checks per distinct label, row checks vectorised over codes; the first bad row in file order wins."""
    k = len(fields) - 2
    cells = got.cells
    bad_label, problem, values = _label_values(got.uniques, integer_ids, high)  # per unique (code c's: got.rank[c])
    position = (lambda c: c) if got.rank is None else got.rank.__getitem__
    candidates: list[tuple] = []
    if bad_label.any():
        cell_bad = bad_label[position(cells)]
        row = first_true(cell_bad.any(axis=0))
        col = int(np.flatnonzero(cell_bad[:, row])[0])
        candidates.append((row, 0, fields[col], str(problem(int(position(cells[col, row]))))))
    if got.rank is not None and values.dtype.kind == "U":  # sorted by the reader, and distinct
        labels, code_of_unique = values, got.rank
    else:
        labels, code_of_unique = np.unique(values, return_inverse=True)
        code_of_unique = code_of_unique.reshape(-1) if got.rank is None else code_of_unique.reshape(-1)[got.rank]
    code_of_unique = code_of_unique.reshape(-1).astype(np.int32 if labels.size < 2**31 else np.int64)
    items = np.empty((cells.shape[1], k), dtype=code_of_unique.dtype)
    for j in range(k):
        items[:, j] = code_of_unique[cells[j]]
    best, worst = code_of_unique[cells[k]], code_of_unique[cells[k + 1]]
    del cells
    more, irregular, odd = _row_problems(items, best, worst, labels, fields, invalid, known, got.chosen_in_items)
    candidates += more
    if candidates:
        row, _, name, message = min(candidates)
        raise InputError(path, message, line=got.line_of(row), field=name)
    for info in irregular.values():
        info["first_line"] = got.line_of(info["first_line"])
    stamps = (
        None
        if got.timestamp is None
        else np.array([t.strip() or None if isinstance(t, str) else None for t in got.timestamp], dtype=object)
    )
    ann = Annotations(path, labels, items, best, worst, got.annotator, got.line_of, invalid, irregular, 0, stamps)
    return _dropped(ann, ~odd) if invalid == "drop" and irregular else ann


def _dropped(ann: Annotations, keep: np.ndarray) -> Annotations:
    """`ann` without the rows not in `keep` (and without labels seen only in them)."""
    kept = np.flatnonzero(keep)
    if kept.size == 0:
        raise InputError(ann.path, "every row is irregular (a repeated item or best = worst); nothing is left to score")
    labels, items, best, worst = ann.labels, ann.item_codes[keep], ann.best_codes[keep], ann.worst_codes[keep]
    used = np.zeros(labels.size, dtype=bool)
    for codes in (items.ravel(), best, worst):
        used[codes] = True
    if not used.all():  # labels seen only in dropped rows are gone with them
        remap = (np.cumsum(used) - 1).astype(items.dtype)
        labels, items, best, worst = labels[used], remap[items], remap[best], remap[worst]
    line_of = ann.line_of
    return Annotations(
        ann.path,
        labels,
        items,
        best,
        worst,
        ann.annotator[keep] if ann.annotator is not None else None,
        lambda i: line_of(int(kept[i])),
        ann.invalid,
        ann.irregular,
        int(keep.size - kept.size),
        ann.timestamp[keep] if ann.timestamp is not None else None,
    )


_IRREGULAR_HINT = " (a quality-control row? --invalid count scores it as the reference Perl script does, --invalid drop leaves it out)"


def refuse_unknown_ids(annotations: Annotations, uids: np.ndarray, why: str) -> None:
    """Refuse (InputError at the first such cell in file order) judgments naming an id not in `uids`;
    `why` ends the message, e.g. "no such uid in FSB_text.csv"."""
    known = np.isin(annotations.labels, uids)
    if known.all():
        return
    cell_bad = ~known[annotations.item_codes]
    row = first_true(cell_bad.any(axis=1))
    col = int(np.flatnonzero(cell_bad[row])[0])
    raise InputError(
        annotations.path,
        f"unknown id {show_label(annotations.labels[annotations.item_codes[row, col]])}: {why}",
        line=annotations.line_of(row),
        field=annotations.item_columns[col],
    )


def check_coverage(generations: Generations, annotations: Annotations) -> None:
    """Every annotated id must be a known uid, and every uid must be covered by some annotation."""
    uids = generations.frame["uid"].to_numpy()
    if not annotations.integer_ids:
        raise InputError(annotations.path, "the dataset needs integer ids", line=1)
    refuse_unknown_ids(annotations, uids, f"no such uid in {generations.path}")
    covered = np.isin(uids, annotations.labels)
    bad = first_true(~covered)
    if bad is not None:
        raise InputError(
            generations.path,
            f"no annotation in {annotations.path} covers the sentence with uid {uids[bad]}",
            line=generations.line_of(bad),
            field="uid",
        )


def describe_irregular(ann: Annotations) -> str | None:
    """One line on the irregular rows let through by `invalid="count"` or `"drop"`, by kind with the first line of each."""
    if not ann.irregular:
        return None
    total = ann.dropped if ann.invalid == "drop" else None
    kinds = ", ".join(f"{v['rows']} with {kind} (first on line {v['first_line']})" for kind, v in ann.irregular.items())
    if total is not None:
        return f"{ann.path}: dropped {total} irregular rows: {kinds}"
    return f"{ann.path}: counted irregular rows as the reference Perl script does: {kinds}"
