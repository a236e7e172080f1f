"""Judgments in the layouts other tools write -> fsb's judgments layout (`Item1..ItemK,BestItem,WorstItem
[,Annotator][,Timestamp]`), for `fsb annotate import --format F`: the one door, since `fsb score`, `fsb
reliability` and `fsb build` read fsb's layout only and name this command when given another
(`fsb.tables.rules.foreign_layout`, the one table of the layouts).

- `best-worst-tools`: Hollis's best-worst tools, one file, a folder of per-participant .csv files or several
  files (`fsb.annotate.layouts_files`): best, worst, option1..optionM; the annotator is a User or uuid
  column, else (a folder, several files) the file's stem;
- `mturk`: Amazon Mechanical Turk's batch results CSV of fsb's forms: Input.Item1..K, Answer.best,
  Answer.worst, WorkerId; Rejected assignments (AssignmentStatus) left out and counted;
- `label-studio`: Label Studio's CSV export (its JSON export: `fsb.annotate.forms.import_label_studio`):
  item1..itemK, best and worst as positions 1..K, annotator (the user id), created_at;
- `columns`: anything else, by a column map (`ColumnMap`), which also names other columns for the first two;
  a file with MTurk's AssignmentStatus column has its Rejected rows left out and counted, as `mturk`.

Hollis's tools write two variants, told apart per row: the tools' README lists all K items in the option
columns (best and worst among them); their raw data files list only the K-2 unchosen items there. A row
whose best and worst are both among its options is of the first, one where neither is of the second; one
where only one of them is, is ambiguous and refused. Every row of every file must give the same K.
Labels and annotator ids follow fsb's rules for ids (stripped, NFC-normalised as
`fsb.tables.rules.label_values` does; no line break, NUL or invisible or bidi control character:
`fsb.tables.csvrows.text_problem`). One annotator's second judgment of a tuple (its tuple_id where the file
has one, else its items in any order) is refused in every format. A refusal names the file, the line and
the field, and nothing is written.
"""

from __future__ import annotations

import csv
import io
import os
import unicodedata
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsb.annotate.forms import JUDGMENTS_KIND
from fsb.annotate.layouts_files import Participants, check_layout, is_json, numbered, participant_files, read_table
from fsb.core.errors import FsbError
from fsb.core.readers import InputError, quoted
from fsb.core.seals import recorded_write
from fsb.tables.csvrows import Rows, require_header, text_problem

__all__ = ["FORMATS", "ColumnMap", "check_layout", "import_layout", "is_json"]

FORMATS = ("best-worst-tools", "mturk", "label-studio", "columns")
HOLLIS_ANNOTATOR = ("User", "uuid")  # flag_noncompliant_users.py --filter writes User; the tools' raw data has uuid
MTURK_STATUSES = ("Submitted", "Approved", "Rejected")


@dataclass(frozen=True)
class ColumnMap:
    """Which columns hold the items, the best and worst choices and the annotator; None: the format's own."""

    items: Sequence[str] | None = None
    best: str | None = None
    worst: str | None = None
    annotator: str | None = None

    def check(self) -> None:
        """Refuse a map that cannot be meant, in one line: an empty name, or one column in two roles (--best-col
        naming an item column, --annotator-col equal to --best-col), which would read nonsense quietly."""
        roles = [("--best-col", self.best), ("--worst-col", self.worst), ("--annotator-col", self.annotator)]
        roles += [("--items-cols", c) for c in self.items or ()]
        taken: dict[str, str] = {}
        for option, name in roles:
            if name is not None and not name.strip():
                raise FsbError(f"{option} names no column (an empty name)")
            if name is not None and taken.setdefault(name.strip(), option) != option:
                raise FsbError(f"{option} and {taken[name.strip()]} both name the column {quoted(name)}: each column has one role")


