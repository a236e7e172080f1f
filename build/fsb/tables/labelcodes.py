"""The coding of judgment labels: the judgments reader's fast path, with no Python object per row.

Hashing the 6 label columns of 1e6 items' judgments (36e6 cells) as strings cost 3x the integer ids. So
a label's UTF-8 bytes are read as 8-byte words (`label_words`: exact without NUL bytes; the words read
big-endian sort as Python sorts the strings, `words_order`): labels of <= 8 bytes are hashed as their one
word, and BestItem/WorstItem are coded by comparison with their row's items (`encode_cells`), so only the
K item columns are hashed. Longer labels are hashed as strings by pyarrow (whole file) or keyed by their
words (`word_keys`, the block stream); either way the distinct labels become a sorted numpy unicode array
(`sorted_labels`). Used by both large-file paths of `fsb.tables.judgments`; pyarrow is imported inside the
functions, so importing this module costs numpy only; so do its numpy <-> pyarrow helpers (no pandas, no
`pyarrow.compute`), which `fsb.bws.scoring` uses too.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from fsb.tables.csvrows import INT32_MAX

__all__ = [
    "KEY_BYTES",
    "arrow_call",
    "arrow_to_numpy",
    "cast_options",
    "code_columns",
    "encode_cells",
    "label_offsets",
    "label_words",
    "numpy_chunks",
    "numpy_to_arrow",
    "ranks",
    "sorted_labels",
    "strings_to_arrow",
    "widest",
    "word_keys",
    "words_order",
    "words_to_labels",
]

KEY_BYTES = 8  # labels up to this many UTF-8 bytes are packed into one uint64
_MASKS = np.array([(1 << (8 * b)) - 1 for b in range(KEY_BYTES)] + [2**64 - 1], dtype=np.uint64)  # the low b bytes
_GOLDEN = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: odd multipliers folding a long label's words into one key


def encode_cells(keys: list[list[Any]], k: int) -> tuple[np.ndarray, Any, int]:
    """Code the label columns Item1..ItemK, BestItem, WorstItem into one dictionary.

    The K item columns are hashed by pyarrow's dictionary_encode; BestItem and WorstItem take the code of
    the item of their row they equal (K vectorised comparisons), and only values equal to none of the row's
    items are hashed as well. Same codes as hashing all K + 2 columns, two thirds of the hashing cost.
    Works chunk by chunk (the CSV reader's blocks, the same in every column): no copy of a whole column.

    Parameters
    ----------
    keys : per column (K + 2, in column order) its chunks: 1-D numpy arrays (integer ids, or packed
        strings) or pyarrow string Arrays (longer labels); chunk c has the same length in every column.
    k : the number of item columns.

    Returns
    -------
    cells : (K + 2, n) int32 codes, `cells[j, i]` the code of column j in row i.
    dictionary : the distinct keys, `dictionary[code]` (first-appearance order): a numpy array, or a
        pyarrow string Array for string chunks.
    unmatched : how many BestItem or WorstItem cells equal none of their row's items (0: the reader need
        not check that best and worst are among the items)."""
    import pyarrow as pa

    arrow = not isinstance(keys[0][0], np.ndarray)
    sizes = [len(chunk) for chunk in keys[0]]
    bounds = np.cumsum([0, *sizes])
    matched, missing = [], []  # per chosen column and chunk: which item it equals, and the rows equal to none
    for column in keys[k:]:
        which_c, missing_c = [], []
        for c, chosen in enumerate(column):
            which = np.full(len(chosen), -1, dtype=np.int16)
            for j in range(k):
                which[_equal(chosen, keys[j][c]) if arrow else chosen == keys[j][c]] = j
            which_c.append(which)
            missing_c.append(np.flatnonzero(which < 0))
        matched.append(which_c)
        missing.append(missing_c)
    if arrow:
        pieces = [chunk for column in keys[:k] for chunk in column]
        for column, rows_c in zip(keys[k:], missing):
            pieces += [arrow_call("take", chunk, numpy_to_arrow(rows.astype(np.int64))) for chunk, rows in zip(column, rows_c)]
    else:
        narrow = _narrow_type(keys)  # ids in 0..2**31-1 hash as int32: a third less CPU than int64
        pieces = [numpy_to_arrow(chunk.astype(narrow, copy=False)) for column in keys[:k] for chunk in column]
        for column, rows_c in zip(keys[k:], missing):
            pieces += [numpy_to_arrow(chunk[rows].astype(narrow, copy=False)) for chunk, rows in zip(column, rows_c)]
    encoded = arrow_call("dictionary_encode", pa.chunked_array(pieces, type=pieces[0].type))
    n, extra = int(bounds[-1]), sum(rows.size for rows_c in missing for rows in rows_c)
    flat = np.empty((k + 2) * n + extra, dtype=np.int32)  # the cells, then the codes of the unmatched chosen values
    pos = 0
    for chunk in encoded.chunks:  # the kernel's own chunking: written in sequence, the items' codes first
        codes = arrow_to_numpy(chunk.indices)
        head = max(0, min(codes.size, k * n - pos))
        flat[pos : pos + head] = codes[:head]
        flat[2 * n + pos + head : 2 * n + pos + codes.size] = codes[head:]
        pos += codes.size
    cells = flat[: (k + 2) * n].reshape(k + 2, n)
    unmatched = iter(np.split(flat[(k + 2) * n :], np.cumsum([rows.size for rows_c in missing for rows in rows_c])[:-1]))
    for j, (which_c, missing_c) in enumerate(zip(matched, missing), start=k):
        for c, (which, rows) in enumerate(zip(which_c, missing_c)):
            block = cells[:k, bounds[c] : bounds[c + 1]]
            out = np.take_along_axis(block, np.maximum(which, 0).astype(np.intp)[None, :], axis=0)[0]
            out[rows] = next(unmatched)
            cells[j, bounds[c] : bounds[c + 1]] = out
    if arrow:
        return cells, encoded.chunks[0].dictionary, extra
    dictionary = arrow_to_numpy(encoded.chunks[0].dictionary)
    return cells, dictionary.astype(keys[0][0].dtype, copy=False), extra


def _equal(a: Any, b: Any) -> np.ndarray:
    """Element-wise a == b of two null-free pyarrow Arrays, as a numpy bool array."""
    result = arrow_call("equal", a, b)
    bits = np.frombuffer(result.buffers()[1], dtype=np.uint8)
    return np.unpackbits(bits, bitorder="little")[result.offset : result.offset + len(result)].astype(bool)


def _narrow_type(keys: list[list[np.ndarray]]) -> np.dtype:
    """int32 when every key is an integer in 0..2**31-1 (one min/max pass per chunk), else the keys' own type."""
    dtype, chunks = keys[0][0].dtype, [chunk for column in keys for chunk in column if chunk.size]
    fits = dtype.kind == "i" and all(int(c.min()) >= 0 and int(c.max()) <= INT32_MAX for c in chunks)
    return np.dtype(np.int32) if fits else dtype


