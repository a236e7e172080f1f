"""CSV records with exact line numbers, the one id rule and the generations reader: the pieces every reader of
`fsb.tables` shares. Generations are FSB_text.csv or a `fsb generate`
JSONL file.

Every refusal is an `InputError` naming the file, the line (header = line 1) and the field, and it is
always the FIRST offending line of the file, whatever the column or the kind of check. Ids follow one
rule, `id_problem` (ASCII digits, no leading zero); opaque labels one more, `text_problem` (no invisible
or bidi control character). A refusal of a header names the columns fsb expected, never the file's own
line. Only numpy is imported at module level: `fsb score` on a small file stays fast.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from fsb.core.readers import InputError, iter_jsonl, quoted, read_utf8
from fsb.core.readers import short as _short

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "GENERATION_COLUMNS",
    "INT32_MAX",
    "INT64_MAX",
    "INVALID_POLICIES",
    "LEADING_ZERO",
    "Generations",
    "Table",
    "canonical_id",
    "csv_records",
    "id_problem",
    "lazy_lines",
    "read_csv_table",
    "read_generations",
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


def csv_records(text: str) -> list[tuple[int, list[str]]]:
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


def lazy_lines(path: Path, text: str | None = None) -> Callable[[int], int]:
    """data row -> its start line, computed on first use only (error messages), by one scan with Python's csv module."""
    cache: list[int] = []

    def line_of(row: int) -> int:
        if not cache:
            cache.extend(line for line, _ in csv_records(text if text is not None else read_utf8(path))[1:])
        return cache[row] if row < len(cache) else row + 2

    return line_of


def check_header(path: Path, header: list[str]) -> list[str]:
    """Column names stripped; a repeated name is refused (never silently renamed)."""
    names = [str(c).strip() for c in header]
    seen: dict[str, int] = {}
    for j, name in enumerate(names):
        if name in seen:
            raise InputError(path, f"column name repeated (columns {seen[name] + 1} and {j + 1})", line=1, field=name)
        seen[name] = j
    return names


@dataclass
class Rows:
    """A parsed CSV file: stripped, unique column names and the data records with their start lines."""

    path: Path
    header: list[str]
    lines: list[int]
    rows: list[list[str]]
    header_line: int = 1

    def column(self, name: str) -> list[str]:
        j = self.header.index(name)
        return [r[j] for r in self.rows]


def parse_rows(path: Path, text: str | None = None) -> Rows:
    """Every record of a CSV file; a row of the wrong width is refused with "N fields where the header has M",
    a quote never closed (Python's reader would take the rest of the file as one value) by its line and field."""
    if text is None:
        text = read_utf8(path)
    records = csv_records(text)
    if not records:
        raise InputError(path, "file is empty")
    unclosed = _unclosed_quote(text, *records[-1])
    header_line, header = records[0]
    names = check_header(path, header) if unclosed is None or len(records) > 1 else header
    width = len(names)
    for n, (line, row) in enumerate(records):
        if n == len(records) - 1 and unclosed is not None:
            at, j = unclosed
            field = names[j] if n and j < width else f"column {j + 1}"
            message = "a quote opened in this field is never closed (the rest of the file would be one value)"
            raise InputError(path, message, line=at, field=field)
        if n and len(row) != width:
            raise InputError(path, f"{len(row)} fields where the header has {width}", line=line)
    return Rows(path, names, [line for line, _ in records[1:]], [row for _, row in records[1:]], header_line)


def _unclosed_quote(text: str, start: int, row: list[str]) -> tuple[int, int] | None:
    """(line, field index) where the last record's unclosed quote opens, or None: only a last record with a line
    break inside a field can hold one (the reader ran to the end of the file inside it), told by a strict re-read."""
    if not any("\n" in f or "\r" in f for f in row):
        return None
    tail = "".join(io.StringIO(text, newline="").readlines()[start - 1 :])
    try:
        for _ in csv.reader(io.StringIO(tail, newline=""), strict=True):
            pass
    except csv.Error as e:
        if "unexpected end of data" not in str(e):
            return None
        breaks = sum(f.count("\n") + f.count("\r") - f.count("\r\n") for f in row[:-1])
        return start + breaks, len(row) - 1
    return None