@dataclass
class _Judgments:
    """The converted rows, checked as they come: labels by fsb's rules, one K throughout, no repeated item,
    best and worst two different items of the row; `seen` finds an annotator's second answer to one tuple."""

    rows: list[list[str]] = field(default_factory=list)
    k: int | None = None
    first: str = ""
    labels: dict[str, str | tuple[str]] = field(default_factory=dict)
    seen: dict[tuple[str, Hashable], tuple[Path, int]] = field(default_factory=dict)
    answers: tuple[Rows, list[int]] | None = None  # the table and the best/worst columns that --positions could read

    def label(self, path: Path, line: int, name: str, raw: str) -> str:
        """`raw` as fsb reads a label: stripped and NFC-normalised; empty, multi-line or invisible ones refused."""
        got = self.labels.get(raw)
        if got is None:
            text = raw.strip()
            problem = "empty value" if not text else _break(text) or text_problem(text)
            got = (problem,) if problem else unicodedata.normalize("NFC", text)
            self.labels[raw] = got
        if isinstance(got, tuple):
            raise InputError(path, got[0], line=line, field=name)
        return got

    def who(self, path: Path, line: int | None, name: str | None, raw: str, what: str = "an annotator id") -> str:
        """An annotator id by the rules of item ids (`label`): stripped, NFC-normalised ("Jose" + U+0301 is
        "José", one annotator), no line break, NUL, invisible or bidi control character; empty: none."""
        text = raw.strip()
        if problem := _break(text) or text_problem(text):
            raise InputError(path, f"{what}: {problem.replace('inside an id', 'inside it')}", line=line, field=name)
        return unicodedata.normalize("NFC", text)

    def add(
        self, path: Path, line: int, items: list[tuple[str, str]], best: tuple[str, str], worst: tuple[str, str], extra: list[str]
    ) -> None:
        """One judgment: (column, label) of each item in order, of the best and the worst choice."""
        seen: dict[str, str] = {}
        for name, item in items:
            if item in seen:
                raise InputError(path, f"the tuple repeats item {quoted(item)} (also in {seen[item]!r})", line=line, field=name)
            seen[item] = name
        for (name, chosen), what in ((best, "best"), (worst, "worst")):
            if chosen not in seen:
                shown = ", ".join(quoted(i) for _, i in items)
                hint = " (answers look like positions 1..K: use --positions)" if self.positional(len(items)) else ""
                raise InputError(
                    path, f"the {what} choice {quoted(chosen)} is not one of the tuple's items ({shown}){hint}", line=line, field=name
                )
        if best[1] == worst[1]:
            raise InputError(path, f"best and worst are the same item {quoted(best[1])}", line=line, field=worst[0])
        if self.k is None:
            self.k, self.first = len(items), f"{path} line {line}"
        elif len(items) != self.k:
            raise InputError(path, f"a tuple of {len(items)} items where the first ({self.first}) has {self.k}", line=line)
        self.rows.append([*(i for _, i in items), best[1], worst[1], *extra])

    def positional(self, k: int) -> bool:
        """Whether every answer in `answers` (a file read without --positions) is a place 1..k."""
        if self.answers is None:
            return False
        table, cols = self.answers
        values = [row[c].strip() for row in table.rows for c in cols]
        return all(v.isascii() and v.isdigit() and len(v) <= 9 and 1 <= int(v) <= k for v in values)

    def once(self, path: Path, line: int, name: str, annotator: str, tuple_key: Hashable) -> None:
        """Refuse an annotator's second judgment of one tuple (`tuple_key`), naming the first's file and line."""
        if annotator:
            first = self.seen.setdefault((annotator, tuple_key), (path, line))
            if first != (path, line):
                where = f"line {first[1]}" if first[0] == path else f"{first[0]} line {first[1]}"
                raise InputError(path, f"annotator {quoted(annotator)} already judged this tuple ({where})", line=line, field=name)


def _break(text: str) -> str | None:
    """Why a label cannot be one field of a judgments line: a line break or a NUL byte inside it."""
    if "\n" in text or "\r" in text:
        return "a line break inside an id"
    return "a NUL byte (\\0) inside an id" if "\0" in text else None