def code_columns(columns: list[Any], ascii_only: bool, k: int) -> tuple[np.ndarray, Any, np.ndarray | None, int]:
    """The whole-file path's label columns coded by `encode_cells`.

    Parameters
    ----------
    columns : per label column (Item1..ItemK, BestItem, WorstItem) a pyarrow ChunkedArray of integers or
        strings, no nulls, no NUL byte in any label (the reader refuses those first); emptied as coded.
    ascii_only : every label is ASCII.
    k : the number of item columns.

    Returns
    -------
    (cells, the distinct labels, their `ranks` when known (then the labels come sorted: code c stands for
    labels[rank[c]]), the count of best/worst cells equal to none of their row's items). Integer ids are
    hashed as integers, labels of up to 8 bytes as their one word (`label_words`: exact), longer ones as
    strings; no Python str per row or per label."""
    import pyarrow as pa

    if pa.types.is_integer(columns[0].type):
        keys: list = [numpy_chunks(c) for c in columns]
    else:
        keys = [[chunk for chunk in c.chunks if len(chunk)] for c in columns]
        if max(widest(chunk) for c in keys for chunk in c) <= KEY_BYTES:  # short labels as their uint64 word
            keys = [[label_words(chunk, 1)[:, 0] for chunk in c] for c in keys]
    del columns[:]  # the caller's list too: each column is freed once coded
    indices, dictionary, unmatched = encode_cells(keys, k)
    del keys
    if isinstance(dictionary, np.ndarray) and dictionary.dtype.kind != "u":  # integer ids
        return indices, dictionary, None, unmatched
    words = dictionary[:, None] if isinstance(dictionary, np.ndarray) else label_words(dictionary, max(1, -(-widest(dictionary) // 8)))
    uniques, rank = sorted_labels(words, ascii_only)
    return indices, uniques, rank, unmatched


def sorted_labels(words: np.ndarray, ascii_only: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The labels of distinct `label_words` rows sorted (a numpy unicode array) and each row's place among them."""
    order = words_order(words)
    return words_to_labels(np.take(words, order, axis=0), ascii_only), ranks(order)


def label_offsets(chunk: Any) -> np.ndarray:
    """The n + 1 offsets of a pyarrow string Array's labels into its data buffer (a numpy view)."""
    return np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1, offset=chunk.offset * 4)


def widest(chunk: Any) -> int:
    """The longest label of a pyarrow string Array, in bytes."""
    return int(np.diff(label_offsets(chunk)).max(initial=0))


def ranks(order: np.ndarray) -> np.ndarray:
    """The inverse of the permutation `order`: rank[order[i]] = i (where each element lands once sorted)."""
    rank = np.empty(order.size, dtype=np.int32 if order.size < 2**31 else np.int64)
    rank[order] = np.arange(order.size, dtype=rank.dtype)
    return rank


def numpy_chunks(column: Any) -> list[np.ndarray]:
    """The chunks of a null-free numeric pyarrow ChunkedArray as numpy views (empty chunks left out)."""
    return [arrow_to_numpy(chunk) for chunk in column.chunks if len(chunk)]


# --- labels over 8 bytes: words, keys that stand for them, and back ---------------------------------------


def label_words(chunk: Any, m: int) -> np.ndarray:
    """The UTF-8 bytes of each label of a null-free pyarrow string Array as `m` little-endian uint64 words,
    zero-padded (labels hold no NUL byte, so the words determine the label: equal words = equal labels).

    Labels of one width (hashes, UUIDs) are read through strided views of the bytes; others by gathering
    the 8 bytes at each label's start (+ 8 j) and masking the bytes past its end. No Python object per label.

    Parameters
    ----------
    chunk : pyarrow.Array of type string (32-bit offsets), no nulls, no label longer than 8 * m bytes.
    m : words per label (>= 1).

    Returns
    -------
    numpy.ndarray
        (len(chunk), m) uint64, row i the words of label i."""
    n = len(chunk)
    offsets = label_offsets(chunk)
    lengths = np.diff(offsets)
    first, last = int(offsets[0]), int(offsets[-1])
    data = chunk.buffers()[2]
    width = int(lengths[0]) if n else 0
    one_width = n and width == 8 * m and last - first == n * width and int(lengths.min()) == width
    if one_width and data is not None and sys.byteorder == "little":
        # one width, a multiple of 8 (40-character hashes): the words are the bytes themselves, no copy
        return np.ndarray((n, m), dtype=np.uint64, buffer=data, offset=first, strides=(width, 8))
    body = np.zeros(last - first + 8 * m + 8, dtype=np.uint8)  # padded: every 8-byte read stays inside
    if data is not None and last > first:
        body[: last - first] = np.frombuffer(data, dtype=np.uint8, count=last - first, offset=first)
    words = np.zeros((n, m), dtype=np.uint64)
    fixed = n > 0 and int(lengths.min()) == width == int(lengths.max())
    window = None if fixed else np.ndarray((body.size - 7,), dtype="<u8", buffer=body, strides=(1,))
    for j in range(m):
        if fixed and width > 8 * j:
            view = np.ndarray((n,), dtype="<u8", buffer=body, offset=8 * j, strides=(width,))
            np.bitwise_and(view, _MASKS[min(width - 8 * j, 8)], out=words[:, j])
        elif not fixed:
            keep = _MASKS[np.clip(lengths - 8 * j, 0, 8)]
            np.bitwise_and(window[offsets[:-1] - first + 8 * j], keep, out=words[:, j])
    return words


def word_keys(words: np.ndarray) -> np.ndarray:
    """One uint64 key per label from its `label_words` row: a label of <= 8 bytes keys as its one word (the
    one-word key, exact), a longer one as its words multiplied by odd constants and XORed together.
    Equal labels give equal keys; distinct long labels may share a key (chance ~2**-64 a pair), so the
    caller checks each key's labels word by word (`fsb.tables.streamcells`) and falls back to hashing the
    strings when two differ.

    Parameters
    ----------
    words : (n, m) uint64 from `label_words`.

    Returns
    -------
    numpy.ndarray
        n uint64 keys."""
    if words.shape[1] == 1:
        return words[:, 0].copy()
    key = words[:, 0] * np.uint64(_GOLDEN)
    for j in range(1, words.shape[1]):  # a zero word (past the label's end) adds nothing: the key is the same for any m
        key ^= words[:, j] * np.uint64((_GOLDEN * (2 * j + 1) | 1) % 2**64)
    long = words[:, 1] != 0  # a label of more than 8 bytes has a non-zero second word (no NUL bytes)
    return np.where(long, key, words[:, 0])


def words_to_labels(words: np.ndarray, ascii_only: bool | None = None) -> np.ndarray:
    """The labels of (n, m) `label_words` rows as a numpy unicode array: ASCII bytes (`ascii_only`, found out
    when None) widened to code points in one vectorised cast (numpy's bytes-to-str cast decodes string by
    string: 4x slower), others decoded from UTF-8."""
    m = words.shape[1]
    raw = np.ascontiguousarray(words, dtype="<u8").view(np.uint8).reshape(-1)
    if ascii_only if ascii_only is not None else int(raw.max(initial=0)) < 0x80:  # the zero padding becomes the unicode array's own padding
        return raw.astype(np.uint32).view(f"<U{8 * m}").reshape(-1) if sys.byteorder == "little" else raw.view(f"S{8 * m}").astype(str)
    return np.char.decode(raw.view(f"S{8 * m}"), "utf-8")


def words_order(words: np.ndarray) -> np.ndarray:
    """The permutation that sorts `label_words` rows as their labels sort (UTF-8 byte order = code point
    order; the zero padding puts a prefix first): the words read big-endian, sorted by the first word, and
    the rows sharing a first word sorted again by all their words."""
    big = np.ascontiguousarray(words, dtype="<u8").byteswap().view(np.uint64) if sys.byteorder == "little" else words
    order = np.argsort(big[:, 0], kind="stable")
    if words.shape[1] == 1:
        return order
    first = big[order, 0]
    tied = np.flatnonzero(first[1:] == first[:-1])
    if tied.size:  # runs of one first word: contiguous in `order`, sorted among themselves in place
        at = np.union1d(tied, tied + 1)
        rows = order[at]
        order[at] = rows[np.lexsort([big[rows, j] for j in reversed(range(words.shape[1]))])]
    return order


# --- numpy <-> pyarrow without pandas --------------------------------------------------------------------


def arrow_to_numpy(array: Any) -> np.ndarray:
    """A null-free primitive pyarrow Array as a numpy view of its buffer (Array.to_numpy imports pandas: 0.6 s)."""
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def arrow_call(function: str, *args: Any, options: Any = None) -> Any:
    """A pyarrow compute function by name (`pyarrow.compute.call_function`), without importing the
    `pyarrow.compute` module: that module builds a Python wrapper and docstring for every kernel at
    import (0.06 s of CPU, an eighth of `fsb score` on 1e5 items); the kernels themselves live in
    `pyarrow._compute`, which `pyarrow` loads anyway."""
    try:
        from pyarrow._compute import call_function
    except ImportError:  # a pyarrow that moved it: the public name
        from pyarrow.compute import call_function
    return call_function(function, list(args), options)


def cast_options(target: Any, *, safe: bool = True) -> Any:
    """`pyarrow.compute.CastOptions` for `arrow_call("cast", ...)` (see `arrow_call` for why not `pyarrow.compute`)."""
    try:
        from pyarrow._compute import CastOptions
    except ImportError:
        from pyarrow.compute import CastOptions
    return CastOptions.safe(target) if safe else CastOptions.unsafe(target)


def strings_to_arrow(values: np.ndarray) -> Any:
    """A 1-D numpy unicode array as a pyarrow string Array, with no Python str per element (pa.array
    converts element by element: 0.2 s for 1e5 labels). ASCII labels are copied as bytes (each code point
    below 0x80 is its own byte: a numeric cast of the UCS-4 code units, where numpy's str-to-bytes cast
    goes label by label, 10 ms for 1e5 labels); others are encoded to UTF-8 by numpy first. numpy unicode
    arrays hold no trailing NUL, so lengths are exact."""
    import pyarrow as pa

    raw = _ascii_bytes(values) if _ascii(values) else np.char.encode(values, "utf-8")
    width = raw.dtype.itemsize
    matrix = np.ascontiguousarray(raw).view(np.uint8).reshape(values.size, width)
    full = values.size and width and matrix[:, width - 1].all()  # every label fills the width (ids, hashes): bytes as they are
    lengths = np.full(values.size, width, dtype=np.int32) if full else np.char.str_len(raw).astype(np.int32)
    offsets = np.concatenate([np.zeros(1, dtype=np.int32), np.cumsum(lengths, dtype=np.int32)])
    body = matrix if full else matrix[np.arange(width) < lengths[:, None]]
    return pa.Array.from_buffers(pa.string(), values.size, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(body))])


def _ascii_bytes(values: np.ndarray) -> np.ndarray:
    """A 1-D unicode array of ASCII strings as the bytes array `values.astype("S<width>")` would give."""
    width = values.dtype.itemsize // 4
    if width == 0:  # "<U0": nothing to copy
        return values.astype("S1")
    units = np.ascontiguousarray(values).view(np.uint32).reshape(values.size, width)
    return units.astype(np.uint8).view(f"S{width}").reshape(values.size)


def _ascii(values: np.ndarray) -> bool:
    return values.size == 0 or int(np.ascontiguousarray(values).view(np.uint32).max(initial=0)) < 0x80


def numpy_to_arrow(values: np.ndarray) -> Any:
    """A 1-D numeric numpy array as a pyarrow Array over the same memory (pa.array imports pandas)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), values.size, [None, pa.py_buffer(values)])
