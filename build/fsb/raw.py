"""Raw files -> validated tables: the generations (FSB_text.csv or a `fsb generate` JSONL file) and the
individual best-worst annotations (`Item1..ItemK,BestItem,WorstItem[,Annotator]`).

Every refusal is an `InputError` naming the file, the line (header = line 1) and the field.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import fifty_shades_of_bias as spec

from ._io import InputError, iter_jsonl, read_utf8

__all__ = [
    "Annotations",
    "Generations",
    "check_coverage",
    "read_annotations",
    "read_generations",
]

GENERATION_COLUMNS = ("uid", "prompt_type", "seed_type", "query", "response")
_INT = re.compile(r"^\s*[+-]?\d+\s*$")
_INT32_MAX = 2**31 - 1


def _records(text: str) -> list[tuple[int, list[str]]]:
    """(start line, fields) of every CSV record, the header first, honouring quoted newlines and skipping
    lines that are empty or hold only spaces and tabs (as pandas does)."""
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


@dataclass
class _Table:
    path: Path
    frame: pd.DataFrame
    line_of: Callable[[int], int]

    def fail(self, row: int, field: str | None, message: str) -> InputError:
        return InputError(self.path, message, line=self.line_of(row), field=field)


def _read_csv(path: Path) -> _Table:
    text = read_utf8(path)
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_filter=False)
    except pd.errors.ParserError as e:
        records = _records(text)
        width = len(records[0][1]) if records else 0
        for line, row in records[1:]:
            if len(row) != width:
                raise InputError(path, f"{len(row)} fields where the header has {width}", line=line) from None
        raise InputError(path, f"not a well-formed CSV file: {e}") from None
    except pd.errors.EmptyDataError:
        raise InputError(path, "file is empty") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    cache: list[int] = []

    def line_of(row: int) -> int:
        if not cache:
            cache.extend(_record_lines(text))
        return cache[row] if row < len(cache) else row + 2

    return _Table(path, frame, line_of)


def _read_jsonl(path: Path, columns: Sequence[str]) -> _Table:
    rows, lines = [], []
    for n, rec in iter_jsonl(path):
        rows.append({c: rec.get(c) for c in columns})
        lines.append(n)
    if not rows:
        raise InputError(path, "file holds no records")
    frame = pd.DataFrame(rows, columns=list(columns))
    for c in columns:
        if frame[c].isna().all():
            raise InputError(path, "missing field in every record", line=lines[0], field=c)
    frame = frame.astype(object).where(frame.notna(), "").astype(str)
    return _Table(path, frame, lambda i: lines[i])


def _require_columns(table: _Table, columns: Sequence[str]) -> None:
    have = list(table.frame.columns)
    for c in columns:
        if c not in have:
            raise InputError(table.path, f"missing column (the header has: {', '.join(have)})", line=1, field=c)


def _show(value: object) -> str:
    """A label as users wrote it: 7 for numbers, 'x' (quoted) for strings."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value) if isinstance(value, str) else str(value)


def _first(mask: np.ndarray | pd.Series) -> int | None:
    hits = np.flatnonzero(np.asarray(mask))
    return int(hits[0]) if hits.size else None


def _check_not_blank(table: _Table, columns: Sequence[str]) -> None:
    for c in columns:
        bad = _first(table.frame[c].str.strip() == "")
        if bad is not None:
            raise table.fail(bad, c, "empty value")


def _check_int_ids(table: _Table, columns: Sequence[str]) -> None:
    for c in columns:
        col = table.frame[c]
        bad = _first(~col.str.match(_INT))
        if bad is not None:
            raise table.fail(bad, c, f"not an integer id: {col.iloc[bad]!r}")
        values = col.astype(np.int64)
        bad = _first((values < 0) | (values > _INT32_MAX))
        if bad is not None:
            raise table.fail(bad, c, f"id {values.iloc[bad]} is outside 0..{_INT32_MAX}")


@dataclass(frozen=True)
class Generations:
    """Validated generations, one row per sentence: uid (int), prompt_type, seed_type, query, response."""

    path: Path
    frame: pd.DataFrame
    line_of: Callable[[int], int]


