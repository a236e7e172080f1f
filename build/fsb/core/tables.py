"""Raw files -> validated tables: the generations (FSB_text.csv or a `fsb generate` JSONL file) and the
individual best-worst annotations (`Item1..ItemK,BestItem,WorstItem[,Annotator]`).

Every refusal is an `InputError` naming the file, the line (header = line 1) and the field, and it is
always the FIRST offending line of the file, whatever the column or the kind of check. Ids are ASCII
digits only. Only numpy is imported at module level: `fsb score` on a small file stays fast; large
annotation files are parsed by pyarrow's CSV reader (imported when needed), small ones by Python's.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from fsb.core.files import InputError, iter_jsonl, quoted, read_input_bytes, read_utf8
from fsb.core.files import short as _short

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "GENERATION_COLUMNS",
    "INT32_MAX",
    "INT64_MAX",
    "INVALID_POLICIES",
    "Annotations",
    "Generations",
    "Table",
    "canonical_id",
    "check_coverage",
    "id_problem",
    "read_annotations",
    "read_csv_table",
    "read_generations",
    "refuse_unknown_ids",
    "require_columns",
]

GENERATION_COLUMNS = ("uid", "prompt_type", "seed_type", "query", "response")
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INVALID_POLICIES = ("refuse", "count", "drop")
Invalid = Literal["refuse", "count", "drop"]
# Files above this size go through pyarrow's multi-threaded CSV reader; below it, Python's csv module
# answers before pyarrow would have finished importing.
FAST_READER_BYTES = 1 << 20


# --- records: Python's csv module, exact line numbers ----------------------------------------------------


def _records(text: str) -> list[tuple[int, list[str]]]:
    """(start line, fields) of every CSV record, the header first, honouring quoted newlines and skipping
    lines that are empty or hold only spaces and tabs (as pandas does). Fields of any size are read."""
    csv.field_size_limit(sys.maxsize)
    reader = csv.reader(io.StringIO(text, newline=""))
    out, prev = [], 0
    for row in reader:
        start, prev = prev + 1, reader.line_num
        if not row or (len(row) == 1 and not row[0].strip(" \t")):
            continue
        out.append((start, row))
    return out


def _record_lines(text: str) -> list[int]:
    """Start line (1-based) of every data record (after the header)."""
    return [line for line, _ in _records(text)[1:]]


def _check_header(path: Path, header: list[str]) -> list[str]:
    """Column names stripped; a repeated name is refused (never silently renamed)."""
    names = [str(c).strip() for c in header]
    seen: dict[str, int] = {}
    for j, name in enumerate(names):
        if name in seen:
            raise InputError(path, f"column name repeated (columns {seen[name] + 1} and {j + 1})", line=1, field=name)
        seen[name] = j
    return names


@dataclass
class _Rows:
    """A parsed CSV file: stripped, unique column names and the data records with their start lines."""

    path: Path
    header: list[str]
    lines: list[int]
    rows: list[list[str]]
    header_line: int = 1

    def column(self, name: str) -> list[str]:
        j = self.header.index(name)
        return [r[j] for r in self.rows]


def _parse(path: Path, text: str | None = None) -> _Rows:
    """Every record of a CSV file; a row of the wrong width is refused with "N fields where the header has M"."""
    if text is None:
        text = read_utf8(path)
    records = _records(text)
    if not records:
        raise InputError(path, "file is empty")
    header_line, header = records[0]
    names = _check_header(path, header)
    width = len(names)
    for line, row in records[1:]:
        if len(row) != width:
            raise InputError(path, f"{len(row)} fields where the header has {width}", line=line)
    return _Rows(path, names, [line for line, _ in records[1:]], [row for _, row in records[1:]], header_line)


def _require(path: Path, header: Sequence[str], columns: Sequence[str]) -> None:
    for c in columns:
        if c not in header:
            shown = ", ".join(_column_name(h) for h in header[:20]) + (f", ... ({len(header)} columns)" if len(header) > 20 else "")
            raise InputError(path, f"missing column (the header has: {shown})", line=1, field=c)


# --- the public table layer: any CSV a command reads (designs, answers, scores) -------------------------


@dataclass
class Table:
    """A CSV file as a DataFrame of strings (`read_csv_table`), with the file line of each row."""

    path: Path
    frame: pd.DataFrame
    line_of: Callable[[int], int]

    def fail(self, row: int, field: str | None, message: str) -> InputError:
        """The error for data row `row` (0-based) and `field`, naming the file line."""
        return InputError(self.path, message, line=self.line_of(row), field=field)


def read_csv_table(path: str | Path) -> Table:
    """A CSV file as a DataFrame of strings, with the line of each row for error messages."""
    import pandas as pd

    parsed = _parse(Path(path))
    frame = pd.DataFrame(parsed.rows, columns=parsed.header, dtype=object) if parsed.rows else pd.DataFrame(columns=parsed.header)
    lines = parsed.lines
    return Table(Path(path), frame.astype(str) if len(frame) else frame, lambda i: lines[i] if i < len(lines) else i + 2)


def _read_jsonl(path: Path, columns: Sequence[str]) -> _Rows:
    rows, lines = [], []
    for n, rec in iter_jsonl(path):
        rows.append(["" if rec.get(c) is None else str(rec.get(c)) for c in columns])
        lines.append(n)
        for c in columns:
            if rec.get(c) is not None and not isinstance(rec.get(c), str | int):
                raise InputError(path, f"expected a string or an integer, got {type(rec.get(c)).__name__}", line=n, field=c)
    if not rows:
        raise InputError(path, "file holds no records")
    for j, c in enumerate(columns):
        if all(r[j] == "" for r in rows):
            raise InputError(path, "missing field in every record", line=lines[0], field=c)
    return _Rows(path, list(columns), lines, rows)


def require_columns(table: Table, columns: Sequence[str]) -> None:
    """Refuse a table without one of `columns`, naming the header it has."""
    _require(table.path, list(table.frame.columns), columns)


def _show(value: object) -> str:
    """A label as users wrote it: 7 for numbers, 'x' (quoted) for strings, shortened (`_io.quoted`)."""
    if isinstance(value, np.generic):
        value = value.item()
    return quoted(value) if isinstance(value, str) else _short(str(value))


def _column_name(name: str) -> str:
    """A column name as echoed in a message: as written when it is printable and short, else `_io.quoted`."""
    return name if name.isprintable() and name.strip() == name and len(name) <= 40 else quoted(name)


# A field starting with 0 and another digit, at the start of a line or after a comma (quoted or not).
_LEADING_ZERO = re.compile(rb'(?:^|,)[ \t]*"?[ \t]*0[0-9]', re.M)


def has_leading_zero(data: bytes, pos: int = 0, *, block: int = 1 << 16) -> bool:
    """Whether a field of `data[pos:]` (pos: the start of a record) starts with 0 and another digit
    (the `_LEADING_ZERO` rule).

    When the data holds no quote, space or tab (the common all-numeric body), numpy looks for "0" + digit
    right after a comma or a newline, `block` bytes at a time so the masks stay in cache (~0.01 s for
    37 MB, where the regex takes 0.5 s); otherwise the regex decides."""
    if any(data.find(c, pos) >= 0 for c in (b'"', b" ", b"\t")):
        return _LEADING_ZERO.search(data, pos) is not None
    body = np.frombuffer(data, dtype=np.uint8, offset=pos)
    if body.size >= 2 and body[0] == ord("0") and ord("0") <= body[1] <= ord("9"):
        return True
    for first in range(0, max(body.size - 2, 0), block):
        chunk = body[first : first + block + 2]
        before, here = chunk[:-2], chunk[1:-1]
        start = here == ord("0")
        start &= (before == ord(",")) | (before == ord("\n"))
        if start.any():
            after = chunk[np.flatnonzero(start) + 2]
            if ((after >= ord("0")) & (after <= ord("9"))).any():
                return True
    return False


def canonical_id(text: str) -> bool:
    """All ASCII digits with no leading zero ("0" itself is fine): labels that read back as the same integer.
    Labels like "007" keep the whole file's labels opaque, so "007" and "7" stay two items."""
    return text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))


