"""A study's items, from whatever list a researcher has: a plain list (one id a line), a CSV with an id
column and optionally a text column, or this project's generations (release CSV, `fsb generate` JSONL).

Ids are opaque labels; when every one is an id under the one rule of `fsb.tables.csvrows.id_problem` they
are integers (so they sort numerically and a dataset build can use them as uids), else all stay strings,
NFC-normalised, and one holding an invisible or bidi control character is refused (as the judgments reader does).
Every refusal names the file, line and field.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fsb.core.readers import InputError, quoted, read_utf8
from fsb.tables.csvrows import INT64_MAX, csv_records, id_problem, text_problem

__all__ = ["ID_COLUMNS", "TEXT_COLUMNS", "Items", "read_items", "texts_of_files"]

ID_COLUMNS = ("id", "uid", "item", "item_id")
TEXT_COLUMNS = ("text", "response", "sentence")


@dataclass(frozen=True)
class Items:
    """A study's items in file order: ids (int64 when all are integers, else str), texts (or None), and
    the file line of each item for error messages."""

    path: Path
    ids: np.ndarray
    texts: np.ndarray | None
    lines: list[int]

    def text_of(self) -> dict[object, str]:
        """id -> text; refuses a file without texts (annotators need something to read)."""
        if self.texts is None:
            raise InputError(self.path, f"the items have no text column ({', '.join(TEXT_COLUMNS)}); annotators need the texts")
        return dict(zip(self.ids.tolist(), self.texts.tolist()))


def _typed_ids(path: Path, raw: list[str], lines: list[int], field: str) -> np.ndarray:
    for value, line in zip(raw, lines):
        if not value:
            raise InputError(path, "empty id", line=line, field=field)
        if "\n" in value or "\r" in value:  # "bad\ni21\n...": a quote opened here and closed lines later, or never
            raise InputError(path, "an id runs over a line break: a quote opened on this line is not closed on it", line=line, field=field)
    ids: np.ndarray
    if all(id_problem(v, INT64_MAX) is None for v in raw):  # the one id rule: else every id stays a string
        ids = np.array([int(v) for v in raw], dtype=np.int64)
    else:  # opaque labels, as the judgments reader takes them: no invisible or bidi character, NFC
        for value, line in zip(raw, lines):
            if (problem := text_problem(value)) is not None:
                raise InputError(path, problem, line=line, field=field)
        ids = np.array([unicodedata.normalize("NFC", v) for v in raw], dtype=object).astype(str)
    seen: dict[object, int] = {}
    for value, line in zip(ids.tolist(), lines):
        if value in seen:
            raise InputError(
                path,
                f"duplicate id {quoted(value) if isinstance(value, str) else value} (first seen on line {seen[value]})",
                line=line,
                field=field,
            )
        seen[value] = line
    return ids


def _from_generations(path: Path) -> Items:
    from fsb.tables.csvrows import read_generations

    gens = read_generations(path)
    frame = gens.frame
    return Items(path, frame["uid"].to_numpy(np.int64), frame["response"].to_numpy(object), [gens.line_of(i) for i in range(len(frame))])


def read_items(path: str | Path) -> Items:
    """Read a study's items: this project's generations files as `fsb build` reads them; else a CSV whose
    header names an id column (id, uid, item or item_id) and optionally a text column (text, response or
    sentence); else a plain list, one id a line (blank lines skipped)."""
    p = Path(path)
    if p.suffix in (".jsonl", ".ndjson"):
        return _from_generations(p)
    records = [(n, [f.strip() for f in row]) for n, row in csv_records(read_utf8(p)) if any(f.strip() for f in row)]
    if not records:
        raise InputError(p, "file holds no items")
    header = [h.lower() for h in records[0][1]]
    id_col = next((c for c in ID_COLUMNS if c in header), None)
    if id_col is None:
        if any(len(row) > 1 for _, row in records):
            line = next(n for n, row in records if len(row) > 1)
            expected = f"one id a line, or a CSV header with an id column ({', '.join(ID_COLUMNS)})"
            raise InputError(p, f"expected {expected}; this line has several fields", line=line)
        return Items(p, _typed_ids(p, [row[0] for _, row in records], [n for n, _ in records], "id"), None, [n for n, _ in records])
    from fsb.tables.csvrows import GENERATION_COLUMNS

    if all(c in header for c in GENERATION_COLUMNS):
        return _from_generations(p)
    body = records[1:]
    if not body:
        raise InputError(p, "file holds a header but no items")
    width = len(header)
    for n, row in body:
        if len(row) != width:
            if any("\n" in f or "\r" in f for f in row):
                raise InputError(p, "a quote opened on this line is not closed on it (a field runs over a line break)", line=n)
            raise InputError(p, f"{len(row)} fields where the header has {width}", line=n)
    lines = [n for n, _ in body]
    ids = _typed_ids(p, [row[header.index(id_col)] for _, row in body], lines, records[0][1][header.index(id_col)])
    text_col = next((c for c in TEXT_COLUMNS if c in header), None)
    texts = None
    if text_col is not None:
        j = header.index(text_col)
        texts = np.array([row[j] for _, row in body], dtype=object)
        for value, n in zip(texts, lines):
            if not value:
                raise InputError(p, "empty text", line=n, field=records[0][1][j])
    return Items(p, ids, texts, lines)


def texts_of_files(paths: Sequence[str | Path]) -> dict[object, str]:
    """id -> text over several item files joined (e.g. the release's texts and a new round's generations,
    for a design extended with `fsb tuples --extend`). An id in two files is refused with one line naming
    both files and lines: which text annotators should read would be a guess."""
    joined: dict[object, str] = {}
    where: dict[object, tuple[Path, int]] = {}
    for path in paths:
        items = read_items(path)
        text_of = items.text_of()  # refuses a file without texts; ids within a file are unique (read_items checks)
        for value, line in zip(items.ids.tolist(), items.lines):
            if value in where:
                first, first_line = where[value]
                also = f"also in {first} (line {first_line}); ids must be unique across the item files"
                raise InputError(items.path, f"duplicate id {value!r}: {also}", line=line)
            joined[value] = text_of[value]
            where[value] = (items.path, line)
    return joined