def _columns(table: Rows, names: Sequence[str], expected: str) -> list[int]:
    require_header(table.path, table.header, names, expected)
    return [table.header.index(n) for n in names]


def _tuple_key(tuple_id: str, items: list[tuple[str, str]]) -> tuple[str, ...]:
    """What makes two judgments one tuple's: its id where the file has one (fsb's forms' tuple_id), else its items
    in any order, as a tuple (a joined string would make "a|b","c" and "a","b|c" one tuple)."""
    return ("tuple_id", tuple_id.strip()) if tuple_id.strip() else ("items", *sorted(v for _, v in items))


def _rejected(table: Rows, i: int, col: int) -> bool:
    """Whether row `i` is a Rejected MTurk assignment (left out and counted); a status other than MTurk's refused."""
    status = table.rows[i][col].strip()
    if status not in MTURK_STATUSES:
        message = f"status {quoted(status)} is not one of {', '.join(MTURK_STATUSES)}"
        raise InputError(table.path, message, line=table.lines[i], field=table.header[col])
    return status == "Rejected"


def _choice(got: _Judgments, table: Rows, i: int, col: int, items: list[tuple[str, str]], positions: bool) -> tuple[str, str]:
    """The (column, item) a best or worst cell names: an item id, or with `positions` a place 1..K."""
    name, raw, line = table.header[col], table.rows[i][col].strip(), table.lines[i]
    if not positions:
        return name, got.label(table.path, line, name, raw)
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9) or not 1 <= int(raw) <= len(items):  # no int() of 5000 digits
        raise InputError(table.path, f"{quoted(raw)} is not a position 1..{len(items)}", line=line, field=name)
    return name, items[int(raw) - 1][1]


def _best_worst_tools(found: Participants, cmap: ColumnMap, got: _Judgments) -> dict[str, Any]:
    """Hollis's layout: the files `fsb.annotate.layouts_files.participant_files` lists; see the module's docstring."""
    variants = {"all items among the options": 0, "only unchosen items among the options": 0}  # rows of each
    annotator_from: dict[str, int] = {}  # where each file's annotators come from -> files
    stems: dict[str, Path] = {}
    for f in found.files:
        table = read_table(f, "best-worst-tools")
        options = list(cmap.items or numbered(f, table.header, "option")) or ["option1"]
        best_col, worst_col = cmap.best or "best", cmap.worst or "worst"
        cols = _columns(table, [best_col, worst_col, *options], "best, worst, option1..optionK")
        who = cmap.annotator or next((c for c in HOLLIS_ANNOTATOR if c in table.header), None)
        who_col = _columns(table, [who], "the --annotator-col column")[0] if who else None
        stem = None
        if who is None and found.one_a_participant:
            stem = got.who(f.parent, None, None, f.stem, what=f"the file name {quoted(f.name)} (the annotator)")
            if stems.setdefault(stem, f) != f:
                raise InputError(f, f"the annotator is the file's name, {quoted(stem)}, as for {stems[stem]}: rename one")
        source = who or ("the file's name" if stem is not None else "none")
        annotator_from[source] = annotator_from.get(source, 0) + 1
        for i, row in enumerate(table.rows):
            line = table.lines[i]
            best = (best_col, got.label(f, line, best_col, row[cols[0]]))
            worst = (worst_col, got.label(f, line, worst_col, row[cols[1]]))
            opts = [(n, got.label(f, line, n, row[c])) for n, c in zip(options, cols[2:])]
            among = [any(v == chosen[1] for _, v in opts) for chosen in (best, worst)]
            if among[0] != among[1]:
                inside, outside = (best, worst) if among[0] else (worst, best)
                raise InputError(
                    f,
                    f"ambiguous: {inside[0]} {quoted(inside[1])} is among the options but {outside[0]} {quoted(outside[1])} is not "
                    f"(both are in the README's layout, neither in the raw-data layout of the unchosen items)",
                    line=line,
                    field=outside[0],
                )
            variants[f"{'all' if among[0] else 'only unchosen'} items among the options"] += 1
            annotator = got.who(f, line, who, row[who_col]) if who and who_col is not None else stem
            items = opts if among[0] else [best, worst, *opts]
            got.add(f, line, items, best, worst, [] if annotator is None else [annotator])
            got.once(f, line, who or best_col, annotator or "", _tuple_key("", items))
    return {"files": len(found.files), "skipped": found.skipped, "annotator_from": annotator_from, "rows_by_variant": variants}