def id_problem(text: str, high: int) -> str | None:
    """Why a stripped field is not an id in 0..high (ASCII digits only), or None. Never calls int() on
    an arbitrarily long string (Python refuses more than 4300 digits)."""
    if not text:
        return "empty value"
    if not (text.isascii() and text.isdigit()):
        return f"not an integer id: {quoted(text)}"
    digits = text.lstrip("0")
    if len(digits) > len(str(high)) or int(digits or "0") > high:
        return f"id {_short(text)} is outside 0..{high}"
    return None


def _first(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(np.asarray(mask))
    return int(hits[0]) if hits.size else None


# --- generations ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Generations:
    """Validated generations, one row per sentence: uid (int), prompt_type, seed_type, query, response."""

    path: Path
    frame: pd.DataFrame
    line_of: Callable[[int], int]


def _refuse_plain_item_list(path: Path, header: Sequence[str]) -> None:
    """A plain item list (one id a line, or id[,text]) where generations are needed: say what is needed and
    which commands take such a list, rather than "missing column 'uid'". The dataset's seed_type and
    prompt_type are class labels its card, analyses and lm-eval breakdowns rest on, so they are never
    filled in as "unknown"."""
    names = [h.strip().lower() for h in header]
    plain = (len(names) == 1 and names[0].isdigit()) or (names and names[0] in ("id", "item", "uid") and set(names[1:]) <= {"text"})
    if plain and not set(GENERATION_COLUMNS) <= set(header):
        raise InputError(
            path,
            "is a plain item list (ids, or id,text); fsb build makes the Fifty Shades of Bias dataset and needs its generations "
            f"columns {', '.join(GENERATION_COLUMNS)} (seed_type and prompt_type are class labels of the dataset). "
            "For any other best-worst study use fsb score, fsb reliability, fsb tuples and fsb annotate, which take plain item lists",
            line=1,
        )


def read_generations(path: str | Path) -> Generations:
    """Read and validate generations from the release's CSV or from `fsb generate` JSONL output.

    Checks run row by row in file order, so the error names the first bad line; uids are ASCII-digit
    integers in 0..2**31-1 (the dataset stores int32) and unique."""
    import pandas as pd

    import fifty_shades_of_bias as spec

    p = Path(path)
    parsed = _read_jsonl(p, GENERATION_COLUMNS) if p.suffix in (".jsonl", ".ndjson") else _parse(p)
    _refuse_plain_item_list(p, parsed.header)
    _require(p, parsed.header, GENERATION_COLUMNS)
    if not parsed.rows:
        raise InputError(p, "file holds a header but no rows")
    col = {c: parsed.header.index(c) for c in GENERATION_COLUMNS}
    allowed = {"seed_type": set(spec.SEED_TYPES), "prompt_type": set(spec.PROMPT_TYPES)}
    order = sorted(GENERATION_COLUMNS, key=col.__getitem__)  # fields checked left to right
    uids: list[int] = []
    seen: dict[int, int] = {}
    for i, row in enumerate(parsed.rows):
        line = parsed.lines[i]
        for name in order:
            value = row[col[name]].strip()
            if name == "uid":
                problem = id_problem(value, INT32_MAX)
                if problem is None:
                    uid = int(value)
                    if uid in seen:
                        problem = f"duplicate uid {uid} (first seen on line {parsed.lines[seen[uid]]})"
                    else:
                        seen[uid] = i
                        uids.append(uid)
            elif name in allowed:
                problem = None
                if value not in allowed[name]:
                    expected = spec.SEED_TYPES if name == "seed_type" else spec.PROMPT_TYPES
                    problem = f"unknown {name} {quoted(row[col[name]])}; expected one of {', '.join(expected)}"
            else:
                problem = "empty value" if not value else None
            if problem is not None:
                raise InputError(p, problem, line=line, field=name)
    frame = pd.DataFrame(
        {
            "uid": np.asarray(uids, dtype=np.int64),
            "prompt_type": [r[col["prompt_type"]].strip() for r in parsed.rows],
            "seed_type": [r[col["seed_type"]].strip() for r in parsed.rows],
            "query": [r[col["query"]] for r in parsed.rows],
            "response": [r[col["response"]] for r in parsed.rows],
        }
    )
    lines = parsed.lines
    return Generations(p, frame, lambda i: lines[i])


# --- annotations ------------------------------------------------------------------------------------

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
    strings, or int64 values when pyarrow read every label as an integer in range)."""

    cells: np.ndarray
    uniques: list[str] | np.ndarray
    annotator: np.ndarray | None
    line_of: Callable[[int], int]
    timestamp: np.ndarray | None = None


def _lazy_lines(path: Path, text: str | None = None) -> Callable[[int], int]:
    """row -> line, computed on first use only (error messages), by one scan with Python's csv module."""
    cache: list[int] = []

    def line_of(row: int) -> int:
        if not cache:
            cache.extend(_record_lines(text if text is not None else read_utf8(path)))
        return cache[row] if row < len(cache) else row + 2

    return line_of