def read_generations(path: str | Path) -> Generations:
    """Read and validate generations from the release's CSV or from `fsb generate` JSONL output."""
    p = Path(path)
    table = _read_jsonl(p, GENERATION_COLUMNS) if p.suffix in (".jsonl", ".ndjson") else _read_csv(p)
    _require_columns(table, GENERATION_COLUMNS)
    frame = table.frame
    if frame.empty:
        raise InputError(p, "file holds a header but no rows")
    _check_not_blank(table, ("uid", "query", "response"))
    _check_int_ids(table, ("uid",))
    for field, allowed in (("seed_type", spec.SEED_TYPES), ("prompt_type", spec.PROMPT_TYPES)):
        values = frame[field].str.strip()
        bad = _first(~values.isin(allowed))
        if bad is not None:
            raise table.fail(bad, field, f"unknown {field} {frame[field].iloc[bad]!r}; expected one of {', '.join(allowed)}")
    uid = frame["uid"].astype(np.int64)
    dup = _first(uid.duplicated())
    if dup is not None:
        first = int(np.flatnonzero(uid.to_numpy() == uid.iloc[dup])[0])
        raise table.fail(dup, "uid", f"duplicate uid {uid.iloc[dup]} (first seen on line {table.line_of(first)})")
    out = pd.DataFrame(
        {
            "uid": uid.to_numpy(),
            "prompt_type": frame["prompt_type"].str.strip().to_numpy(),
            "seed_type": frame["seed_type"].str.strip().to_numpy(),
            "query": frame["query"].to_numpy(),
            "response": frame["response"].to_numpy(),
        }
    )
    return Generations(p, out, table.line_of)


@dataclass(frozen=True)
class Annotations:
    """Validated best-worst judgments: items (M, k), best, worst (labels, int when `integer_ids`),
    annotator (or None), and the file line of each judgment for later error messages."""

    path: Path
    items: np.ndarray
    best: np.ndarray
    worst: np.ndarray
    annotator: np.ndarray | None
    line_of: Callable[[int], int]

    @property
    def item_columns(self) -> list[str]:
        return [f"Item{j + 1}" for j in range(self.items.shape[1])]

    def __len__(self) -> int:
        return int(self.best.size)


def read_annotations(path: str | Path, *, integer_ids: bool = False) -> Annotations:
    """Read and validate a best-worst annotation file in the common format.

    Columns Item1..ItemK (K >= 2, every row the same K), BestItem, WorstItem and optionally Annotator.
    Labels are opaque strings unless `integer_ids` (the dataset build needs integer uids).
    """
    p = Path(path)
    table = _read_csv(p)
    frame = table.frame
    item_cols = []
    while f"Item{len(item_cols) + 1}" in frame.columns:
        item_cols.append(f"Item{len(item_cols) + 1}")
    if len(item_cols) < 2:
        _require_columns(table, ("Item1", "Item2"))
    _require_columns(table, ("BestItem", "WorstItem"))
    if frame.empty:
        raise InputError(p, "file holds a header but no rows")
    fields = [*item_cols, "BestItem", "WorstItem"]
    _check_not_blank(table, fields)
    if integer_ids:
        _check_int_ids(table, fields)
        values = {c: frame[c].astype(np.int64).to_numpy() for c in fields}
    else:
        values = {c: frame[c].str.strip().to_numpy() for c in fields}
    items = np.column_stack([values[c] for c in item_cols])
    best, worst = values["BestItem"], values["WorstItem"]
    k = len(item_cols)
    for j in range(1, k):
        repeat = (items[:, j : j + 1] == items[:, :j]).any(axis=1)
        bad = _first(repeat)
        if bad is not None:
            raise table.fail(bad, item_cols[j], f"the tuple repeats item {_show(items[bad, j])}")
    bad = _first(best == worst)
    if bad is not None:
        raise table.fail(bad, "WorstItem", f"best and worst are the same item {_show(best[bad])}")
    for field, chosen in (("BestItem", best), ("WorstItem", worst)):
        bad = _first(~(items == chosen[:, None]).any(axis=1))
        if bad is not None:
            raise table.fail(
                bad, field, f"{_show(chosen[bad])} is not one of the tuple's items ({', '.join(_show(v) for v in items[bad])})"
            )
    annotator = None
    for name in ("Annotator", "annotator"):
        if name in frame.columns:
            annotator = frame[name].to_numpy()
            break
    return Annotations(p, items, best, worst, annotator, table.line_of)


def check_coverage(generations: Generations, annotations: Annotations) -> None:
    """Every annotated id must be a known uid, and every uid must be covered by some annotation."""
    uids = generations.frame["uid"].to_numpy()
    known = np.isin(annotations.items, uids)
    if not known.all():
        row, col = (int(v[0]) for v in np.nonzero(~known))
        raise InputError(
            annotations.path,
            f"unknown id {_show(annotations.items[row, col])}: no such uid in {generations.path}",
            line=annotations.line_of(row),
            field=annotations.item_columns[col],
        )
    covered = np.isin(uids, annotations.items)
    bad = _first(~covered)
    if bad is not None:
        raise InputError(
            generations.path,
            f"no annotation in {annotations.path} covers the sentence with uid {uids[bad]}",
            line=generations.line_of(bad),
            field="uid",
        )
