"""The files of `fsb annotate import --format F` (`fsb.annotate.layouts`) and each file's table, read before
any judgment is: which files (`participant_files`), whether a file is of the layout asked for
(`check_layout`), and its rows (`read_table`) with the item columns numbered without a gap (`numbered`).

Files. Hollis's best-worst tools write one file a participant: a file, a folder of them, or several files (a
shell glob such as `raw/*`, as the tools' README passes them) are listed before anything is read, so that
the command knows every input (an --out among them is refused, even with --force) and nothing is lost or
counted twice silently. Every `.csv` file of a folder is a participant. Skipped, and listed in the summary
(`skipped`): hidden entries (a name starting with '.': macOS's `._p01.csv`; and `__MACOSX`), fsb's own
record (`.fsb-files.json`) and the files fsb wrote there that nobody changed (an earlier import's
judgments), and files of other kinds (notes.txt, README.md). Refused, naming them, as participants fsb
cannot read: a `.tsv` file (save it as .csv), a subfolder (give it on its own), a link that leads nowhere,
and a file whose bytes repeat another's (a copy, or a link to a file already listed: one participant's
trials counted twice).

Tables. A file separated by ';' (Excel's CSV in some locales) or tabs is refused saying so; Excel's trailing
unnamed columns, empty in every row, are left out (Hollis's tools read them); a header of another layout is
refused naming it and the --format to use (`fsb.tables.rules.foreign_layout`).
"""

from __future__ import annotations

import csv
import hashlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fsb.core.readers import InputError, quoted, read_utf8
from fsb.core.seals import FILES_RECORD, file_difference
from fsb.tables.csvrows import Rows, check_header, csv_records, parse_rows
from fsb.tables.rules import foreign_layout

__all__ = ["Participants", "check_layout", "first_line", "is_json", "numbered", "participant_files", "read_table"]


@dataclass
class Participants:
    """The files to read, in order; what was skipped and why (name -> reason); whether the files are one a
    participant (a folder, or several files: a file without an id column is named by its file's stem)."""

    files: list[Path] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    one_a_participant: bool = False


def _why_skipped(entry: Path) -> str | None:
    """Why a folder entry is not a participant's file and may be passed over (None: it is read or refused)."""
    name = entry.name
    if name.startswith(".") or name == "__MACOSX":
        return "fsb's record" if name == FILES_RECORD else "hidden"
    if entry.is_file() and file_difference(entry) is None:
        return "written by fsb"
    if entry.is_file() and entry.suffix.lower() not in (".csv", ".tsv"):
        return f"not a .csv file ({entry.suffix or 'no extension'})"
    return None


def _refusal(entry: Path) -> str | None:
    """Why an entry that would be a participant cannot be read (None: a .csv file fsb reads)."""
    if entry.is_symlink() and not entry.exists():
        return "is a link that leads nowhere"
    if not entry.exists():
        return "does not exist"
    if entry.is_dir():
        return "is a subfolder (fsb reads the .csv files of one folder: give the subfolder on its own)"
    if entry.suffix.lower() == ".tsv":
        return "is tab-separated (.tsv): fsb reads comma-separated files; save it as .csv"
    return None if entry.is_file() else "is not a regular file"


def participant_files(sources: Sequence[str | os.PathLike[str]]) -> Participants:
    """The files of a best-worst-tools import by the module's rule: `sources` is one file, one folder, or
    several files and folders (each folder's entries in name order, then the files as given). A lone file is
    read whatever its name (but a .tsv is refused); a refusal is one line naming the entry."""
    paths = [Path(s) for s in sources]
    got = Participants(one_a_participant=len(paths) > 1 or any(p.is_dir() for p in paths))
    if len(paths) == 1 and not paths[0].is_dir():
        if paths[0].suffix.lower() == ".tsv":
            raise InputError(paths[0], "a tab-separated (.tsv) file: fsb reads comma-separated files; save it as .csv")
        got.files.append(paths[0])
        return got
    for source in paths:
        entries = sorted(source.iterdir()) if source.is_dir() else [source]
        for entry in entries:
            if (why := _why_skipped(entry)) is not None:
                got.skipped[str(entry)] = why
            elif (problem := _refusal(entry)) is not None:
                if entry is source:  # a file given on the command line
                    raise InputError(entry.parent, f"{quoted(entry.name)} {problem}")
                raise InputError(source, f"{quoted(entry.name)} {problem}; every .csv file here is read as a participant")
            else:
                got.files.append(entry)
    if not got.files:
        raise InputError(
            paths[0], "no .csv files to read (one a participant)" + (f"; skipped: {', '.join(got.skipped)}" if got.skipped else "")
        )
    _refuse_copies(got.files)
    return got


def _refuse_copies(files: list[Path]) -> None:
    """Refuse two files with the same bytes (a copy, or a link to a file already listed), naming both."""
    first: dict[str, Path] = {}
    for f in files:
        try:
            digest = hashlib.sha256(f.read_bytes()).hexdigest()
        except OSError:
            continue  # the reader names the problem
        if digest in first:
            raise InputError(
                f, f"the same bytes as {first[digest]} (a copy, or a link to it): one participant's trials would count twice; remove one"
            )
        first[digest] = f