def _header_of(path: Path, data: bytes) -> tuple[list[str], int] | None:
    """The header and the byte offset of the data when the first line is the whole header record (quoted
    names allowed, no newline inside quotes), else None (then Python's reader handles the file)."""
    end = data.find(b"\n")
    first = data[: end if end >= 0 else len(data)]
    if first.count(b'"') % 2 or not first.strip() or b"\r" in first.rstrip(b"\r"):  # a CR inside: CR-only line ends
        return None
    try:
        line = first.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        return None
    names = next(csv.reader([line]))
    return _check_header(path, names), (end + 1 if end >= 0 else len(data))


def _fast_cells(
    path: Path, data: bytes, fields: list[str], annotator: str | None, high: int, timestamp: str | None = None
) -> _Cells | None:
    """Parse with pyarrow: first every label column as int64 (ids in 0..high, the common case), else as
    stripped strings; None when pyarrow cannot parse the file (then Python's reader finds the exact line)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    head = _header_of(path, data[start:])
    if head is None:
        return None
    header, offset = head
    _require(path, header, fields)
    body = pa.py_buffer(data)[start + offset :]
    extra = [c for c in (annotator, timestamp) if c]
    keep = [*fields, *extra]
    quoted = data.find(b'"', start + offset) >= 0

    def read(kind: pa.DataType) -> pa.Table:
        types = {c: kind for c in fields} | {c: pa.string() for c in extra}
        return pacsv.read_csv(
            pa.BufferReader(body),
            read_options=pacsv.ReadOptions(column_names=header, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(newlines_in_values=quoted),  # a newline in a value needs quotes
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=keep, strings_can_be_null=False, quoted_strings_can_be_null=False
            ),
        )

    columns = None
    try:
        if has_leading_zero(data, start + offset):  # "007" is not the id 7 (as in the reference tool): read labels as text
            raise pa.ArrowInvalid("a label with a leading zero")
        if not _labels_look_numeric(data[start + offset : start + offset + (1 << 16)], [header.index(c) for c in fields]):
            raise pa.ArrowInvalid("a label that is not digits")  # string ids: the file is not parsed twice
        table = read(pa.int64())
        columns = [table[c] for c in fields]
        ranges = [pc.min_max(c) for c in columns]
        if any(c.null_count for c in columns) or any(r["min"].as_py() < 0 or r["max"].as_py() > high for r in ranges):
            columns = None
    except pa.ArrowInvalid:
        pass
    if columns is None:
        try:
            table = read(pa.string())
        except pa.ArrowInvalid:
            return None
        columns = [pc.utf8_trim_whitespace(table[c]) for c in fields]
    n = table.num_rows
    if n == 0:
        raise InputError(path, "file holds a header but no rows")
    chunks = [chunk for c in columns for chunk in c.chunks]
    encoded = pc.dictionary_encode(pa.chunked_array(chunks, type=columns[0].type))
    indices = np.concatenate([arrow_to_numpy(chunk.indices) for chunk in encoded.chunks]).reshape(len(fields), n)
    dictionary = encoded.chunks[0].dictionary
    uniques = arrow_to_numpy(dictionary) if pa.types.is_integer(dictionary.type) else dictionary.to_pylist()
    ann = np.array(table[annotator].to_pylist(), dtype=object) if annotator else None
    stamps = np.array(table[timestamp].to_pylist(), dtype=object) if timestamp else None
    return _Cells(indices, uniques, ann, _lazy_lines(path), stamps)


def _labels_look_numeric(head: bytes, columns: list[int], rows: int = 50) -> bool:
    """Whether the label fields of the first `rows` complete lines of `head` are all digits (after
    stripping): string ids then skip the integer parse attempt."""
    lines = head.split(b"\n")[:-1][:rows]
    try:
        records = list(csv.reader(line.decode("utf-8") for line in lines))
    except (UnicodeDecodeError, csv.Error):
        return False
    return all(j < len(r) and r[j].strip().isdigit() for r in records for j in columns)


def arrow_to_numpy(array: Any) -> np.ndarray:
    """A null-free primitive pyarrow Array as a numpy view of its buffer (Array.to_numpy imports pandas: 0.6 s)."""
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def numpy_to_arrow(values: np.ndarray) -> Any:
    """A 1-D numeric numpy array as a pyarrow Array over the same memory (pa.array imports pandas)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), values.size, [None, pa.py_buffer(values)])