def require_header(path: Path, header: Sequence[str], columns: Sequence[str], expected: str | None = None, after: str = "") -> None:
    """Refuse a header without one of `columns`, naming what fsb expected (`expected`, else `columns`), never the
    header itself: a file given by mistake (a system file, say) is not echoed."""
    for c in columns:
        if c not in header:
            raise InputError(path, f"missing column (expected {expected or ', '.join(columns)}){after}", line=1, field=c)


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

    parsed = parse_rows(Path(path))
    frame = pd.DataFrame(parsed.rows, columns=parsed.header, dtype=object) if parsed.rows else pd.DataFrame(columns=parsed.header)
    lines = parsed.lines
    return Table(Path(path), frame.astype(str) if len(frame) else frame, lambda i: lines[i] if i < len(lines) else i + 2)


def _read_jsonl(path: Path, columns: Sequence[str]) -> Rows:
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
    return Rows(path, list(columns), lines, rows)


def require_columns(table: Table, columns: Sequence[str]) -> None:
    """Refuse a table without one of `columns`, naming the header it has."""
    require_header(table.path, list(table.frame.columns), columns)


def show_label(value: object) -> str:
    """A label as users wrote it: 7 for numbers, 'x' (quoted) for strings, shortened (`_io.quoted`)."""
    if isinstance(value, np.generic):
        value = value.item()
    return quoted(value) if isinstance(value, str) else _short(str(value))


# A field starting with 0 and another digit, at the start of a line or after a comma (quoted or not): the rule
# `has_leading_zero` decides, and the reference its numpy fast path is checked against.
LEADING_ZERO = re.compile(rb'(?:^|,)[ \t]*"?[ \t]*0[0-9]', re.M)


def has_leading_zero(data: bytes, pos: int = 0, *, block: int = 1 << 16) -> bool:
    """Whether a field of `data[pos:]` (pos: the start of a record) starts with 0 and another digit
    (the `LEADING_ZERO` rule).

    When the data holds no quote, space or tab (the common all-numeric body), numpy looks for "0" + digit
    right after a comma or a newline, `block` bytes at a time so the masks stay in cache (~0.01 s for
    37 MB, where the regex takes 0.5 s); otherwise the regex decides."""
    if any(data.find(c, pos) >= 0 for c in (b'"', b" ", b"\t")):
        return LEADING_ZERO.search(data, pos) is not None
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


def text_problem(text: str) -> str | None:
    """Why an opaque label is refused, or None: it holds an invisible or bidi control character (a zero-width
    space U+200B, a right-to-left override U+202E: Unicode categories Cc, Cf, Zl, Zp beyond ASCII), so that
    two ids that print the same would be two items. Readers also NFC-normalise labels ("e" + U+0301 is "\u00e9")."""
    if text.isascii() or text.isprintable():  # isprintable: no character of these categories (C-fast)
        return None
    import unicodedata

    for c in text:
        if not c.isascii() and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp"):
            name = unicodedata.name(c, "a control character")
            return f"id {quoted(text)} holds U+{ord(c):04X} ({name}), an invisible or bidi control character: ids must print as they are"
    return None


def canonical_id(text: str) -> bool:
    """Whether a (stripped) label is an id under the one id rule (`id_problem`), bounds aside: ASCII digits
    with no leading zero ("0" itself is fine)."""
    return text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))


def id_problem(text: str, high: int) -> str | None:
    """The one id rule, used by every reader of ids (generations, annotations, item lists, designs, tuple
    ids of forms and Label Studio exports; predictions should call it too): why a stripped field is not an
    id in 0..high, or None.

    An id is written in ASCII digits with no leading zero ("0" itself is fine), so that each id has one
    spelling: "01", "0001" and "1" would be one item to int() and three to a string comparison, and the
    files fsb joins (generations, judgments, designs, predictions) would disagree about which. Readers
    whose labels may be opaque (judgments, item lists, designs) therefore keep a file's labels as strings
    when any label is not an id ("007" and "7" are two items); readers that need integers (uids of the
    dataset) refuse the first such line with this reason. Never calls int() on an arbitrarily long string
    (Python refuses more than 4300 digits); no sign, no spaces inside, no "1_000"."""
    if not text:
        return "empty value"
    if not (text.isascii() and text.isdigit()):
        return f"not an integer id: {quoted(text)}"
    digits = text.lstrip("0") or "0"
    if digits != text:
        return f"id {quoted(_short(text))} has a leading zero: write it {_short(digits)}, so that each id has one spelling"
    if len(digits) > len(str(high)) or int(digits) > high:
        return f"id {_short(text)} is outside 0..{high}"
    return None


def first_true(mask: np.ndarray) -> int | None:
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
    parsed = _read_jsonl(p, GENERATION_COLUMNS) if p.suffix in (".jsonl", ".ndjson") else parse_rows(p)
    _refuse_plain_item_list(p, parsed.header)
    require_header(p, parsed.header, GENERATION_COLUMNS)
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
