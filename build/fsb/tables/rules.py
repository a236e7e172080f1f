"""The judgments layout and its rules, in one place for every reader path of `fsb.tables.judgments` (whole
file, block stream, Python's reader): the header (`label_fields`: Item1..ItemK with no gap, BestItem,
WorstItem, the optional Annotator and Timestamp), the labels (`label_values`: the one id rule of
`fsb.tables.csvrows.id_problem`, else opaque strings, NFC-normalised, no invisible or bidi control
character) and the rows (`row_problems`: a repeated item, best = worst, a best or worst not among the
row's items, an unknown id), with their wording. Each path hands back the same `Cells`.
"""

from __future__ import annotations

import csv
import mmap
import os
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fsb.core.readers import STDIN_COPIES, InputError
from fsb.tables.csvrows import INT64_MAX, canonical_id, check_header, first_true, id_problem, require_header, show_label, text_problem

__all__ = [
    "IRREGULAR_HINT",
    "IRREGULAR_KINDS",
    "LAYOUT",
    "Cells",
    "bom",
    "foreign_layout",
    "header_of",
    "label_fields",
    "label_values",
    "looks_numeric",
    "refuse_nul",
    "row_problems",
]

IRREGULAR_KINDS = ("repeated item", "best = worst")
IRREGULAR_HINT = " (a quality-control row? --invalid count scores it as the reference Perl script does, --invalid drop leaves it out)"
LAYOUT = "Item1..ItemK, BestItem, WorstItem"  # what a refusal of the header says fsb expected
_ITEM = re.compile(r"Item([1-9][0-9]*)")
_NEAR_ITEM = re.compile(r"\s*item\s*[-_ ]?\s*[0-9]+\s*", re.IGNORECASE)  # item5, ITEM 5, Item0: meant as an item column


@dataclass
class Cells:
    """The label columns of a judgments file, factorised by a reader path: `cells[j, i]` (column j, row i)
    indexes `uniques` (stripped strings as a list or a numpy unicode array, or int64 values when pyarrow read
    every label as an integer in range). With `rank`, `uniques` come sorted and distinct, and code c stands
    for uniques[rank[c]]. `ascii_only`: what the reader knows of the labels (None: nothing)."""

    cells: np.ndarray
    uniques: list[str] | np.ndarray
    annotator: np.ndarray | None
    line_of: Callable[[int], int]
    timestamp: np.ndarray | None = None
    rank: np.ndarray | None = None
    chosen_in_items: bool = False  # every BestItem and WorstItem is known to be one of its row's items
    ascii_only: bool | None = None


def bom(data: bytes | mmap.mmap) -> int:
    """Bytes of a UTF-8 byte order mark at the start of `data` (3 or 0)."""
    return 3 if data[:3] == b"\xef\xbb\xbf" else 0


def header_of(path, data: bytes | mmap.mmap, start: int = 0) -> tuple[list[str], int] | None:
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
    csv.field_size_limit(sys.maxsize)  # a header field of any size (csv's default limit is 131072 characters)
    names = next(csv.reader([line]))
    return check_header(path, names), (end + 1 - start if end >= 0 else len(data) - start)


def foreign_layout(header: Sequence[str]) -> tuple[str, str] | None:
    """(the `fsb annotate import --format` that reads it, what it is) for a header in a layout another tool
    writes, or None. The one table of those layouts: `fsb annotate import` names it when a file is not of the
    format asked for, and fsb's judgments readers when they are given such a file (`label_fields`)."""
    names = {str(h).strip() for h in header}
    first = str(header[0]).lstrip() if header else ""
    if first.startswith(("[", "{")):
        return "label-studio", "JSON (Label Studio's JSON export?)"
    if {"HITId", "AssignmentId", "WorkerId"} <= names or any(n.startswith(("Input.", "Answer.")) for n in names):
        return "mturk", "an MTurk batch results file (HITId, WorkerId, Input.*/Answer.* columns)"
    if {"annotation_id", "annotator", "lead_time"} <= names:
        return "label-studio", "a Label Studio CSV export (annotation_id, annotator, lead_time columns)"
    if {"best", "worst", "option1"} <= names:
        return "best-worst-tools", "the layout of Hollis's best-worst tools (best, worst, option1..optionK)"
    if {"tuple_id", "best", "worst"} <= names:
        return "csv", "answers to fsb's forms (tuple_id, best, worst)"
    return None