def _mturk(path: Path, cmap: ColumnMap, got: _Judgments, positions: bool) -> dict[str, Any]:
    """An MTurk batch results CSV: a row per assignment, Rejected ones left out and counted."""
    table = read_table(path, "mturk")
    items = list(cmap.items or numbered(path, table.header, "Input.Item")) or ["Input.Item1"]
    best_col, worst_col, who = cmap.best or "Answer.best", cmap.worst or "Answer.worst", cmap.annotator or "WorkerId"
    expected = (
        "AssignmentStatus, WorkerId, Input.Item1..K, Answer.best, Answer.worst; another template: --items-cols, --best-col, --worst-col"
    )
    cols = _columns(table, ["AssignmentStatus", who, best_col, worst_col, *items], expected)
    key = table.header.index("Input.tuple_id") if "Input.tuple_id" in table.header else None  # fsb's forms' tuple id
    rejected = 0
    got.answers = None if positions else (table, cols[2:4])
    for i, row in enumerate(table.rows):
        line = table.lines[i]
        if _rejected(table, i, cols[0]):
            rejected += 1
            continue
        shown = [(n, got.label(path, line, n, row[c])) for n, c in zip(items, cols[4:])]
        best, worst = (_choice(got, table, i, c, shown, positions) for c in cols[2:4])
        annotator = got.who(path, line, who, row[cols[1]])
        got.add(path, line, shown, best, worst, [annotator])
        got.once(path, line, who, annotator, _tuple_key(row[key] if key is not None else "", shown))
    return {"files": 1, "annotator_from": who, "rejected_left_out": rejected}


def _label_studio_csv(path: Path, got: _Judgments) -> dict[str, Any]:
    """Label Studio's CSV export of a project `fsb annotate export --format label-studio` made: a row per
    submitted annotation (cancelled ones are not exported), best and worst as positions 1..K in the row's
    item1..itemK; a task nobody annotated is a row without annotation_id, left out and counted."""
    table = read_table(path, "label-studio")
    items = numbered(path, table.header, "item") or ["item1"]
    cols = _columns(table, ["annotation_id", "annotator", "created_at", "tuple_id", "best", "worst", *items], "Label Studio's CSV export")
    unannotated = 0
    for i, row in enumerate(table.rows):
        line = table.lines[i]
        if not row[cols[0]].strip():
            unannotated += 1
            continue
        shown = [(n, got.label(path, line, n, row[c])) for n, c in zip(items, cols[6:])]
        best, worst = (_choice(got, table, i, c, shown, True) for c in cols[4:6])
        annotator = got.who(path, line, "annotator", row[cols[1]])
        got.add(path, line, shown, best, worst, [annotator, got.who(path, line, "created_at", row[cols[2]])])
        got.once(path, line, "annotator", annotator, _tuple_key(row[cols[3]], shown))
    return {"files": 1, "annotator_from": "annotator", "tasks_without_annotation": unannotated}


