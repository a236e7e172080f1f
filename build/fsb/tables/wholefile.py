"""The judgments reader's whole-file paths: pyarrow's CSV reader over the file's bytes at once (`arrow_cells`:
labels first parsed as int64 ids, else as stripped strings, coded by `fsb.tables.labelcodes`), and Python's csv
module (`python_cells`: exact lines for every record, the path of small files and of any file the others hand
back). Both give the `fsb.tables.rules.Cells` every path gives; `fsb.tables.judgments` picks the path.
"""

from __future__ import annotations

import mmap
import stat
from pathlib import Path
from typing import Any

import numpy as np

from fsb.core.readers import InputError, read_input_bytes
from fsb.tables.csvrows import has_leading_zero, lazy_lines, parse_rows, require_header
from fsb.tables.rules import LAYOUT, Cells, bom, header_of, looks_numeric

__all__ = ["arrow_cells", "csv_options", "input_data", "python_cells"]


def input_data(path: Path, large: int) -> bytes | mmap.mmap:
    """The file's bytes: a regular file over `large` bytes copied into anonymous memory, handed back once parsed (never a
    mapping of the file, which a writer truncating it would turn into a SIGBUS in the parser); anything else
    read whole by `read_input_bytes` (which names every problem). A file changing size while read is refused."""
    size = -1
    try:
        info = path.stat()
        if stat.S_ISREG(info.st_mode) and info.st_size > large:
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


def arrow_cells(
    path: Path, data: bytes | mmap.mmap, fields: list[str], annotator: str | None, high: int, timestamp: str | None = None
) -> Cells | None:
    """Parse with pyarrow: first every label column as int64 (ids in 0..high, the common case), else as
    stripped strings; None when pyarrow cannot parse the file (then Python's reader finds the exact line)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from fsb.tables.labelcodes import arrow_call, numpy_chunks

    start = bom(data)
    head = header_of(path, data, start)
    if head is None:
        return None
    header, offset = head
    require_header(path, header, fields, LAYOUT)
    if data[start + offset : start + offset + 3] == b"\xef\xbb\xbf":
        return None  # pyarrow drops a byte order mark at its input's start: here a label's first character
    body = pa.py_buffer(data)[start + offset :]
    extra = [c for c in (annotator, timestamp) if c]
    quoted = data.find(b'"', start + offset) >= 0

    def read(kind: pa.DataType) -> pa.Table:
        # 4 MB blocks parsed in turn: the parser's buffers are reused block after block, not fresh memory for each
        # 16 MB block and each thread (fewer page faults, less CPU; see the issue 23 report); a newline in a value needs quotes
        return pacsv.read_csv(pa.BufferReader(body), *csv_options(header, fields, extra, kind, 1 << 22, newlines=quoted))

    columns, non_ascii = None, False
    try:
        if has_leading_zero(data, start + offset):  # "007" is not the id 7 (as in the reference tool): read labels as text
            raise pa.ArrowInvalid("a label with a leading zero")
        if any(data.find(c, start + offset) >= 0 for c in (b"x", b"X", b"+", b"-")):
            # pyarrow's integer parser reads "0x4" as 4 and "-0" as 0: such a label is not the id 4 or 0 (the
            # id rule: digits only), so a body holding any of these bytes is read as text, whatever column holds them
            raise pa.ArrowInvalid("a label that may be hexadecimal or signed")
        if not looks_numeric(data[start + offset : start + offset + (1 << 16)], [header.index(c) for c in fields]):
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
        non_ascii = _non_ascii(data, start + offset)
        # a label Unicode whitespace trimming could change holds one of these bytes, a non-ASCII one, or is quoted
        trim = non_ascii or any(data.find(c, start + offset) >= 0 for c in _TRIMMED)
        columns = [arrow_call("utf8_trim_whitespace", table[c]) if trim else table[c] for c in fields]
    n = table.num_rows
    if n == 0:
        raise InputError(path, "file holds a header but no rows")
    ann = np.array(table[annotator].to_pylist(), dtype=object) if annotator else None
    stamps = np.array(table[timestamp].to_pylist(), dtype=object) if timestamp else None
    del table
    text = pa.types.is_string(columns[0].type)  # what the coding needs of the bytes, before they are let go
    ascii_only = text and not non_ascii
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        data.madvise(mmap.MADV_DONTNEED)  # the parsed copy's pages leave this process (~0.4 GB at 1e6 items)
    from fsb.tables.labelcodes import code_columns

    indices, uniques, rank, unmatched = code_columns(columns, ascii_only, len(fields) - 2)
    return Cells(indices, uniques, ann, lazy_lines(path), stamps, rank, unmatched == 0, ascii_only if text else None)


def _non_ascii(data: bytes | mmap.mmap, pos: int) -> bool:
    """Whether `data[pos:]` holds a byte >= 0x80 (one numpy pass)."""
    return bool(len(data) > pos and np.frombuffer(data, dtype=np.uint8, offset=pos).max() >= 0x80)


_TRIMMED = (b'"', b" ", b"\t", b"\x0b", b"\x0c", b"\r", b"\x1c", b"\x1d", b"\x1e", b"\x1f")  # ASCII bytes a trim may remove, and a quote


def csv_options(header: list[str], fields: list[str], extra: list[str], kind: Any, block_size: int, newlines: bool) -> tuple[Any, Any, Any]:
    """pyarrow CSV read, parse and convert options: the label `fields` as `kind`, the `extra` columns as strings,
    nothing null, blocks parsed one after another in this thread."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    types = {c: kind for c in fields} | {c: pa.string() for c in extra}
    return (
        pacsv.ReadOptions(column_names=header, block_size=block_size, use_threads=False),
        pacsv.ParseOptions(newlines_in_values=newlines),
        pacsv.ConvertOptions(
            column_types=types, include_columns=[*fields, *extra], strings_can_be_null=False, quoted_strings_can_be_null=False
        ),
    )


def python_cells(path: Path, fields: list[str], annotator: str | None, timestamp: str | None = None) -> Cells:
    """Parse with Python's csv module (exact lines for every record) and factorise the stripped labels."""
    parsed = parse_rows(path)
    require_header(path, parsed.header, fields, LAYOUT)
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
    return Cells(cells, list(memo), ann, lambda i: lines[i], stamps)