def label_fields(path, header: Sequence[str]) -> tuple[list[str], str | None, str | None]:
    """(Item1..ItemK, BestItem, WorstItem; the Annotator column or None; the Timestamp column or None). A
    header missing one of them, or naming Item columns with a gap (Item1, Item2, Item4: Item3 missing, which
    would drop Item4 silently), is refused in one line naming the missing column; a header of a layout
    another tool writes (`foreign_layout`), in one line naming it and the `fsb annotate import` to use."""
    if not {"Item1", "Item2", "BestItem", "WorstItem"} <= set(header) and (foreign := foreign_layout(header)):
        fmt, what = foreign
        tuples = " --tuples FORMS.csv" if fmt == "csv" else ""
        name = "-" if os.fspath(path) in STDIN_COPIES else shlex.quote(os.fspath(path))
        command = f"fsb annotate import {name} --format {fmt}{tuples} --out judgments.csv"
        raise InputError(path, f"this looks like {what}, not judgments ({LAYOUT}): convert it with `{command}`", line=1)
    numbers = sorted(int(m.group(1)) for h in header if (m := _ITEM.fullmatch(h)))
    k = next((j for j in range(1, len(numbers) + 2) if j not in numbers), 1) - 1
    if k < 2 or k < len(numbers):
        missing = f"Item{k + 1}"
        after = f": the header names Item{numbers[-1]} but not {missing} (item columns have no gap)" if numbers and numbers[-1] > k else ""
        require_header(path, header, (missing,), LAYOUT, after)
    require_header(path, header, ("BestItem", "WorstItem"), LAYOUT)
    items = [f"Item{j + 1}" for j in range(k)]
    near = next((h for h in header if _NEAR_ITEM.fullmatch(h) and h.strip() not in items), None)
    if near is not None:  # read as an extra column, it would drop that column's items silently
        raise InputError(
            path,
            f"{near!r} looks like an item column but is not one of {items[0]}..{items[-1]} (names are Item1..ItemK, exact case, no gap)",
            line=1,
            field=near,
        )
    annotator = next((c for c in ("Annotator", "annotator") if c in header), None)
    timestamp = next((c for c in ("Timestamp", "timestamp") if c in header), None)
    return [*items, "BestItem", "WorstItem"], annotator, timestamp


def looks_numeric(head: bytes, columns: list[int], rows: int = 50) -> bool:
    """Whether the label fields of the first `rows` complete lines of `head` are all digits (after
    stripping): string ids then skip the integer parse attempt, and large files take the block stream."""
    lines = head.split(b"\n")[:-1][:rows]
    try:
        records = list(csv.reader(line.decode("utf-8") for line in lines))
    except (UnicodeDecodeError, csv.Error):
        return False
    return all(j < len(r) and r[j].strip().isdigit() for r in records for j in columns)


def refuse_nul(path, data: bytes | mmap.mmap, header: list[str]) -> None:
    """Refuse a NUL byte anywhere in the file, naming its line and field: text ends at a NUL for numpy's and C's
    strings, so "a\\0" would silently become the item "a" (the reference Perl script keeps them apart)."""
    pos = data.find(b"\0")
    if pos < 0:
        return
    before = bytes(data[:pos])  # an anonymous mapping has no count(); this copy happens on the refusal only
    line, column = before.count(b"\n") + 1, before[before.rfind(b"\n") + 1 :].count(b",")
    name = header[column] if column < len(header) else f"column {column + 1}"
    raise InputError(path, "a NUL byte (\\0) in the file: labels are text without NUL bytes", line=line, field=name)