def _slow_cells(path: Path, fields: list[str], annotator: str | None, timestamp: str | None = None) -> _Cells:
    """Parse with Python's csv module (exact lines for every record) and factorise the stripped labels."""
    parsed = _parse(path)
    _require(path, parsed.header, fields)
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
        _require(path, header, ("Item1", "Item2"))
    _require(path, header, ("BestItem", "WorstItem"))
    annotator = next((c for c in ("Annotator", "annotator") if c in header), None)
    timestamp = next((c for c in ("Timestamp", "timestamp") if c in header), None)
    return [*item_cols, "BestItem", "WorstItem"], annotator, timestamp


def _peek_header(path: Path, data: bytes) -> list[str]:
    head = _header_of(path, data[3:] if data.startswith(b"\xef\xbb\xbf") else data)
    if head is not None:
        return head[0]
    return _parse(path).header


def read_annotations(path: str | Path, *, integer_ids: bool = False, invalid: Invalid = "refuse") -> Annotations:
    """Read and validate a best-worst annotation file in the common format.

    Columns Item1..ItemK (K >= 2, every row the same K), BestItem, WorstItem and optionally Annotator
    and Timestamp (kept as written, e.g. Label Studio's ISO 8601 created_at; an empty cell is None).
    Labels are integer ids when every label is ASCII digits (then they must fit in 64 bits), else opaque
    strings; with `integer_ids` (the dataset build) every label must be an id in 0..2**31-1.
    Rows where the tuple repeats an item or best = worst are quality-control rows: `invalid="refuse"`
    stops at the first, "count" counts them as the reference Perl script does, "drop" leaves them out.
    The error always names the first offending line of the file, whatever the column or check.
    """
    if invalid not in INVALID_POLICIES:
        raise ValueError(f"invalid must be one of {INVALID_POLICIES}")
    p = Path(path)
    data = read_input_bytes(p)
    high = INT32_MAX if integer_ids else INT64_MAX
    fields, annotator, timestamp = _label_fields(p, _peek_header(p, data))
    got = _fast_cells(p, data, fields, annotator, high, timestamp) if len(data) > FAST_READER_BYTES else None
    del data
    if got is None:
        got = _slow_cells(p, fields, annotator, timestamp)
    return _validate(p, got, fields, integer_ids, high, invalid)


