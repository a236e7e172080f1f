"""The participants' files of `fsb annotate import --format best-worst-tools` (Hollis's best-worst tools write
one file a participant): a file, a folder of them, or several files (a shell glob such as `raw/*`, as the
tools' README passes them), listed before anything is read, so that the command knows every input (an
--out among them is refused, even with --force) and nothing is lost or counted twice silently.

The rule: every `.csv` file of a folder is a participant. Skipped, and listed in the summary (`skipped`):
hidden entries (a name starting with '.': macOS's `._p01.csv`; and `__MACOSX`), fsb's own record
(`.fsb-files.json`) and the files fsb wrote there that nobody changed (an earlier import's judgments), and
files of other kinds (notes.txt, README.md). Refused, naming them, as participants fsb cannot read: a `.tsv`
file (save it as .csv), a subfolder (give it on its own), a link that leads nowhere, and a file whose bytes
repeat another's (a copy, or a link to a file already listed: one participant's trials counted twice).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fsb.core.readers import InputError, quoted
from fsb.core.seals import FILES_RECORD, file_difference

__all__ = ["Participants", "participant_files"]


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
                where = source if entry is not source else entry.parent
                raise InputError(where, f"{quoted(entry.name)} {problem}; every .csv file here is read as a participant")
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
