"""The judgments reader's streaming path: a large file of string labels parsed and coded block by block, so
memory follows the judgments (4 bytes a cell), not the file (a 40-character id costs 41 bytes a cell).

`stream_cells` reads the body in blocks of `BLOCK_BYTES` (4 MiB) cut at a newline and parses each with
pyarrow's CSV reader. While every label is <= 8 bytes, labels are kept as exact packed uint64 keys and
coded once at the end (as the whole-file path codes them). From the first longer label on, each block's
label columns are coded by one pyarrow dictionary_encode (the strings hashed and compared: exact), and only
the block's distinct labels go on, as their words (`label_words`: a label's UTF-8 bytes read as 8-byte
integers) and one uint64 key each (`word_keys`: the words multiplied by constants and XORed together, so
two labels may share a key). Blocks are merged into one dictionary by key whenever the pending blocks hold
at least as many distinct labels as the dictionary (or 2**20; the cost stays linear), each label checked
word by word against the label its code already stands for: no two distinct labels ever share a code.
All blocks' cells go into one array reserved for the rows the first block suggests.

The whole-file path of `fsb.tables.judgments` is used instead (None) for a file with a quote (a quoted
value may hold a newline, so a block cannot be cut at one), a NUL byte (the whole-file path refuses it,
naming its line and field), a block pyarrow cannot parse (Python's reader names the line), two long
labels sharing a key, or a label so much longer than the others that a block's distinct labels, all as
wide as it, would outweigh their text 4 times over.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from fsb.core.readers import InputError
from fsb.tables.csvrows import lazy_lines
from fsb.tables.labelcodes import (
    arrow_call,
    arrow_to_numpy,
    encode_cells,
    label_offsets,
    label_words,
    numpy_to_arrow,
    sorted_labels,
    widest,
    word_keys,
)
from fsb.tables.rules import Cells
from fsb.tables.wholefile import csv_options

__all__ = ["BLOCK_BYTES", "MERGE_MIN", "rows_expected", "stream_cells"]

BLOCK_BYTES = 1 << 22
MERGE_MIN = 1 << 20  # pending blocks' distinct labels before the first merge
_PART_BITS = 4  # the dictionary's keys in 2**4 parts by their top bits
_PARTS = 1 << _PART_BITS


class _Collision(Exception):
    """Two distinct long labels share a key: the file is read by the whole-file path (strings hashed)."""


class _TooWide(Exception):
    """A label so much longer than the others that the words of a block's distinct labels (all as wide as
    it) would outweigh their text: the file is read by the whole-file path (strings hashed)."""


class _Dictionary:
    """The distinct keys met so far, coded 0.. in the order first met, and the words of the label each code
    stands for (`words`). The keys are kept in `_PARTS` parts by their top bits (a merge hashes each part
    on its own: tables that stay in cache). All blocks' cells go into one array (`store`, columns in file
    order), reserved for the rows expected (`expect`: pages never written are never taken from the system),
    so no copy joins them at the end; a block's columns hold its local codes until merged (`merge`), the
    dictionary's codes after."""

    def __init__(self) -> None:
        self.part_keys = [np.zeros(0, dtype=np.uint64) for _ in range(_PARTS)]
        self.part_codes = [np.zeros(0, dtype=np.int32) for _ in range(_PARTS)]
        self.size = 0
        self.words = np.zeros((0, 1), dtype=np.uint64)
        self.pending: list[tuple[int, int, np.ndarray, np.ndarray]] = []  # (first column, end, keys, words)
        self.waiting = 0
        self.store = np.zeros((0, 0), dtype=np.int32)
        self.rows = 0
        self.expected = 0

    def expect(self, rows: int) -> None:
        """The file's rows, estimated: the store is reserved for them at once (grown by half when exceeded)."""
        self.expected = rows

    def add(self, cells: np.ndarray, keys: np.ndarray, words: np.ndarray) -> None:
        """A block's local codes `cells` ((K + 2, rows) int32), its distinct `keys` and their labels' `words`."""
        start, end = self.rows, self.rows + cells.shape[1]
        if end > self.store.shape[1]:  # rows the estimate missed: a larger store, the rows so far copied over
            grown = np.empty((cells.shape[0], max(self.expected, end + end // 2)), dtype=np.int32)
            if start:
                grown[:, :start] = self.store[:, :start]
            self.store = grown
        self.store[:, start:end] = cells
        self.rows = end
        self.pending.append((start, end, keys, words))
        self.waiting += keys.size
        if self.waiting >= max(self.size, MERGE_MIN):
            self.merge()

    def _codes(self, keys: np.ndarray) -> np.ndarray:
        """The code of each key (new keys get the next codes, in order), part by part."""
        part = (keys >> np.uint64(64 - _PART_BITS)).astype(np.uint8)
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(_PARTS + 1))
        ranked = keys[order]
        found = np.empty(keys.size, dtype=np.int32)
        for p in range(_PARTS):
            sub = ranked[bounds[p] : bounds[p + 1]]
            if not sub.size:
                continue
            have = self.part_keys[p]
            encoded = arrow_call("dictionary_encode", numpy_to_arrow(np.concatenate([have, sub])))
            uniq = arrow_to_numpy(encoded.dictionary).astype(np.uint64, copy=False)
            fresh = np.arange(self.size, self.size + uniq.size - have.size, dtype=np.int32)
            self.size += fresh.size
            self.part_keys[p], self.part_codes[p] = uniq, np.concatenate([self.part_codes[p], fresh])
            found[bounds[p] : bounds[p + 1]] = self.part_codes[p][arrow_to_numpy(encoded.indices)[have.size :]]
        codes = np.empty_like(found)
        codes[order] = found
        return codes

    def merge(self) -> None:
        """Code the pending blocks' keys, check each label's words against its code's, recode their cells."""
        if not self.pending:
            return
        old = self.size
        codes = self._codes(np.concatenate([k for _, _, k, _ in self.pending]))
        m = max(self.words.shape[1], *(w.shape[1] for _, _, _, w in self.pending))
        if self.size > self.words.shape[0] or m > self.words.shape[1]:  # room for twice the codes: no copy each merge
            table = np.zeros((max(2 * self.size, self.words.shape[0]), m), dtype=np.uint64)
            table[:old, : self.words.shape[1]] = self.words[:old]
            self.words = table
        table = self.words
        pos = 0
        for _, _, keys, w in self.pending:
            mine = codes[pos : pos + keys.size]
            fresh = mine >= old  # first seen here: its words become the code's (any of the block's writers)
            table[mine[fresh], : w.shape[1]] = w[fresh]
            pos += keys.size
        pos = 0
        for start, end, keys, w in self.pending:
            mine = codes[pos : pos + keys.size]
            held = np.take(table, mine, axis=0)  # rows copied whole: 3x faster than table[mine]
            if not np.array_equal(held[:, : w.shape[1]], w) or held[:, w.shape[1] :].any():
                raise _Collision
            self.store[:, start:end] = mine[self.store[:, start:end]]
            pos += keys.size
        self.pending, self.waiting = [], 0

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """(cells of all blocks, the labels sorted, code c's place among them, whether every label is ASCII)."""
        self.merge()
        cells = self.store[:, : self.rows]
        words = self.words[: self.size]
        ascii_only = int(words.view(np.uint8).max(initial=0)) < 0x80
        return (cells, *sorted_labels(words, ascii_only), ascii_only)


def _may_trim(edge: np.ndarray) -> bool:
    """Whether a label's first or last byte in `edge` (uint8) may be one Unicode whitespace trimming removes:
    ASCII whitespace and 0x1c-0x1f (all <= 0x20) or a non-ASCII byte (>= 0x80, negative as int8). One
    comparison per byte; the few other bytes <= 0x20 only cost a trim that changes nothing."""
    return edge.size > 0 and int(edge.view(np.int8).min()) <= 0x20


def _trimmed(chunk: Any) -> Any:
    """`chunk` with Unicode whitespace trimmed from every label, or itself when no label starts or ends with
    a byte trimming could remove (trimming then changes nothing, and would copy the column)."""
    n = len(chunk)
    offsets = label_offsets(chunk)
    data = chunk.buffers()[2]
    if data is None or n == 0:
        return chunk
    body = np.frombuffer(data, dtype=np.uint8)
    first, width = int(offsets[0]), int(offsets[1] - offsets[0])
    lengths = np.diff(offsets)
    if width and int(offsets[-1]) - first == n * width and int(lengths.min()) == width:  # one width: strided, no gather
        starts = np.lib.stride_tricks.as_strided(body[first:], shape=(n,), strides=(width,))
        ends = np.lib.stride_tricks.as_strided(body[first + width - 1 :], shape=(n,), strides=(width,))
    else:
        full = lengths > 0
        starts, ends = body[offsets[:-1][full]], body[offsets[1:][full] - 1]
    return arrow_call("utf8_trim_whitespace", chunk) if _may_trim(starts) or _may_trim(ends) else chunk


def _label_columns(table: Any, fields: list[str]) -> list[list[Any]]:
    """A parsed block's label columns: per field its non-empty chunks, whitespace trimmed."""
    return [[_trimmed(chunk) for chunk in table[c].chunks if len(chunk)] for c in fields]


def _code_block(columns: list[list[Any]], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """One block's label columns coded by one dictionary_encode of all K + 2 of them (pyarrow hashes and
    compares the strings: equal labels, equal codes, and only those): (cells (K + 2, rows) int32, the keys
    of the block's distinct labels (`word_keys`) and their words, the BestItem/WorstItem cells equal to none
    of their row's items); `_TooWide` when those words would outweigh the distinct labels' text 4 times."""
    import pyarrow as pa

    encoded = arrow_call("dictionary_encode", pa.chunked_array([c for col in columns for c in col], type=pa.string()))
    cells = np.concatenate([arrow_to_numpy(chunk.indices) for chunk in encoded.chunks]).reshape(k + 2, -1)
    unmatched = sum(int(np.count_nonzero((cells[j] != cells[:k]).all(axis=0))) for j in (k, k + 1))
    labels = encoded.chunks[-1].dictionary  # every chunk holds the final dictionary
    m = max(1, -(-widest(labels) // 8))
    text = int(np.ptp(label_offsets(labels)))  # the bytes of all distinct labels
    if m > 1 and 8 * m * len(labels) > 4 * max(text, 1):  # one very long label: dense words would dwarf the text
        raise _TooWide
    words = np.array(label_words(labels, m))  # a copy: the Arrow buffers go now
    return cells, word_keys(words), words, unmatched


class _Coder:
    """Blocks' label columns to codes: exact packed keys while every label is <= 8 bytes (kept, and coded
    once at the end as the whole-file path codes them), from the first longer label on each block coded by
    its strings (`_code_block`) and merged into the `_Dictionary` by key (the blocks before it become its
    first coded block)."""

    def __init__(self, fields: int) -> None:
        self.k = fields - 2
        self.short: list[list[np.ndarray]] | None = [[] for _ in range(fields)]
        self.dictionary = _Dictionary()
        self.unmatched = 0

    def take(self, columns: list[list[Any]]) -> None:
        """One block's label columns (`_label_columns`); `_Collision` when two of its distinct labels share a key
        with each other or with a label of another block, `_TooWide` when the words of its distinct labels, as
        wide as the longest, would outweigh their text 4 times over."""
        if not columns[0]:
            return
        if self.short is not None and max(widest(c) for col in columns for c in col) <= 8:
            for j, col in enumerate(columns):
                self.short[j] += [label_words(c, 1)[:, 0] for c in col]
            return
        if self.short is not None:
            if self.short[0]:
                cells, keys, missing = encode_cells(self.short, self.k)
                self.dictionary.add(cells, keys, keys[:, None])
                self.unmatched += missing
            self.short = None
        cells, keys, words, missing = _code_block(columns, self.k)
        self.dictionary.add(cells, keys, words)
        self.unmatched += missing

    def expect(self, rows: int) -> None:
        """The file's rows, estimated (`_Dictionary.expect`)."""
        self.dictionary.expect(rows)

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, bool]:
        """(cells, the labels sorted, code c's place among them, unmatched best/worst cells, all ASCII)."""
        if self.short is None:
            cells, labels, rank, ascii_only = self.dictionary.result()
            return cells, labels, rank, self.unmatched, ascii_only
        cells, keys, unmatched = encode_cells(self.short, self.k)
        self.short = None
        ascii_only = int(keys.view(np.uint8).max(initial=0)) < 0x80
        return (cells, *sorted_labels(keys[:, None], ascii_only), unmatched, ascii_only)


def _blocks(f: Any, start: int) -> Any:
    """(offset in the file, memoryview) of whole lines of `f` from `start`, about `BLOCK_BYTES` at a time,
    read into one reused buffer (each view is valid until the next one is asked for)."""
    f.seek(start)
    buf = bytearray(BLOCK_BYTES)
    held, pos = 0, start  # bytes of an unfinished line kept at the buffer's start
    while True:
        if held == len(buf):  # a line longer than the buffer: a buffer twice the size (views of the old one may live on)
            grown = bytearray(2 * len(buf))
            grown[:held] = buf
            buf = grown
        got = f.readinto(memoryview(buf)[held:])
        if not got:
            if held:
                yield pos, memoryview(buf)[:held]
            return
        filled = held + got
        cut = buf.rfind(b"\n", held, filled) + 1
        if cut == 0:
            held = filled
            continue
        yield pos, memoryview(buf)[:cut]
        pos += cut
        carry = bytes(buf[cut:filled])  # a copy: the line's start moves to the buffer's start
        buf[: len(carry)] = carry
        held = len(carry)


def rows_expected(body_bytes: int, block_bytes: int, block_rows: int, fields: int) -> int:
    """The rows a file's body of `body_bytes` is expected to hold, for reserving the cells' array: at the
    first block's bytes a row (`block_rows` rows in `block_bytes`; 5% more, and 1024, for shorter lines
    further on), never more than a body of the shortest rows holds (a 1-byte label and its separator for
    each of `fields` fields)."""
    return min(int(body_bytes * block_rows / block_bytes * 1.05) + 1024, body_bytes // (2 * fields) + 1)


def stream_cells(
    path: Path, header: list[str], body_start: int, fields: list[str], annotator: str | None, timestamp: str | None
) -> Cells | None:
    """Parse and code the label columns of the judgments file `path` block by block (see the module).

    Parameters
    ----------
    path : a regular file; its header (the column names `header`) ends before byte `body_start`.
    fields : Item1..ItemK, BestItem, WorstItem (in this order).
    annotator, timestamp : the optional columns to keep (their values as Python objects), or None.

    Returns
    -------
    Cells (`fsb.tables.rules`), or None
        None when the file is for the whole-file path (a quote or a NUL byte, a block pyarrow cannot
        parse, two long labels sharing a key, a label far longer than the rest). Raises `InputError` when
        the file has no rows or changes size while it is read."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    extra = [c for c in (annotator, timestamp) if c]
    options, coder, rows = csv_options(header, fields, extra, pa.string(), 2 * BLOCK_BYTES, newlines=False), _Coder(len(fields)), 0
    kept: dict[str, list] = {c: [] for c in extra}
    with path.open("rb") as f:
        size, end = os.fstat(f.fileno()).st_size, body_start
        for offset, block in _blocks(f, body_start):
            end = offset + len(block)
            # pyarrow drops a byte order mark at its input's start: a label's first character when a block starts there
            data = pa.py_buffer(b"\n" + bytes(block) if block[:3] == b"\xef\xbb\xbf" else block)
            if block.obj.find(b"\0", 0, len(block)) >= 0 or block.obj.find(b'"', 0, len(block)) >= 0:
                return None  # a NUL: the whole-file path names its line; a quote: a value may hold a newline
            if len(block) >= options[0].block_size:
                options[0].block_size = 2 * len(block)
            try:
                table = pacsv.read_csv(pa.BufferReader(data), *options)
            except pa.ArrowInvalid:
                return None
            if rows == 0 and table.num_rows:
                coder.expect(rows_expected(size - body_start, len(block), table.num_rows, len(fields)))
            rows += table.num_rows
            for c in extra:
                kept[c].extend(table[c].to_pylist())
            try:
                coder.take(_label_columns(table, fields))
            except (_Collision, _TooWide):
                return None
        if end != size or os.fstat(f.fileno()).st_size != size:
            raise InputError(path, "the file changed size while it was read (is something writing it?): run again once it is complete")
    if rows == 0:
        raise InputError(path, "file holds a header but no rows")
    try:
        cells, uniques, rank, unmatched, ascii_only = coder.result()
    except _Collision:
        return None
    column = {c: np.array(v, dtype=object) for c, v in kept.items()}
    annotators, stamps = column.get(annotator or ""), column.get(timestamp or "")
    return Cells(cells, uniques, annotators, lazy_lines(path), stamps, rank, unmatched == 0, ascii_only)