# --- each file's table: its separator, its layout, Excel's trailing columns, the numbered item columns --------------


def check_layout(path: str | os.PathLike[str], fmt: str, header: Sequence[str] | None = None) -> None:
    """Refuse, in one line naming the layout it sees and the option to use, a file of another layout than
    `fmt` (the layouts of `fsb.tables.rules.foreign_layout`, and fsb's own judgments)."""
    if header is None:
        header = first_line(Path(path))
    _separated(path, header)
    names = {h.strip() for h in header}
    if {"Item1", "Item2", "BestItem", "WorstItem"} <= names:
        raise InputError(path, "this is already fsb's judgments layout (Item1..ItemK, BestItem, WorstItem): give it to fsb score as it is")
    seen = foreign_layout(header)
    if seen is not None and seen[0] != fmt:
        tuples = " --tuples FORMS.csv" if seen[0] == "csv" else ""
        raise InputError(path, f"this looks like {seen[1]}, not --format {fmt}: use --format {seen[0]}{tuples}")


def is_json(path: str | os.PathLike[str]) -> bool:
    """Whether a file starts (after a byte order mark and blanks) like JSON: Label Studio's JSON export, not its CSV."""
    try:
        with open(path, "rb") as f:
            return f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"[", b"{")
    except OSError:
        return False


def first_line(path: Path) -> list[str]:
    csv.field_size_limit(sys.maxsize)  # a field of any size is read (as `fsb.tables.csvrows.csv_records` reads them)
    try:
        with path.open(encoding="utf-8-sig", errors="replace", newline="") as f:
            return next(csv.reader([f.readline()]), [])
    except OSError:
        return []  # the reader names the problem


def _separated(path: str | os.PathLike[str], header: Sequence[str]) -> None:
    """Refuse a file separated by ';' (Excel's CSV in locales with a decimal comma) or tabs: read with commas, its
    header is one name, and every column would be reported missing although the header has it."""
    if len(header) == 1 and (sep := next((c for c in ";\t" if c in header[0]), None)):
        excel = " (Excel in some locales)" if sep == ";" else ""
        raise InputError(path, f"the file is separated by {sep!r}{excel}, not commas: save it as comma-separated CSV", line=1)


def read_table(path: Path, fmt: str) -> Rows:
    """The file's rows (`parse_rows`), its layout checked first (`check_layout`; --format columns takes any), and
    Excel's trailing unnamed columns (a header ending ",,", rows ending in empty fields) left out when they are
    empty in every row, as Hollis's tools read them; a value in one is refused naming its line."""
    head = first_line(path)
    _separated(path, head)
    if fmt != "columns":
        check_layout(path, fmt, head)
    if not head or head[-1].strip():
        return parse_rows(path)
    records = csv_records(read_utf8(path))
    header = records[0][1]
    width = len(header)
    while width and not header[width - 1].strip():
        width -= 1
    rows, lines = [], []
    for line, row in records[1:]:
        if (j := next((j for j in range(width, len(row)) if row[j].strip()), None)) is not None:
            raise InputError(path, f"a value in column {j + 1}, which has no name", line=line, field=f"column {j + 1}")
        if len(row) < width:
            raise InputError(path, f"{len(row)} fields where the header has {width}", line=line)
        rows.append(row[:width])
        lines.append(line)
    return Rows(path, check_header(path, header[:width]), lines, rows, records[0][0])


def numbered(path: Path, header: Sequence[str], prefix: str) -> list[str]:
    """prefix1..prefixK, the item columns of a layout, numbered from 1 with no gap (as fsb's judgments reader
    wants Item1..ItemK): a gap (option1, option2, option4), option0, or a near name (`Option 3`, `option3` with
    a NUL or a line break in it) is refused in one line naming the column, never read as a shorter tuple."""
    numbers: dict[int, str] = {}
    for name in header:
        squeezed = "".join(c for c in name if c.isalnum() or c == ".").lower()
        if not (squeezed.startswith(prefix.lower()) and squeezed[len(prefix) :].isdigit()):
            continue
        digits = name[len(prefix) :]
        if not (name.startswith(prefix) and digits.isascii() and digits.isdigit() and digits[0] != "0"):
            message = f"{quoted(name)} looks like an item column but is not one of {prefix}1..{prefix}K (exact case, from 1)"
            raise InputError(path, message, line=1, field=name)
        numbers[int(digits)] = name
    k = next(j for j in range(1, len(numbers) + 2) if j not in numbers) - 1
    if k < len(numbers):
        message = f"missing column: the header names {prefix}{max(numbers)} but not {prefix}{k + 1} (item columns have no gap)"
        raise InputError(path, message, line=1, field=f"{prefix}{k + 1}")
    return [numbers[j] for j in range(1, k + 1)]