def label_values(
    uniques: list[str] | np.ndarray, integer_ids: bool, high: int, ascii_only: bool | None = None
) -> tuple[np.ndarray, Callable[[int], str], np.ndarray, bool]:
    """Per distinct label: whether it is refused, the problem of label i, the values (int64 ids, or the
    strings NFC-normalised), and whether the values are still the labels as given (same order, distinct).

    Labels are integer ids when every one is an id in 0..2**63-1 (or `integer_ids`: then each must be one in
    0..high); otherwise every label is an opaque string, all-digit ones too, whatever their size."""
    if isinstance(uniques, np.ndarray) and uniques.dtype.kind in "iu":  # pyarrow read every label as an id in range
        return np.zeros(uniques.size, dtype=bool), str, uniques.astype(np.int64), True
    if isinstance(uniques, np.ndarray):  # packed short strings: vectorised, unless they are all ids after all
        if not integer_ids and not _all_canonical(uniques):
            return _text_values(uniques, ascii_only)
        uniques = uniques.tolist()
    if integer_ids or all(canonical_id(u) and id_problem(u, INT64_MAX) is None for u in uniques if u):
        problems = [id_problem(u, high) for u in uniques]
        values = np.array([int(u) if q is None else -1 for u, q in zip(uniques, problems)], dtype=np.int64)
        return np.array([q is not None for q in problems], dtype=bool), problems.__getitem__, values, True
    return _text_values(np.array(uniques, dtype=str), all(u.isascii() for u in uniques))


def _text_values(values: np.ndarray, ascii_only: bool | None) -> tuple[np.ndarray, Callable[[int], str], np.ndarray, bool]:
    """`label_values` of opaque string labels: an empty one is refused, a non-ASCII one holding an invisible
    or bidi control character too (`csvrows.text_problem`), the others NFC-normalised."""
    bad = np.char.str_len(values) == 0
    if ascii_only is None:
        ascii_only = values.size == 0 or int(np.ascontiguousarray(values).view(np.uint32).max(initial=0)) < 0x80
    if ascii_only:
        return bad, lambda i: "empty value", values, True
    import unicodedata

    width = values.dtype.itemsize // 4
    wide = np.flatnonzero(np.ascontiguousarray(values).view(np.uint32).reshape(values.size, width).max(axis=1) >= 0x80)
    problems: dict[int, str] = {}
    renamed: dict[int, str] = {}
    for i, text in zip(wide.tolist(), values[wide].tolist()):
        if (problem := text_problem(text)) is not None:
            problems[i] = problem
        elif not unicodedata.is_normalized("NFC", text):
            renamed[i] = unicodedata.normalize("NFC", text)
    bad[list(problems)] = True
    if renamed:
        listed = values.tolist()
        for i, text in renamed.items():
            listed[i] = text
        values = np.array(listed, dtype=str)
    return bad, lambda i: problems.get(i, "empty value"), values, not renamed


def _all_canonical(labels: np.ndarray) -> bool:
    """`canonical_id` of every non-empty label of a numpy unicode array, vectorised."""
    if labels.size == 0 or any(label and not canonical_id(label) for label in labels[:8].tolist()):
        return labels.size == 0  # one of the first labels is no id: no pass over all of them (1e6 hashes)
    length = np.char.str_len(labels)
    if int(labels.view(np.uint32).max(initial=0)) >= 0x80:
        return False
    ok = np.char.isdigit(labels) & ((length == 1) | ~np.char.startswith(labels, "0"))
    return bool((ok | (length == 0)).all())


def row_problems(
    items: np.ndarray,
    best: np.ndarray,
    worst: np.ndarray,
    labels: np.ndarray,
    fields: list[str],
    invalid: str,
    known: tuple[np.ndarray, str] | None,
    chosen_in_items: bool = False,
) -> tuple[list[tuple], dict[str, dict[str, int]], np.ndarray]:
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
            cell_bad = ~is_known[columns]
            row = first_true(cell_bad.any(axis=1))
            if row is not None:
                col = int(np.flatnonzero(cell_bad[row])[0])
                candidates.append((row, 0.5, fields[col], f"unknown id {show_label(labels[columns[row, col]])}: {known[1]}"))
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
            candidates.append((row, 1, fields[j], f"the tuple repeats item {show_label(labels[items[row, j]])}" + IRREGULAR_HINT))
        else:
            candidates.append((row, 2, "WorstItem", f"best and worst are the same item {show_label(labels[best[row]])}" + IRREGULAR_HINT))
    for priority, (name, chosen) in enumerate(() if chosen_in_items else (("BestItem", best), ("WorstItem", worst)), start=3):
        row = first_true(~(items == chosen[:, None]).any(axis=1))
        if row is not None:
            shown = ", ".join(show_label(v) for v in labels[items[row]])
            candidates.append((row, priority, name, f"{show_label(labels[chosen[row]])} is not one of the tuple's items ({shown})"))
    return candidates, irregular, repeat | same