def _columns_map(path: Path, cmap: ColumnMap, got: _Judgments, positions: bool) -> dict[str, Any]:
    """Any CSV with one row a judgment: the item, best, worst (and annotator) columns as mapped."""
    if not (cmap.items and cmap.best and cmap.worst):
        raise InputError(path, "--format columns needs --items-cols A,B,.. (2 or more), --best-col and --worst-col")
    table = read_table(path, "columns")
    names = [cmap.best, cmap.worst, *([cmap.annotator] if cmap.annotator else []), *cmap.items]
    cols = _columns(table, names, "the columns --items-cols, --best-col, --worst-col and --annotator-col name")
    n = 3 if cmap.annotator else 2
    status = table.header.index("AssignmentStatus") if "AssignmentStatus" in table.header else None  # an MTurk file
    rejected = 0
    got.answers = None if positions else (table, cols[:2])
    for i, row in enumerate(table.rows):
        line = table.lines[i]
        if status is not None and _rejected(table, i, status):
            rejected += 1
            continue
        shown = [(name, got.label(path, line, name, row[c])) for name, c in zip(cmap.items, cols[n:])]
        best, worst = (_choice(got, table, i, c, shown, positions) for c in cols[:2])
        extra = [got.who(path, line, cmap.annotator, row[cols[2]])] if cmap.annotator else []
        got.add(path, line, shown, best, worst, extra)
        if cmap.annotator:
            got.once(path, line, cmap.annotator, extra[0], _tuple_key("", shown))
    return {"files": 1, "annotator_from": cmap.annotator, **({"rejected_left_out": rejected} if status is not None else {})}


def import_layout(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    fmt: str,
    out: str | os.PathLike[str],
    *,
    columns: ColumnMap | None = None,
    positions: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Convert judgments in the layout `fmt` (`FORMATS`; Label Studio's JSON export is
    `fsb.annotate.forms.import_label_studio`'s) into fsb's judgments file `out`, all checked before anything
    is written; an existing `out` is replaced only if fsb wrote it and nobody changed it, or with `force`.

    Parameters
    ----------
    source
        the file (best-worst-tools: or a folder of per-participant .csv files, or several files and folders,
        `fsb.annotate.layouts_files.participant_files`).
    fmt
        one of `FORMATS`.
    out
        the judgments CSV.
    columns
        the column map (`--format columns`), or columns other than a format's own (e.g. an MTurk template's).
    positions
        best and worst are 1-based places in the item columns, not ids (mturk, columns).
    force
        replace a file that is not fsb's unchanged output.

    Returns
    -------
    dict
        format, files, judgments, tuple_size, annotators, where the annotator came from, what was left out, out.
    """
    sources = [source] if isinstance(source, str | os.PathLike) else list(source)
    if fmt != "best-worst-tools" and (len(sources) != 1 or Path(sources[0]).is_dir()):
        raise InputError(sources[0], f"--format {fmt} reads one file; only --format best-worst-tools reads a folder or several files")
    path, cmap, got = Path(sources[0]), columns or ColumnMap(), _Judgments()
    cmap.check()
    if fmt == "best-worst-tools":
        report = _best_worst_tools(participant_files(sources), cmap, got)
    elif fmt == "mturk":
        report = _mturk(path, cmap, got, positions)
    elif fmt == "label-studio":
        report = _label_studio_csv(path, got)
    elif fmt == "columns":
        report = _columns_map(path, cmap, got, positions)
    else:
        raise ValueError(f"format must be one of {FORMATS}")
    if not got.rows:
        raise InputError(
            path, "no judgments to import" + (f" ({report['rejected_left_out']} rejected)" if report.get("rejected_left_out") else "")
        )
    k = got.k or 0
    extra = ["Annotator"] * (len(got.rows[0]) > k + 2) + ["Timestamp"] * (len(got.rows[0]) > k + 3)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*(f"Item{j + 1}" for j in range(k)), "BestItem", "WorstItem", *extra])
    writer.writerows(got.rows)
    recorded_write(out, buffer.getvalue(), force=force, kind=JUDGMENTS_KIND)
    annotators = {r[k + 2] for r in got.rows if extra and r[k + 2]}
    return {"format": fmt, **report, "judgments": len(got.rows), "tuple_size": k, "annotators": len(annotators), "out": str(out)}
