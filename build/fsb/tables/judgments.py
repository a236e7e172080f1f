"""The individual best-worst judgments file (`Item1..ItemK,BestItem,WorstItem[,Annotator][,Timestamp]`)
-> validated, integer-coded `Annotations` (`read_annotations`), and the checks against a set of uids.

Every path reads the one layout of `fsb.tables.rules` (its header, label and row rules and their
wording) and hands back the same `Cells`; this module picks the path, then checks labels per distinct
label and rows vectorised over codes, for every path alike:

| the file                                      | its path                               | why                                |
|-----------------------------------------------|----------------------------------------|------------------------------------|
| <= FAST_READER_BYTES (1 MiB), or not regular  | Python's csv: wholefile.python_cells   | done before pyarrow imports; exact |
| larger, a label of the first lines not digits | block stream: streamcells.stream_cells | memory follows the judgments       |
| larger, integer ids, or handed back           | whole file: wholefile.arrow_cells      | int64 parse; quoted newlines       |
| one that pyarrow cannot parse                 | Python's csv: wholefile.python_cells   | names the fault's line and field   |

The stream hands a file back on a quote or NUL byte, a block pyarrow cannot parse, two long labels
sharing a key or one label far longer than the rest. Labels are coded by `fsb.tables.labelcodes` (ids up
to 8 bytes as integer keys, longer ones by their words, best and worst by comparison with their row's
items) with no Python object per row. Every refusal is an `InputError` naming the file, the line (header
= line 1) and the field, and always the FIRST offending line of the file, whatever the column or check
(an unknown id included: `refuse_unknown_ids`).
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fsb.core.readers import InputError
from fsb.tables.csvrows import FAST_READER_BYTES, INT32_MAX, INT64_MAX, INVALID_POLICIES, Generations, Invalid, first_true, parse_rows
from fsb.tables.rules import IRREGULAR_KINDS, Cells, bom, header_of, label_fields, label_values, looks_numeric, refuse_nul, row_problems

__all__ = [
    "FAST_READER_BYTES",
    "IRREGULAR_KINDS",
    "Annotations",
    "check_coverage",
    "describe_irregular",
    "peek_header",
    "read_annotations",
    "refuse_unknown_ids",
]


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


def peek_header(path: Path, data: bytes) -> list[str]:
    """The stripped column names of a CSV file's header, from its bytes."""
    head = header_of(path, data, bom(data))
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
        Labels follow the one id rule (`fsb.tables.csvrows.id_problem`): integer ids when every label is an
        id in 0..2**63-1 (ASCII digits, no leading zero), else opaque strings, so "007" and "7" are two
        items (`fsb.tables.rules.label_values`). The
        error always names the first offending line of the file, whatever the column or check.
    """
    if invalid not in INVALID_POLICIES:
        raise ValueError(f"invalid must be one of {INVALID_POLICIES}")
    from fsb.tables import wholefile

    p = Path(path)
    high = INT32_MAX if integer_ids else INT64_MAX
    got, fields = _streamed(p, annotators)
    if got is None:
        data = wholefile.input_data(p, FAST_READER_BYTES)
        header = peek_header(p, data)
        fields, annotator, timestamp = label_fields(p, header)  # a header's own problems are named first
        refuse_nul(p, data, header)
        if not annotators:
            annotator = timestamp = None
        got = wholefile.arrow_cells(p, data, fields, annotator, high, timestamp) if len(data) > FAST_READER_BYTES else None
        del data
        if got is None:
            got = wholefile.python_cells(p, fields, annotator, timestamp)
    known = None if known_ids is None else (np.asarray(known_ids), unknown_why)
    return _validate(p, got, fields, integer_ids, high, invalid, known)


def _streamed(path: Path, annotators: bool) -> tuple[Cells | None, list[str]]:
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
    start = bom(head)
    found = header_of(path, head, start) if head.find(b"\n", start) >= 0 else None
    if found is None:
        return None, []
    header, offset = found
    fields, annotator, timestamp = label_fields(path, header)  # a header's own problems are named first
    if head.find(b"\0", 0, start + offset) >= 0:
        refuse_nul(path, head, header)
    if looks_numeric(head[start + offset :], [header.index(c) for c in fields]):
        return None, []  # integer ids: the whole-file path parses them as integers
    from fsb.tables.streamcells import stream_cells

    try:
        got = stream_cells(path, header, start + offset, fields, annotator if annotators else None, timestamp if annotators else None)
    except OSError:
        return None, []
    return got, fields if got is not None else []


def _validate(path: Path, got: Cells, fields: list[str], integer_ids: bool, high: int, invalid: str, known=None) -> Annotations:
    """Label checks per distinct label, row checks vectorised over codes; the first bad row in file order wins."""
    k = len(fields) - 2
    cells = got.cells
    bad_label, problem, values, as_given = label_values(got.uniques, integer_ids, high, got.ascii_only)  # per unique (c: got.rank[c])
    position = (lambda c: c) if got.rank is None else got.rank.__getitem__
    candidates: list[tuple] = []
    if bad_label.any():
        cell_bad = bad_label[position(cells)]
        row = first_true(cell_bad.any(axis=0))
        col = int(np.flatnonzero(cell_bad[:, row])[0])
        candidates.append((row, 0, fields[col], str(problem(int(position(cells[col, row]))))))
    if got.rank is not None and values.dtype.kind == "U" and as_given:  # sorted by the reader, and distinct
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
    more, irregular, odd = row_problems(items, best, worst, labels, fields, invalid, known, got.chosen_in_items)
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


def refuse_unknown_ids(annotations: Annotations, uids: np.ndarray, why: str) -> None:
    """Refuse (InputError at the first such cell in file order) judgments naming an id not in `uids`;
    `why` ends the message, e.g. "no such uid in FSB_text.csv" (the check of `rules.row_problems`)."""
    a, fields = annotations, [*annotations.item_columns, "BestItem", "WorstItem"]
    found, _, _ = row_problems(a.item_codes, a.best_codes, a.worst_codes, a.labels, fields, "count", (uids, why), True)
    if found:
        row, _, name, message = min(found)
        raise InputError(a.path, message, line=a.line_of(row), field=name)


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