def _validate(path: Path, got: _Cells, fields: list[str], integer_ids: bool, high: int, invalid: str) -> Annotations:
    """Label checks per distinct label, row checks vectorised over codes; the first bad row in file order wins."""
    k = len(fields) - 2
    cells, uniques = got.cells, got.uniques
    if isinstance(uniques, np.ndarray):  # pyarrow read every label as an id in range
        problems: list[str | None] = [None] * uniques.size
        values = uniques.astype(np.int64)
    else:
        integer = integer_ids or all(canonical_id(u) for u in uniques if u)
        if integer:
            problems = [id_problem(u, high) for u in uniques]
            values = np.array([int(u) if q is None else -1 for u, q in zip(uniques, problems)], dtype=np.int64)
        else:
            problems = [None if u else "empty value" for u in uniques]
            values = np.array(uniques, dtype=str)
    candidates: list[tuple[int, int, str, str]] = []  # (row, priority within the row, field, message)
    bad_label = np.array([q is not None for q in problems], dtype=bool)
    if bad_label.any():
        cell_bad = bad_label[cells]
        row = _first(cell_bad.any(axis=0))
        col = int(np.flatnonzero(cell_bad[:, row])[0])
        candidates.append((row, 0, fields[col], str(problems[int(cells[col, row])])))
    labels, code_of_unique = np.unique(values, return_inverse=True)
    code_of_unique = code_of_unique.reshape(-1).astype(np.int32 if labels.size < 2**31 else np.int64)
    items = np.empty((cells.shape[1], k), dtype=code_of_unique.dtype)
    for j in range(k):
        items[:, j] = code_of_unique[cells[j]]
    best, worst = code_of_unique[cells[k]], code_of_unique[cells[k + 1]]
    del cells
    repeat = np.zeros(best.size, dtype=bool)
    for a in range(1, k):
        for b in range(a):
            repeat |= items[:, a] == items[:, b]
    same = best == worst
    irregular: dict[str, dict[str, int]] = {}
    for kind, mask in zip(IRREGULAR_KINDS, (repeat, same)):
        row = _first(mask)
        if row is None:
            continue
        if invalid == "refuse":
            if kind == "repeated item":
                j = next(j for j in range(1, k) if (items[row, j] == items[row, :j]).any())
                message = f"the tuple repeats item {_show(labels[items[row, j]])}"
                candidates.append((row, 1, fields[j], message + _IRREGULAR_HINT))
            else:
                candidates.append((row, 2, "WorstItem", f"best and worst are the same item {_show(labels[best[row]])}" + _IRREGULAR_HINT))
        else:
            irregular[kind] = {"rows": int(np.count_nonzero(mask)), "first_line": row}
    for priority, (name, chosen) in enumerate((("BestItem", best), ("WorstItem", worst)), start=3):
        row = _first(~(items == chosen[:, None]).any(axis=1))
        if row is not None:
            shown = ", ".join(_show(v) for v in labels[items[row]])
            candidates.append((row, priority, name, f"{_show(labels[chosen[row]])} is not one of the tuple's items ({shown})"))
    if candidates:
        row, _, name, message = min(candidates)
        raise InputError(path, message, line=got.line_of(row), field=name)
    for info in irregular.values():
        info["first_line"] = got.line_of(info["first_line"])
    line_of, annotator, dropped = got.line_of, got.annotator, 0
    stamps = (
        None
        if got.timestamp is None
        else np.array([t.strip() or None if isinstance(t, str) else None for t in got.timestamp], dtype=object)
    )
    if invalid == "drop" and irregular:
        keep = ~(repeat | same)
        kept = np.flatnonzero(keep)
        dropped = int(keep.size - kept.size)
        items, best, worst = items[keep], best[keep], worst[keep]
        annotator = annotator[keep] if annotator is not None else None
        stamps = stamps[keep] if stamps is not None else None
        if kept.size == 0:
            raise InputError(path, "every row is irregular (a repeated item or best = worst); nothing is left to score")
        line_of = lambda i: got.line_of(int(kept[i]))  # noqa: E731
        used = np.zeros(labels.size, dtype=bool)
        for codes in (items.ravel(), best, worst):
            used[codes] = True
        if not used.all():  # labels seen only in dropped rows are gone with them
            remap = (np.cumsum(used) - 1).astype(items.dtype)
            labels, items, best, worst = labels[used], remap[items], remap[best], remap[worst]
    return Annotations(path, labels, items, best, worst, annotator, line_of, invalid, irregular, dropped, stamps)


_IRREGULAR_HINT = " (a quality-control row? --invalid count scores it as the reference Perl script does, --invalid drop leaves it out)"


def refuse_unknown_ids(annotations: Annotations, uids: np.ndarray, why: str) -> None:
    """Refuse (InputError at the first such cell in file order) judgments naming an id not in `uids`;
    `why` ends the message, e.g. "no such uid in FSB_text.csv"."""
    known = np.isin(annotations.labels, uids)
    if known.all():
        return
    cell_bad = ~known[annotations.item_codes]
    row = _first(cell_bad.any(axis=1))
    col = int(np.flatnonzero(cell_bad[row])[0])
    raise InputError(
        annotations.path,
        f"unknown id {_show(annotations.labels[annotations.item_codes[row, col]])}: {why}",
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
    bad = _first(~covered)
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
